/**
 * Node identities on a real redis-server with the rendered ACL file: four agents (`llmha-agent`)
 * enrol with projected-token-shaped JWTs signed by a local issuer and heartbeat under their own
 * record keys; the leader (`llmha-controller`) verifies them against the issuer's keys and the
 * inventory, and reads only those keys. Then, with the agent role's credentials, an attacker
 * forges another AZ's node record as failed with a foreign `instance`, enrols with another node's
 * id and a token of its own node, and tries to read the enrolment stream and the capabilities:
 * the evaluation does not move, the real node is not locked out, the forged enrolment is refused,
 * the reads are refused (NOPERM).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type JWTVerifyGetKey } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../agent/src/config/load";
import { Controller } from "../../agent/src/fleet/controller/controller";
import type { Evaluation } from "../../agent/src/fleet/controller/state";
import { EnrolmentDesk } from "../../agent/src/fleet/identity/desk";
import { publishAnswers, readExpectation } from "../../agent/src/node/canary/store";
import { Enrolment } from "../../agent/src/fleet/identity/enrol";
import { KubeInventory } from "../../agent/src/fleet/inventory/inventory";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { NodeRegistry, type NodeReport } from "../../agent/src/fleet/redis/registry";
import type { Decision } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { labRedisAcl, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { testLogger } from "../redis/helpers";
import { testIssuer } from "../support/test-issuer";

const log = testLogger();
const NODES = [
  { nodeId: "a1", az: "az-a" }, { nodeId: "a2", az: "az-a" },
  { nodeId: "b1", az: "az-b" }, { nodeId: "b2", az: "az-b" },
];
let server: RedisServerHandle;
let acl: LabRedisAcl;
let api: Server;
let apiUrl = "";
let dir: string;
let jwks: JWTVerifyGetKey;
let tokenOf: (node: string) => Promise<string>;
const clients: RedisClient[] = [];

beforeAll(async () => {
  acl = labRedisAcl("ident");
  server = await startRedisServer({ acl });
  dir = mkdtempSync(join(tmpdir(), "llmha-ident-"));
  ({ jwks, tokenOf } = await testIssuer());
  api = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
      kind: "NodeList",
      items: NODES.map((n) => ({ metadata: { name: n.nodeId, labels: { "topology.kubernetes.io/zone": n.az } }, status: { capacity: { "nvidia.com/gpu": "8" } } })),
    }));
  });
  await new Promise<void>((r) => api.listen(0, "127.0.0.1", () => r()));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const c of clients) await c.close();
  await server?.stop();
  await new Promise<void>((r) => (api ? api.close(() => r()) : r()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function as(role: "llmha-agent" | "llmha-controller"): Promise<RedisClient> {
  const c = createRedisClient(server.urlAs(role), { name: `ident-${role}`, log, env: {} });
  clients.push(c);
  expect(await c.whenReady(5000)).toBe(true);
  return c;
}

function report(nodeId: string, az: string): NodeReport {
  const now = Date.now();
  const decision: Decision = { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 1 };
  return { nodeId, az, decision, gpus: 8, gpusExpected: 8, model: "m" };
}

const decision = (e: Evaluation | null): unknown => e && { azs: e.azs.map((a) => [a.az, a.state, a.healthyCapacity, a.totalCapacity]), tier: e.tier.level, standby: e.standby.wake, shift: e.shift.az };

describe("node identities", () => {
  for (const withIdentities of [true, false])
  it(withIdentities ? "one node's credentials neither forge another node's record, nor lock it out, nor enrol as it, nor read tokens or capabilities" : "without them (the inventory alone): the same forged records move the evaluation and lock the real node out", async () => {
    const keys = new RedisKeys(acl.cluster);
    const admin = createRedisClient(server.url, { name: "ident-admin", log, env: {} });
    clients.push(admin);
    await admin.whenReady(5000);
    await admin.redis.flushdb();
    const ctl = await as("llmha-controller");
    const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "leader-id", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    lease.start();
    await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
    let refused = 0;
    const desk = new EnrolmentDesk({ redis: ctl.redis, keys, jwks: async () => jwks, issuer: "https://issuer.local", log, onJudged: (r) => (r === "refused" ? (refused += 1) : undefined) });
    const controller = new Controller({
      redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, settings: { intervalMs: 1000, standbyAz: "az-c", zonalShift: true },
      inventory: new KubeInventory({ url: apiUrl, selector: "llm-ha.io/gpu-class", tokenFile: null, caFile: null }), identities: withIdentities ? desk : undefined,
      canary: { tolerance: { prefixTokens: 4, logprobDelta: 0.1 }, maxAgeMs: 600_000 },
    });
    const registries: NodeRegistry[] = [];
    try {
      await controller.tick(Date.now()); // lists the inventory; nothing enrolled yet
      // Each agent enrols (the leader answers on its next period) and heartbeats under its own key.
      for (const n of NODES) {
        writeFileSync(join(dir, `${n.nodeId}.token`), await tokenOf(n.nodeId));
        const agent = await as("llmha-agent");
        const reg = new NodeRegistry({ client: agent, keys, log, settings: { intervalMs: 1000, ttlPeriods: 30 }, identity: withIdentities ? new Enrolment({ redis: agent.redis, keys, nodeId: n.nodeId, tokenFile: join(dir, `${n.nodeId}.token`), log, pollMs: 50 }) : undefined });
        registries.push(reg);
      }
      const beats = registries.map((reg, i) => reg.heartbeat(report(NODES[i].nodeId, NODES[i].az)));
      await new Promise((r) => setTimeout(r, 150));
      await controller.tick(Date.now());
      await Promise.all(beats);
      // The first periods saw no enrolled node: the AZs recover through the controller's hysteresis.
      let t = Date.now();
      let before: unknown = null;
      for (let i = 0; i < 15 && (before as { tier?: string } | null)?.tier !== "L0"; i++) {
        for (let j = 0; j < registries.length; j++) await registries[j].heartbeat(report(NODES[j].nodeId, NODES[j].az));
        before = decision(await controller.tick((t += 1000)));
      }
      expect(before).toMatchObject({ tier: "L0", azs: [["az-a", "OK", 16, 16], ["az-b", "OK", 16, 16]] });

      // The attacker: root on a1, with a1's Redis credentials and a1's own token.
      const evil = await as("llmha-agent");
      await evil.redis.hset(keys.node("b1"), "az", "az-b", "status", "UNHEALTHY", "instance", "evil", "c", "az-b|UNHEALTHY|down|0|0|8||GPU_LOST");
      await evil.redis.pexpire(keys.node("b1"), 10 * 365 * 86_400_000);
      await evil.redis.hset(keys.node("b2"), "az", "az-b", "status", "UNHEALTHY", "instance", "evil", "c", "az-b|UNHEALTHY|down|0|0|8||GPU_LOST");
      // Enrol as b1 with a1's token (all a1 has), and with a made-up one.
      await evil.redis.xadd(keys.enrol, "*", "nodeId", "b1", "token", await tokenOf("a1"), "publicKey", "x");
      await evil.redis.xadd(keys.enrol, "*", "nodeId", "b2", "token", "e30.e30.sig", "publicKey", "x");
      for (const read of [() => evil.redis.xrange(keys.enrol, "-", "+"), () => evil.redis.hgetall(keys.capabilities), () => evil.redis.call("SCAN", "0", "MATCH", "*node:*"), () => evil.redis.call("KEYS", "*")]) {
        await expect(read()).rejects.toThrow(/NOPERM|no permissions/);
      }
      let after: unknown = null;
      const lockedOut = new Set<string>();
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < registries.length; j++) {
          const r = await registries[j].heartbeat(report(NODES[j].nodeId, NODES[j].az));
          if (r.heldBy) lockedOut.add(NODES[j].nodeId);
        }
        after = decision(await controller.tick((t += 1000)));
      }
      if (!withIdentities) {
        expect(after).not.toEqual(before);
        expect([...lockedOut].sort()).toEqual(["b1", "b2"]);
        return;
      }
      expect([...lockedOut]).toEqual([]);
      expect(after).toEqual(before);
      expect(refused).toBe(2);
      expect(await ctl.redis.xrange(keys.enrol, "-", "+")).toEqual([]);
      const caps = await ctl.redis.hgetall(keys.capabilities);
      // Fenced leader writes: beside the nodes, the writing term's token, holder and time.
      expect(Object.keys(caps).sort()).toEqual(["a1", "a2", "at", "b1", "b2", "leader", "token"]);
      expect(caps.leader).toBe("leader-id");
      // The leader lost its reply to a1 (say, a failover): a1 enrols again with the same key and keeps its capability and record key.
      await admin.redis.hdel(keys.enrolled, "a1");
      // (It looks every 10th heartbeat; the leader answers on its next period.)
      for (let i = 0; i < 10; i++) {
        const beat = registries[0].heartbeat(report("a1", "az-a"));
        await new Promise((r) => setTimeout(r, 60));
        await controller.tick((t += 1000));
        expect((await beat).heldBy).toBeNull();
      }
      expect(await admin.redis.hget(keys.enrolled, "a1")).not.toBeNull();
      expect(await ctl.redis.hget(keys.capabilities, "a1")).toBe(caps.a1);
      expect(await admin.redis.exists(keys.nodeRecord("a1", caps.a1))).toBe(1);

      // Canary answers: each node's in its own record; the attacker overwrites real nodes' fields of the shared hash and adds voters.
      const answer = (text: string) => ({ p1: { text, tokens: text.split(" "), logprobs: null } });
      const at = Date.now();
      await evil.redis.del(keys.canaryExpect).catch(() => undefined);
      for (const n of NODES) {
        await publishAnswers(evil.redis, keys, { nodeId: n.nodeId, az: n.az, model: "m", at, answers: answer("wrong answer here ok") });
        await publishAnswers(admin.redis, keys, { nodeId: n.nodeId, az: n.az, model: "m", at, answers: answer("the right answer is") }, keys.nodeRecord(n.nodeId, caps[n.nodeId]));
      }
      for (let i = 0; i < 6; i++) await publishAnswers(evil.redis, keys, { nodeId: `fake-${i}`, az: "az-a", model: "m", at, answers: answer("wrong answer here ok") });
      await controller.tick((t += 1000));
      await controller.tick((t += 1000));
      expect(await readExpectation(admin.redis, keys, "m")).toMatchObject({ answers: { p1: { text: "the right answer is" } }, nodes: 4, agreeing: 4, capped: false });
      expect(await admin.redis.hlen(keys.canaryAnswers)).toBe(0);
    } finally {
      controller.stop();
      await lease.release();
    }
  });
});

describe("settings", () => {
  it("node identities need an inventory; a bad JWKS setting and kubernetes outside a pod stop start-up naming the variable", () => {
    const base = { LLMHA_NODE_ID: "n1", LLMHA_AZ: "az-a" };
    expect(() => parseConfig([], { ...base, LLMHA_IDENTITY_JWKS: "http://127.0.0.1:1/jwks" })).toThrow(/LLMHA_IDENTITY_JWKS.*needs LLMHA_INVENTORY/);
    expect(() => parseConfig([], { ...base, LLMHA_INVENTORY: "http://127.0.0.1:1", LLMHA_IDENTITY_JWKS: "ftp://x" })).toThrow(ConfigError);
    expect(() => parseConfig([], { ...base, LLMHA_INVENTORY: "kubernetes" })).toThrow(/LLMHA_INVENTORY.*KUBERNETES_SERVICE_HOST/);
    expect(() => parseConfig([], { ...base, LLMHA_INVENTORY: "gopher://x" })).toThrow(/LLMHA_INVENTORY/);
    const ok = parseConfig([], { ...base, LLMHA_INVENTORY: "http://127.0.0.1:1", LLMHA_IDENTITY_JWKS: "http://127.0.0.1:1/openid/v1/jwks", LLMHA_IDENTITY_TOKEN_FILE: "/var/run/llm-ha/token" });
    expect(ok).toMatchObject({ inventory: "http://127.0.0.1:1", identityJwks: "http://127.0.0.1:1/openid/v1/jwks", identityTokenFile: "/var/run/llm-ha/token", identityIssuer: null });
  });
});
