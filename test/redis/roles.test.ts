/**
 * The Redis roles (agent/src/fleet/redis/roles.ts) on a real redis-server started with the rendered
 * ACL file (default user off): each role does its job through the same code the runtime
 * runs, and is refused (NOPERM) outside it. Role passwords carry `#?%@`: the URLs and
 * password files on the way keep them whole.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { accessString, aclFile, redisRoles, type RoleName } from "../../agent/src/fleet/redis/roles";
import { acquireScript, fencedHsetScript, heartbeatScript, readNodesScript, releaseScript, removeScript, renewScript, sweepScript } from "../../agent/src/fleet/redis/scripts";
import { VerifiedCache } from "../../agent/src/edge/fallback/cache";
import { ResultStore } from "../../agent/src/edge/fallback/results";
import { readFleetView } from "../../agent/src/ops/status/view";
import { TierReader } from "../../agent/src/edge/fallback/tier";
import { labRedisAcl, labRoleEnv, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { testLogger } from "./helpers";

const CLUSTER = "roles";
const keys = new RedisKeys(CLUSTER);
let server: RedisServerHandle;
let acl: LabRedisAcl;
let dir: string;
const clients: RedisClient[] = [];

async function as(role: RoleName): Promise<RedisClient> {
  const c = createRedisClient(server.urlAs(role), { name: `roles-${role}`, log: testLogger(), env: {} });
  clients.push(c);
  expect(await c.whenReady(5000)).toBe(true);
  return c;
}

/** Resolves to the error's message, or "ok" when it did not throw. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return (err as Error).message;
  }
}

const hb = (nodeId: string, az = "az-a") =>
  [
    { node: keys.node(nodeId), available: keys.azAvailable(az), events: keys.events, nodes: keys.nodes, members: keys.members, azs: keys.azs, dead: keys.dead },
    {
      nodeId, az, status: "HEALTHY", phase: "serving", weight: 100, loadScore: 1, gpus: 8, gpusExpected: 8, model: "m", updatedAt: Date.now(),
      ttlMs: 5000, takesTraffic: true, soft: "", hard: "", eventsMaxLen: 100, prefix: keys.prefix, instance: "",
    },
  ] as const;

beforeAll(async () => {
  acl = labRedisAcl(CLUSTER);
  server = await startRedisServer({ acl });
  dir = mkdtempSync(join(tmpdir(), "llmha-roles-"));
});
afterAll(async () => {
  for (const c of clients) await c.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("Redis roles on redis-server with the rendered ACL file", () => {
  it("has no default user: a client without credentials is refused", async () => {
    const c = createRedisClient(`redis://127.0.0.1:${server.port}`, { name: "anon", log: testLogger(), env: {} });
    clients.push(c);
    expect(await c.whenReady(1000)).toBe(false);
  });

  it("logs in with LLMHA_REDIS_USER + LLMHA_REDIS_PASSWORD_FILE beside a URL without credentials", async () => {
    const c = createRedisClient(`redis://127.0.0.1:${server.port}`, { name: "env-auth", log: testLogger(), env: labRoleEnv(acl, dir, "llmha-reader") });
    clients.push(c);
    expect(await c.whenReady(5000)).toBe(true);
    expect(await outcome(c.redis.set(keys.tier, "x"))).toMatch(/NOPERM/);
  });

  it("llmha-agent: heartbeats and leaves; cannot lead, fence, publish, request a practice or touch the fallback's keys", async () => {
    const c = await as("llmha-agent");
    const [k, a] = hb("agent-1");
    expect((await heartbeatScript(c.redis, k, a)).heldBy).toBeNull();
    expect(await c.redis.hget(keys.node("agent-1"), "status")).toBe("HEALTHY");
    expect(await removeScript(c.redis, k, "agent-1", keys.prefix, 100)).toBe("removed");
    const refused = await Promise.all([
      outcome(acquireScript(c.redis, keys, "agent-1", 5000, 0)),
      outcome(c.redis.hset(keys.fenceLast, "token", "1e400")),
      outcome(c.redis.hset(keys.azState("az-a"), "state", "DOWN")),
      outcome(c.redis.hset(keys.tier, "level", "L4")),
      outcome(c.redis.hset(keys.suspect, "codes", "LATENCY")),
      // The repair plan is the leader's alone: a node must not advise its neighbours' reboot, nor hide its own.
      outcome(c.redis.hset(keys.repairPlan, "agent-2", '{"action":"replace"}')),
      outcome(c.redis.del(keys.repairPlan)),
      // Nor the repair history (a clean history hides a host that keeps failing) or the active repairs (a forged step uncordons a node).
      outcome(c.redis.hset(keys.repairHistory, "i-1", "[]")),
      outcome(c.redis.hget(keys.repairHistory, "i-1")),
      outcome(c.redis.hset(keys.repairActive, "agent-2", '{"action":"reboot","step":"wait"}')),
      outcome(c.redis.del(keys.repairActive)),
      outcome(c.redis.set(keys.practiceRequest, "1")),
      outcome(c.redis.set(`${keys.fallbackCache}e:abc`, "{}")),
      outcome(c.redis.get(`${keys.fallbackRequests}x`)),
      outcome(c.redis.flushall()),
    ]);
    for (const r of refused) expect(r).toMatch(/NOPERM|no permissions/);
  });

  it("llmha-controller: leases, fences, publishes, sweeps and reads the registry; cannot write a node or request a practice", async () => {
    const agent = await as("llmha-agent");
    const [k, a] = hb("ctl-1");
    await heartbeatScript(agent.redis, k, a);
    const c = await as("llmha-controller");
    const got = await acquireScript(c.redis, keys, "leader-1", 5000, 0);
    expect(got.acquired).toBe(true);
    const token = got.acquired ? got.token : 0;
    expect(await renewScript(c.redis, keys.leader, `leader-1:${token}`, 5000)).toBe(true);
    const w = await fencedHsetScript(c.redis, { fenceLast: keys.fenceLast, target: keys.tier, events: keys.events, token, holder: "leader-1", eventsMaxLen: 100, fields: { level: "L0" } });
    expect(w.accepted).toBe(true);
    const plan = await fencedHsetScript(c.redis, { fenceLast: keys.fenceLast, target: keys.repairPlan, events: keys.events, token, holder: "leader-1", eventsMaxLen: 100, changeField: "ctl-1", eventType: "repair.advised", fields: { "ctl-1": '{"action":"reboot"}' } });
    expect(plan.accepted).toBe(true);
    for (const target of [keys.repairHistory, keys.repairActive]) {
      const w2 = await fencedHsetScript(c.redis, { fenceLast: keys.fenceLast, target, events: keys.events, token, holder: "leader-1", eventsMaxLen: 100, changeField: "ctl-1", eventType: "repair.started", fields: { "ctl-1": "[]" } });
      expect(w2.accepted, target).toBe(true);
    }
    const s = await sweepScript(c.redis, { nodes: keys.nodes, members: keys.members, dead: keys.dead, events: keys.events, fenceLast: keys.fenceLast }, { prefix: keys.prefix, token, holder: "leader-1", silentMs: 60_000, forgetAfterMs: 600_000, eventsMaxLen: 100, limit: 10 });
    expect(s.accepted).toBe(true);
    const page = await readNodesScript(c.redis, keys.members, keys.prefix, "0", 100);
    expect(page.entries.map((e) => e.id)).toContain("ctl-1");
    expect(await releaseScript(c.redis, keys.leader, `leader-1:${token}`)).toBe(true);
    for (const r of await Promise.all([
      outcome(c.redis.hset(keys.node("ctl-1"), "status", "UNHEALTHY")),
      outcome(c.redis.set(keys.practiceRequest, "1")),
      outcome(c.redis.set(`${keys.fallbackCache}e:abc`, "{}")),
    ])) expect(r).toMatch(/NOPERM|no permissions/);
  });

  it("llmha-operator imports verified answers and requests a practice; llmha-fallback serves them but cannot plant one or write outside its keys", async () => {
    const op = await as("llmha-operator");
    const opCache = new VerifiedCache(op.redis, CLUSTER);
    const n = { kind: "chat" as const, model: "m", messages: [{ role: "user", content: "hi" }] };
    await opCache.put(n as never, "hello", { source: "import" });
    expect(await outcome(op.redis.set(keys.practiceRequest, String(Date.now()), "PX", 60_000))).toBe("ok");
    expect(await outcome(op.redis.hset(keys.tier, "level", "L4"))).toMatch(/NOPERM/);

    const fb = await as("llmha-fallback");
    const cache = new VerifiedCache(fb.redis, CLUSTER, undefined, "reader"); // as llm-ha fallback opens it
    expect((await cache.get(n as never))?.answer).toBe("hello");
    // An expired entry is a plain miss for it: its bookkeeping (the byte count) is the writers' to drop.
    const brief = { ...n, messages: [{ role: "user", content: "short-lived" }] };
    await opCache.put(brief as never, "soon gone", { source: "import", ttlS: 1 });
    await new Promise((r) => setTimeout(r, 1100));
    expect(await cache.get(brief as never)).toBeNull();
    expect(await outcome(new VerifiedCache(fb.redis, CLUSTER).get(brief as never))).toMatch(/NOPERM|no permissions|can't access/);
    const store = new ResultStore(fb.redis, CLUSTER, 60);
    const rec = { id: "req-1", tenant: "t1", model: "m", queuedAt: Date.now() };
    expect(await store.accepting(rec)).toBe(true);
    expect(await store.confirm(rec)).toBe(true);
    expect((await store.get("req-1"))?.state).toBe("pending");
    // Idempotency keys: bound, read back, freed by a cancel (NOPERM here answered every Idempotency-Key request 503 at L4).
    expect(await store.bindIdempotencyKey("t1", "key-1", "req-1")).toBe("req-1");
    expect(await store.bindIdempotencyKey("t1", "key-1", "req-2")).toBe("req-1");
    await store.releaseIdempotencyKey("t1", "key-1", "req-1");
    expect(await store.boundRequest("t1", "key-1")).toBeNull();
    const tier = await new TierReader(fb.redis, CLUSTER, { retryAfterS: 5, wakeEtaS: 60 }).read();
    expect(tier.readable).toBe(true);
    const [k, a] = hb("forged-1");
    for (const r of await Promise.all([
      outcome(cache.put({ ...n, messages: [{ role: "user", content: "planted" }] } as never, "forged", { source: "replay" })),
      outcome(heartbeatScript(fb.redis, k, a)),
      outcome(fb.redis.hset(keys.node("n-1"), "status", "UNHEALTHY")),
      outcome(acquireScript(fb.redis, keys, "evil", 60_000, 0)),
      outcome(fb.redis.set(keys.leader, "evil:9")),
      outcome(fb.redis.hset(keys.fenceLast, "token", "1e400")),
      outcome(fb.redis.hset(keys.tier, "level", "L4")),
      outcome(fb.redis.set(keys.practiceRequest, "1")),
      outcome(fb.redis.hset(keys.suspect, "codes", "X")),
      outcome(fb.redis.get(keys.node("n-1"))),
      // The cache's byte count steers every eviction: the fallback (internet-facing) reads it only.
      outcome(fb.redis.set(`${keys.fallbackCache}bytes`, "-1000000000")),
    ])) expect(r).toMatch(/NOPERM|no permissions|can't access/);
  });

  it("a queued request's result body: llmha-fallback stores and serves it whole; llmha-reader and llmha-operator read its record, never the body nor the enrolment stream", async () => {
    const fb = await as("llmha-fallback");
    const store = new ResultStore(fb.redis, CLUSTER, 60);
    const rec = { id: "req-body", tenant: "t1", model: "m", queuedAt: Date.now() };
    const response = { choices: [{ message: { role: "assistant", content: "tenant t1's secret completion" } }] };
    expect(await store.accepting(rec)).toBe(true);
    expect(await store.confirm(rec)).toBe(true);
    expect(await store.claim(rec, 30_000)).toBe(true);
    expect(await store.finish({ ...rec, state: "done", status: 200, response, finishedAt: Date.now() })).toBe(true);
    expect(await store.get("req-body")).toMatchObject({ state: "done", status: 200, tenant: "t1", response });
    // The record holds the metadata only; the body sits beside it with the same TTL.
    const raw = JSON.parse((await fb.redis.get(`${keys.fallbackRequests}req-body`)) ?? "{}") as Record<string, unknown>;
    expect(raw.state).toBe("done");
    expect(raw).not.toHaveProperty("response");
    expect(await fb.redis.get(`${keys.fallbackBodies}req-body`)).toBe(JSON.stringify(response));
    // A record of the previous version (the body inside it) is still served as before.
    const old = { id: "req-old", state: "done", tenant: "t1", model: "m", queuedAt: 1, finishedAt: 2, status: 200, response: { old: true } };
    await fb.redis.set(`${keys.fallbackRequests}req-old`, JSON.stringify(old), "EX", 60);
    expect(await store.get("req-old")).toMatchObject({ state: "done", response: { old: true } });

    await (await as("llmha-agent")).redis.xadd(keys.enrol, "*", "nodeId", "n-1", "token", "projected");
    for (const role of ["llmha-reader", "llmha-operator"] as const) {
      const c = await as(role);
      const meta = JSON.parse((await c.redis.get(`${keys.fallbackRequests}req-body`)) ?? "{}") as Record<string, unknown>;
      expect(meta, role).toMatchObject({ state: "done", tenant: "t1", status: 200 });
      for (const r of await Promise.all([
        outcome(c.redis.get(`${keys.fallbackBodies}req-body`)),
        outcome(c.redis.call("DUMP", `${keys.fallbackBodies}req-body`)),
        outcome(c.redis.call("OBJECT", "ENCODING", `${keys.fallbackBodies}req-body`)),
        outcome(c.redis.call("STRLEN", `${keys.fallbackBodies}req-body`)),
        outcome(c.redis.xrevrange(keys.enrol, "+", "-", "COUNT", 1)),
      ])) expect(r, role).toMatch(/NOPERM|no permissions/);
    }
  });

  it("llmha-reader reads the registry (FCALL_RO) and writes nothing", async () => {
    const c = await as("llmha-reader");
    const page = await readNodesScript(c.redis, keys.members, keys.prefix, "0", 100);
    expect(page.cursor).toBe("0");
    expect(await outcome(c.redis.hgetall(keys.tier))).toBe("ok");
    expect(await outcome(c.redis.hgetall(keys.repairPlan))).toBe("ok");
    expect(await outcome(c.redis.hgetall(keys.repairHistory))).toBe("ok");
    expect(await outcome(c.redis.hgetall(keys.repairActive))).toBe("ok");
    // What `llm-ha status` reads, key by key (the role names them: no `llmha:<cluster>:*`), as the reader and as an operator.
    for (const role of ["llmha-reader", "llmha-operator"] as const) {
      const view = await readFleetView((role === "llmha-reader" ? c : await as(role)).redis, keys);
      expect(view.cluster, role).toBe(CLUSTER);
    }
    for (const r of await Promise.all([
      outcome(c.redis.hset(keys.tier, "level", "L4")),
      outcome(c.redis.hset(keys.repairPlan, "n1", "{}")),
      outcome(c.redis.hset(keys.repairHistory, "i-1", "[]")),
      outcome(c.redis.hdel(keys.repairActive, "n1")),
      outcome(c.redis.set(keys.practiceRequest, "1")),
      outcome(acquireScript(c.redis, keys, "r", 5000, 0)),
    ])) expect(r).toMatch(/NOPERM|no permissions/);
  });
});

describe("the role table and the key table agree", () => {
  const glob = (p: string): RegExp => new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`);
  const k = new RedisKeys("c1");
  const every = [
    k.node("n1"), k.azAvailable("a"), k.azState("a"), k.members, k.inventory, k.enrol, k.enrolled, k.recordDigests, k.capabilities, k.nodeRecord("n1", "0123456789abcdef0123456789abcdef"), k.nodes, k.dead, k.azs, k.leader, k.fence, k.fenceLast, k.tier, k.standbyWake,
    k.practiceRequest, k.actuation, k.suspect, k.events, k.practice, k.models, k.repairPlan, k.repairHistory, k.repairActive, `${k.fallbackCache}e:1`, `${k.fallbackCache}lru`, `${k.fallbackCache}size`, `${k.fallbackCache}bytes`, `${k.fallbackRequests}1`, `${k.fallbackBodies}1`, `${k.fallbackIdempotency}t:abc`, k.fallbackQueue, k.edgeKeys, k.edgeKeysRev,
    k.canaryAnswers, k.canaryExpect, k.canaryRecorded, k.rollout, k.rolloutRequest,
  ];
  it("every role's pattern names a key of keys.ts, and every key has a writer", () => {
    const roles = redisRoles("c1");
    for (const r of roles) for (const g of r.keys) expect(every.some((key) => glob(g.pattern).test(key)), `${r.name} ${g.pattern}`).toBe(true);
    for (const key of every) expect(roles.some((r) => r.keys.some((g) => g.access !== "R" && glob(g.pattern).test(key))), key).toBe(true);
  });
  it("renders access strings without a password, and refuses a short password in the ACL file", () => {
    for (const r of redisRoles("c1")) expect(accessString(r)).toMatch(/^on resetkeys resetchannels -@all \+/);
    expect(() => aclFile("c1", new Map([["llmha-agent", "short"]]))).toThrow(/at least 16/);
    expect(() => aclFile("c1", new Map([["llmha-root", "0123456789abcdef0"]]))).toThrow(/unknown Redis role/);
  });
});
