/**
 * The agent's side of a rollout, piece by piece: the revision check against what the rollout
 * allows (rules), the `allow` read (a real redis-server, stopped mid-way), the perf tracker
 * (probe window per revision, load time, corruption since the start), when perf is worth a
 * write, and the write itself (the node's own record, the heartbeat's expiry, a heartbeat after
 * it leaves the field).
 */
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import type { NodePerf } from "../../agent/src/fleet/rollout/types";
import { modelReasons, type RuleSettings } from "../../agent/src/node/evaluator/rules";
import { PerfPublisher, PerfTracker, perfWorthWriting } from "../../agent/src/node/perf";
import { parseAllow, RolloutAllowWatch } from "../../agent/src/node/rollout-allow";
import type { ModelObservation } from "../../agent/src/node/sources/signals";
import type { Decision } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { labRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";

const base: RuleSettings = { gpuCount: null, model: "m", probeLatencyMs: 1000, wedgeMs: 10_000, probeStuckMs: 10_000, modelRevision: "rev-a" };
const serving = (revision: string): ModelObservation => ({ kind: "ready", served: ["m"], identity: { id: "m", revision, dtype: null, maxContext: null } });
const codes = (rev: string, s: RuleSettings): string[] => modelReasons(serving(rev), s, true).map((r) => r.code);

describe("the revision check during a rollout (rules)", () => {
  it("without a rollout: the configured revision, as before", () => {
    expect(codes("rev-a", base)).toEqual([]);
    expect(codes("rev-b", base)).toEqual(["MODEL_MISMATCH"]);
    expect(codes("rev-b", { ...base, allowedRevisions: null })).toEqual(["MODEL_MISMATCH"]);
    expect(codes("rev-b", { ...base, allowedRevisions: [] })).toEqual(["MODEL_MISMATCH"]);
  });

  it("while one is under way either revision serves; after it, a node left on the old one is a mismatch again", () => {
    expect(codes("rev-a", { ...base, allowedRevisions: ["rev-a", "rev-b"] })).toEqual([]);
    expect(codes("rev-b", { ...base, allowedRevisions: ["rev-a", "rev-b"] })).toEqual([]);
    expect(codes("rev-c", { ...base, allowedRevisions: ["rev-a", "rev-b"] })).toEqual(["MODEL_MISMATCH"]);
    const after = modelReasons(serving("rev-a"), { ...base, allowedRevisions: ["rev-b"] }, true);
    expect(after.map((r) => r.code)).toEqual(["MODEL_MISMATCH"]);
    expect(after[0].detail).toMatch(/revision rev-a, expected rev-b \(the fleet's rollout\)/);
    // A fleet without LLMHA_MODEL_REVISION is checked against the rollout's too.
    expect(codes("rev-a", { ...base, modelRevision: null, allowedRevisions: ["rev-b"] })).toEqual(["MODEL_MISMATCH"]);
  });

  it("parses allow: trimmed, no empty names, none → null", () => {
    expect(parseAllow("rev-a, rev-b,")).toEqual(["rev-a", "rev-b"]);
    expect(parseAllow("")).toBeNull();
    expect(parseAllow(" , ")).toBeNull();
    expect(parseAllow(null)).toBeNull();
  });
});

describe("the perf tracker", () => {
  it("keeps a probe window per revision: an upgraded node starts with none of its old server's probes", () => {
    const t = new PerfTracker(4);
    for (const ms of [10, 20, 30, 40, 50]) t.probe("rev-a", true, ms);
    t.probe("rev-a", false, null);
    expect(t.snapshot("rev-a", 1)).toMatchObject({ revision: "rev-a", probes: 4, errors: 1, p50Ms: 40 });
    // The server reports rev-b now: no probe of it yet.
    expect(t.snapshot("rev-b", 2)).toMatchObject({ revision: "rev-b", probes: 0, errors: 0, p50Ms: null });
    t.probe("rev-b", true, 7);
    expect(t.snapshot("rev-b", 3)).toMatchObject({ probes: 1, errors: 0, p50Ms: 7 });
  });

  it("the load time is not ready → ready as the agent saw it; a server serving at the agent's start has none", () => {
    const t = new PerfTracker(4);
    t.model(true, 1000);
    expect(t.snapshot("", 0).loadMs).toBeNull();
    t.model(false, 2000);
    t.model(false, 2500);
    t.model(true, 5000);
    expect(t.snapshot("", 0).loadMs).toBe(3000);
    const u = new PerfTracker(4);
    u.model(false, 100);
    u.model(true, 900);
    expect(u.snapshot("", 0).loadMs).toBe(800);
  });

  it("corruption is the engine's count after the server's last start (null until read again)", () => {
    const t = new PerfTracker(4);
    t.model(true, 0);
    t.engine(3);
    expect(t.snapshot("", 0).corrupted).toBe(3);
    t.engine(null);
    expect(t.snapshot("", 0).corrupted).toBe(3);
    t.model(false, 10);
    t.model(true, 20);
    expect(t.snapshot("", 0).corrupted).toBeNull();
    t.engine(0);
    expect(t.snapshot("", 0).corrupted).toBe(0);
  });

  it("is written when it changed meaningfully or every few periods", () => {
    const p: NodePerf = { at: 0, revision: "a", p50Ms: 100, probes: 20, errors: 0, loadMs: null, corrupted: 0, continuation: "ok" };
    expect(perfWorthWriting(null, p, 0, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, at: 5, p50Ms: 105 }, 3, 10)).toBe(false);
    expect(perfWorthWriting(p, { ...p, p50Ms: 112 }, 3, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, errors: 1 }, 1, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, continuation: "refused" }, 1, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, revision: "b" }, 1, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, corrupted: 2 }, 1, 10)).toBe(true);
    expect(perfWorthWriting(p, { ...p, at: 9 }, 10, 10)).toBe(true);
    const tiny = { ...p, p50Ms: 4 };
    expect(perfWorthWriting(tiny, { ...tiny, p50Ms: 5.5 }, 1, 10)).toBe(false);
  });
});

/** As the agent's client: no offline queue, so commands wait for the connection here. */
const ready = (c: Redis): Promise<void> => (c.status === "ready" ? Promise.resolve() : new Promise((done) => c.once("ready", () => done())));

describe("against a real redis-server", () => {
  let server: RedisServerHandle;
  let r: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    r = new Redis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
    await ready(r);
  });
  afterAll(async () => {
    r?.disconnect();
    await server?.stop();
  });

  it("perf goes into the node's record with the heartbeat's expiry, and a heartbeat leaves it", async () => {
    const cluster = freshCluster("perf");
    const key = `llmha:${cluster}:node:gpu-p1`;
    const snap: NodePerf = { at: 1, revision: "rev-a", p50Ms: 12, probes: 3, errors: 0, loadMs: null, corrupted: null, continuation: "ok" };
    const pub = new PerfPublisher({ snapshot: () => snap, target: () => ({ redis: r, key, ttlMs: 5000 }), periodMs: 100, log: testLogger() });
    // Writing it first (no record yet) must not leave a record without expiry.
    await pub.tick();
    expect(JSON.parse((await r.hget(key, "perf"))!)).toEqual(snap);
    expect(await r.pttl(key)).toBeGreaterThan(4000);
    // Unchanged: no write.
    await pub.tick();
    expect(pub.writes).toBe(1);
    const up = (): Decision => ({ status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: Date.now(), checkedAt: Date.now(), loadScore: 1 });
    const fleet = new Fleet({ redisUrl: server.url, cluster, nodeId: "gpu-p1", az: "az-a", intervalMs: 100, log: testLogger(), metrics: new Registry(), lease: { ttlMs: 3000, renewMs: 1000, contendMs: 500, marginMs: 600 } });
    try {
      fleet.start((): NodeReport => ({ nodeId: "gpu-p1", az: "az-a", decision: up(), gpus: 8, gpusExpected: 8, model: "m" }));
      const first = await waitFor("a heartbeat", async () => (await r.hget(key, "updatedAt")) ?? false, { timeoutMs: 10_000, everyMs: 50 });
      await waitFor("three more heartbeats", async () => Number(await r.hget(key, "updatedAt")) >= Number(first) + 300, { timeoutMs: 10_000, everyMs: 50 });
      expect(JSON.parse((await r.hget(key, "perf"))!)).toEqual(snap);
      // The heartbeat's expiry stands (NX did not extend a record the heartbeat owns).
      const ttl = await r.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(fleet.registry.ttlMs);
    } finally {
      await fleet.stop();
    }
  });

  it("allow: absent → the configured revision; named → those; Redis gone → the last answer stands", async () => {
    const cluster = freshCluster("allow");
    const key = `llmha:${cluster}:rollout`;
    const seen: (readonly string[] | null)[] = [];
    const own = await startRedisServer();
    const c = new Redis(own.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    await ready(c);
    const w = new RolloutAllowWatch({ read: () => c.hget(key, "allow"), periodMs: 60_000, log: testLogger(), onChange: (a) => void seen.push(a) });
    try {
      expect(await w.runOnce()).toBeNull();
      expect(seen).toEqual([]);
      await c.hset(key, { allow: "rev-a,rev-b", current: "rev-a" });
      expect(await w.runOnce()).toEqual(["rev-a", "rev-b"]);
      expect(await w.runOnce()).toEqual(["rev-a", "rev-b"]);
      expect(seen).toEqual([["rev-a", "rev-b"]]);
      await c.hset(key, { allow: "rev-b" });
      expect(await w.runOnce()).toEqual(["rev-b"]);
      await own.stop();
      expect(await w.runOnce()).toEqual(["rev-b"]);
      expect(seen).toEqual([["rev-a", "rev-b"], ["rev-b"]]);
    } finally {
      c.disconnect();
      await own.stop().catch(() => undefined);
    }
    // Never read: a watch that cannot reach Redis keeps to the configured revision.
    const dead = new RolloutAllowWatch({ read: () => Promise.reject(new Error("ECONNREFUSED")), periodMs: 60_000, log: testLogger(), onChange: () => undefined });
    expect(await dead.runOnce()).toBeNull();
  });
});

describe("as the llmha-agent Redis role (real ACL file, default user off)", () => {
  it("writes perf into its record (MULTI, HSET, PEXPIRE NX) and reads the rollout's allow", async () => {
    const cluster = "rperf";
    const server = await startRedisServer({ acl: labRedisAcl(cluster) });
    const agent = createRedisClient(server.urlAs("llmha-agent"), { name: "perf-agent", log: testLogger(), env: {} });
    const admin = createRedisClient(server.url, { name: "perf-admin", log: testLogger(), env: {} });
    try {
      expect(await agent.whenReady(5000)).toBe(true);
      expect(await admin.whenReady(5000)).toBe(true);
      const key = `llmha:${cluster}:node:gpu-acl`;
      const snap: NodePerf = { at: 1, revision: "rev-a", p50Ms: null, probes: 0, errors: 0, loadMs: null, corrupted: null, continuation: null };
      const pub = new PerfPublisher({ snapshot: () => snap, target: () => ({ redis: agent.redis, key, ttlMs: 5000 }), periodMs: 100, log: testLogger() });
      await pub.tick();
      expect(pub.writes).toBe(1);
      expect(JSON.parse((await admin.redis.hget(key, "perf"))!)).toEqual(snap);
      await admin.redis.hset(`llmha:${cluster}:rollout`, { allow: "rev-a,rev-b" });
      const w = new RolloutAllowWatch({ read: () => agent.redis.hget(`llmha:${cluster}:rollout`, "allow"), periodMs: 60_000, log: testLogger(), onChange: () => undefined });
      expect(await w.runOnce()).toEqual(["rev-a", "rev-b"]);
    } finally {
      await Promise.all([agent.close(), admin.close()]);
      await server.stop();
    }
  });
});
