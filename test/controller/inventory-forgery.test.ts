/**
 * One GPU node's Redis credentials must not steer the leader. On a real redis-server with the
 * rendered ACL file, four nodes heartbeat as `llmha-agent`; the leader (`llmha-controller`)
 * reads which nodes exist and where from an inventory served as the Kubernetes API serves
 * Node objects. Then, with the agent role's credentials, an attacker adds phantom members
 * and records, moves a member to another AZ, plants ids in an AZ's available set and deletes
 * the shared indexes (`members`, `nodes`, `dead`, `azs`). With the inventory the evaluation
 * does not move (AZ states, capacities, tier, standby, shift), the forgeries are counted
 * (`llmha_redis_distrusted_total{what="forged"}`) and the planted ids leave the available set.
 * The same attack against a leader without an inventory does move it: the attack is real.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { FleetMetrics } from "../../agent/src/fleet/controller/metrics";
import type { Evaluation } from "../../agent/src/fleet/controller/state";
import { KubeInventory, parseNodeList, type InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import { publishAnswers, readExpectation } from "../../agent/src/node/canary/store";
import { waitFor } from "../../agent/src/util/net";
import { labRedisAcl, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { testLogger } from "../redis/helpers";

const log = testLogger();
let server: RedisServerHandle;
let acl: LabRedisAcl;
let api: Server;
let apiUrl = "";
const clients: RedisClient[] = [];
const NODES: InventoryNode[] = [
  { nodeId: "a1", az: "az-a", gpus: 8 }, { nodeId: "a2", az: "az-a", gpus: 8 },
  { nodeId: "b1", az: "az-b", gpus: 8 }, { nodeId: "b2", az: "az-b", gpus: 8 },
];

/** A Kubernetes NodeList of these nodes, as the API server answers `GET /api/v1/nodes`. */
function nodeList(nodes: InventoryNode[]): object {
  return {
    kind: "NodeList", apiVersion: "v1",
    items: nodes.map((n) => ({
      metadata: { name: n.nodeId, labels: { "topology.kubernetes.io/zone": n.az, "llm-ha.io/gpu-class": "h100" } },
      spec: { providerID: `aws:///${n.az}/i-${n.nodeId}` },
      status: { capacity: { "nvidia.com/gpu": String(n.gpus) } },
    })),
  };
}

async function as(cluster: string, role: "llmha-agent" | "llmha-controller"): Promise<RedisClient> {
  const c = createRedisClient(server.urlAs(role), { name: `inv-${role}`, log, env: {} });
  clients.push(c);
  expect(await c.whenReady(5000)).toBe(true);
  void cluster;
  return c;
}

beforeAll(async () => {
  acl = labRedisAcl("inv");
  server = await startRedisServer({ acl });
  let seenSelector = "";
  api = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    seenSelector = u.searchParams.get("labelSelector") ?? "";
    if (u.pathname !== "/api/v1/nodes" || seenSelector !== "llm-ha.io/gpu-class") return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(nodeList(NODES)));
  });
  await new Promise<void>((r) => api.listen(0, "127.0.0.1", () => r()));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const c of clients) await c.close();
  await server?.stop();
  await new Promise<void>((r) => (api ? api.close(() => r()) : r()));
});

async function beat(agent: RedisClient, keys: RedisKeys, id: string, az: string): Promise<void> {
  await heartbeatScript(
    agent.redis,
    { node: keys.node(id), available: keys.azAvailable(az), events: keys.events, nodes: keys.nodes, members: keys.members, azs: keys.azs, dead: keys.dead },
    {
      nodeId: id, az, status: "HEALTHY", phase: "serving", weight: 100, loadScore: 1, gpus: 8, gpusExpected: 8, model: "m", updatedAt: Date.now(),
      ttlMs: 60_000, takesTraffic: true, soft: "", hard: "", eventsMaxLen: 100, prefix: keys.prefix, instance: `inst-${id}`,
    },
  );
}

/** What the leader decides from: every AZ's state and capacity, the tier, standby and shift. */
const decision = (e: Evaluation | null): unknown =>
  e && { azs: e.azs.map((a) => [a.az, a.state, a.healthyCapacity, a.totalCapacity]), tier: e.tier.level, standby: e.standby.wake, shift: e.shift.az };

/** The attack, as `llmha-agent` (what every GPU node holds). */
async function attack(agent: RedisClient, keys: RedisKeys): Promise<void> {
  const r = agent.redis;
  await r.hset(keys.members, "ghost-1", "az-b|64|1");
  await r.hset(keys.node("ghost-1"), "c", "az-b|UNHEALTHY|down|0|0|64||GPU_LOST", "az", "az-b", "status", "UNHEALTHY");
  await r.hset(keys.members, "ghost-2", "az-a|64|1");
  await r.zadd(keys.azAvailable("az-b"), 0, "ghost-1");
  await r.zadd(keys.azAvailable("az-a"), 0, "b1"); // a real node placed in another AZ's set
  await r.hset(keys.members, "a1", "az-b|8|1"); // a1 moved to another AZ in the index
  await r.del(keys.nodes, keys.dead, keys.azs);
}

async function leader(keys: RedisKeys, ctl: RedisClient, inventory: KubeInventory | undefined, metrics?: FleetMetrics, canary = false): Promise<{ controller: Controller; lease: LeaderLease }> {
  const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "leader-inv", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
  lease.start();
  await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
  const controller = new Controller({ redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, metrics, settings: { intervalMs: 1000, standbyAz: "az-c", zonalShift: true }, inventory,
    canary: canary ? { tolerance: { prefixTokens: 4, logprobDelta: 0.1 }, maxAgeMs: 60_000 } : undefined });
  return { controller, lease };
}

describe("the inventory (Kubernetes Node objects)", () => {
  it("parses a NodeList: name, zone, instance id, GPU capacity; a Node without a zone is left out", () => {
    const list = parseNodeList({ ...nodeList(NODES.slice(0, 1)), items: [...(nodeList(NODES.slice(0, 1)) as { items: object[] }).items, { metadata: { name: "nozone", labels: {} } }] });
    expect(list).toEqual([{ nodeId: "a1", az: "az-a", instanceId: "i-a1", gpus: 8 }]);
    expect(() => parseNodeList({ kind: "Status" })).toThrow(/NodeList/);
  });
});

describe("a GPU node's credentials against the leader", () => {
  for (const withInventory of [true, false]) {
    it(withInventory ? "with an inventory: the evaluation does not move, the forgeries are counted and the planted ids leave the available set" : "without one (agents' indexes trusted): the same attack moves the evaluation", async () => {
      const keys = new RedisKeys(acl.cluster);
      const admin = createRedisClient(server.url, { name: "inv-admin", log, env: {} });
      clients.push(admin);
      await admin.whenReady(5000);
      await admin.redis.flushdb();
      const agent = await as(acl.cluster, "llmha-agent");
      const ctl = await as(acl.cluster, "llmha-controller");
      for (const n of NODES) await beat(agent, keys, n.nodeId, n.az);
      const registry = new Registry();
      const metrics = new FleetMetrics(registry);
      const inv = withInventory ? new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null }) : undefined;
      const { controller, lease } = await leader(keys, ctl, inv, metrics);
      try {
        let t = Date.now();
        await controller.tick(t);
        const before = decision(await controller.tick((t += 1000)));
        expect(before).toMatchObject({ tier: "L0", azs: [["az-a", "OK", 16, 16], ["az-b", "OK", 16, 16]] });
        await attack(agent, keys);
        let after: unknown = null;
        for (let i = 0; i < 4; i++) after = decision(await controller.tick((t += 1000)));
        if (!withInventory) {
          expect(after).not.toEqual(before);
          return;
        }
        expect(after).toEqual(before);
        const text = await registry.metrics();
        const forged = Number(/llmha_redis_distrusted_total\{what="forged"\} (\d+)/.exec(text)?.[1] ?? 0);
        expect(forged).toBeGreaterThan(0);
        expect(await admin.redis.zscore(keys.azAvailable("az-b"), "ghost-1")).toBeNull();
        expect(await admin.redis.zscore(keys.azAvailable("az-b"), "b1")).not.toBeNull();
        expect(await admin.redis.hexists(keys.members, "ghost-1")).toBe(0);
        expect(await admin.redis.zscore(keys.azAvailable("az-a"), "b1")).toBeNull();
        // The leader's own view, which the agent role cannot write.
        expect(await admin.redis.hget(keys.inventory, "a1")).toBe("az-a|8|1");
        expect(await agent.redis.hset(keys.inventory, "ghost-1", "az-b|64|1").catch((e: Error) => e.message)).toMatch(/NOPERM|no permissions/);
      } finally {
        controller.stop();
        await lease.release();
      }
    });
  }
});

/** One canary answer: `text` split into tokens, no logprobs. */
const answer = (text: string) => ({ text, tokens: text.split(" "), logprobs: null });

describe("canary voters against a GPU node's credentials", () => {
  for (const withInventory of [true, false]) {
    it(withInventory ? "with an inventory: only its nodes vote; made-up voters neither set the expectation nor cap it, and are pruned and counted" : "without one: made-up voters set the expectation", async () => {
      const keys = new RedisKeys(acl.cluster);
      const admin = createRedisClient(server.url, { name: "inv-admin", log, env: {} });
      clients.push(admin);
      await admin.whenReady(5000);
      await admin.redis.flushdb();
      const agent = await as(acl.cluster, "llmha-agent");
      const ctl = await as(acl.cluster, "llmha-controller");
      for (const n of NODES) await beat(agent, keys, n.nodeId, n.az);
      const now = Date.now();
      // The real nodes agree on the right answer; an attacker writes six made-up voters with a wrong one first.
      for (let i = 0; i < 6; i++) await publishAnswers(agent.redis, keys, { nodeId: `fake-${i}`, az: "az-a", model: "m", at: now, answers: { p1: answer("wrong answer here ok") } });
      for (const n of NODES) await publishAnswers(agent.redis, keys, { nodeId: n.nodeId, az: n.az, model: "m", at: now, answers: { p1: answer("the right answer is") } });
      const registry = new Registry();
      const metrics = new FleetMetrics(registry);
      const inv = withInventory ? new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null }) : undefined;
      const { controller, lease } = await leader(keys, ctl, inv, metrics, true);
      try {
        await controller.tick(now);
        const e = await readExpectation(admin.redis, keys, "m");
        if (!withInventory) {
          expect(e?.answers.p1.text).toBe("wrong answer here ok");
          return;
        }
        expect(e).toMatchObject({ answers: { p1: { text: "the right answer is" } }, nodes: 4, agreeing: 4, capped: false });
        expect(Object.keys(await admin.redis.hgetall(keys.canaryAnswers)).sort()).toEqual(["a1", "a2", "b1", "b2"]);
        const text = await registry.metrics();
        expect(Number(/llmha_redis_distrusted_total\{what="forged"\} (\d+)/.exec(text)?.[1] ?? 0)).toBeGreaterThanOrEqual(6);
        // Once learned, a flood of made-up voters with another answer does not cap it (detection stays on).
        for (let i = 0; i < 20; i++) await publishAnswers(agent.redis, keys, { nodeId: `fake2-${i}`, az: "az-b", model: "m", at: now + 2000, answers: { p1: answer("wrong answer here ok") } });
        await controller.tick(now + 1000);
        await controller.tick(now + 2000);
        expect(await readExpectation(admin.redis, keys, "m")).toMatchObject({ answers: { p1: { text: "the right answer is" } }, nodes: 4, capped: false });
      } finally {
        controller.stop();
        await lease.release();
      }
    });
  }
});

describe("a node that boots after the leader's last list", () => {
  it("is left out until the next list says whether it exists: not counted as forged, not removed from its available set", async () => {
    const keys = new RedisKeys(acl.cluster);
    const admin = createRedisClient(server.url, { name: "inv-admin", log, env: {} });
    clients.push(admin);
    await admin.whenReady(5000);
    await admin.redis.flushdb();
    const agent = await as(acl.cluster, "llmha-agent");
    const ctl = await as(acl.cluster, "llmha-controller");
    const listed = NODES.slice(0, 3);
    for (const n of listed) await beat(agent, keys, n.nodeId, n.az);
    const registry = new Registry();
    const metrics = new FleetMetrics(registry);
    // The inventory lists b2 from the start, but the leader's list is taken before b2's first heartbeat and its next one 1 s later.
    const inv = new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null });
    let lists = 0;
    const counting = { source: inv.source, list: async () => ((lists += 1), lists === 1 ? (await inv.list()).filter((n) => n.nodeId !== "b2") : inv.list()) };
    const { controller, lease } = await leader(keys, ctl, counting as unknown as KubeInventory, metrics);
    try {
      const t = Date.now();
      await controller.tick(t);
      await beat(agent, keys, "b2", "az-b");
      const e1 = await controller.tick(t + 1000);
      expect(e1?.azs.find((a) => a.az === "az-b")?.totalCapacity).toBe(8);
      expect(await admin.redis.zscore(keys.azAvailable("az-b"), "b2")).not.toBeNull();
      const e2 = await controller.tick(t + 2000);
      expect(e2?.azs.find((a) => a.az === "az-b")?.totalCapacity).toBe(16);
      const series = (await registry.metrics()).split("\n").filter((l) => l.startsWith("llmha_redis_distrusted_total"));
      expect(series, series.join(" ")).toContain(`llmha_redis_distrusted_total{what="forged"} 0`);
      expect(await admin.redis.zscore(keys.azAvailable("az-b"), "b2")).not.toBeNull();
    } finally {
      controller.stop();
      await lease.release();
    }
  });
});

describe("an inventory that lists nothing", () => {
  it("is taken as a failed list, never as every node gone: no period is published from it", async () => {
    const keys = new RedisKeys(acl.cluster);
    const admin = createRedisClient(server.url, { name: "inv-admin", log, env: {} });
    clients.push(admin);
    await admin.whenReady(5000);
    await admin.redis.flushdb();
    const agent = await as(acl.cluster, "llmha-agent");
    const ctl = await as(acl.cluster, "llmha-controller");
    for (const n of NODES) await beat(agent, keys, n.nodeId, n.az);
    let empty = false;
    const inv = new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null });
    const flaky = { source: inv.source, list: async () => (empty ? [] : inv.list()) };
    const { controller, lease } = await leader(keys, ctl, flaky as unknown as KubeInventory);
    try {
      empty = true;
      await expect(controller.tick(Date.now())).rejects.toThrow(/lists no GPU node/);
      expect(await admin.redis.hget(keys.tier, "level")).toBeNull();
      empty = false;
      const e = await controller.tick(Date.now());
      expect(decision(e)).toMatchObject({ tier: "L0", azs: [["az-a", "OK", 16, 16], ["az-b", "OK", 16, 16]] });
      // Later an empty answer keeps the last list: the evaluation does not move.
      empty = true;
      const again = await controller.tick(Date.now() + 20_000);
      expect(decision(again)).toEqual(decision(e));
    } finally {
      controller.stop();
      await lease.release();
    }
  });
});

describe("a new leader's term starts from what the last one published", () => {
  it("while its start cannot be read (the inventory seed unreadable), a period decides nothing; once readable, it continues from the published states", async () => {
    const keys = new RedisKeys(acl.cluster);
    const admin = createRedisClient(server.url, { name: "inv-admin-seed", log, env: {} });
    clients.push(admin);
    await admin.whenReady(5000);
    await admin.redis.flushdb();
    const agent = await as(acl.cluster, "llmha-agent");
    const ctl = await as(acl.cluster, "llmha-controller");
    // What the last leader published: both AZs OK, and its own view of the nodes.
    for (const az of ["az-a", "az-b"]) await admin.redis.hset(keys.azState(az), "state", "OK", "since", "1", "firstSeen", "1", "everOk", "1");
    // The leader's own inventory hash, unreadable as a hash (a failing read, as on an endpoint still settling).
    await admin.redis.set(keys.inventory, "not a hash");
    const inv = new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null });
    const { controller, lease } = await leader(keys, ctl, inv);
    try {
      controller.start();
      // Periods run (the term started) but none may publish: nothing is read yet, not even the nodes' records.
      const t = Date.now();
      await expect(controller.tick(t)).rejects.toThrow(/WRONGTYPE/);
      expect(await admin.redis.hget(keys.azState("az-a"), "leader")).toBeNull();
      // Readable again (and the nodes heartbeat): the next period seeds, then decides, from the published OK.
      await admin.redis.del(keys.inventory);
      for (const n of NODES) await beat(agent, keys, n.nodeId, n.az);
      const e = await controller.tick(t + 1000);
      expect(decision(e)).toMatchObject({ tier: "L0", azs: [["az-a", "OK", 16, 16], ["az-b", "OK", 16, 16]] });
    } finally {
      controller.stop();
      await lease.release();
    }
  });
});

