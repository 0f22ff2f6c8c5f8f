/**
 * The rollout on the leader, against a real redis-server, through the in-memory rollout
 * actuator: a good rollout across 3 AZs is promoted (one `rollout` event per phase or step
 * change, the hash's `current` and `allow`, the metrics); a failing gate rolls back; a new
 * leader continues a rollout from the hash; a stale token cannot switch a node, a hung actuator
 * cannot hang the leader's period; with no rollout
 * actuator a start is refused with its reason in the hash.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { MemoryRolloutActuator } from "../../agent/src/fleet/actuators/rollout-memory";
import { FencedRolloutActuator } from "../../agent/src/fleet/actuators/rollout-gate";
import type { RolloutRequest } from "../../agent/src/fleet/rollout/types";
import { waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";
import { gauge } from "../support/repair-sim";
import { I, rolloutEvents, rolloutFleet, type RolloutFleet } from "./sim";

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

const startReq = (bakeMs = 3 * I): RolloutRequest => ({ op: "start", id: "r1", at: Date.now(), to: { revision: "v2" }, bakeMs, by: "test" });
const request = (f: RolloutFleet, r: RolloutRequest) => f.redis.set(f.keys.rolloutRequest, JSON.stringify(r));
const phase = async (f: RolloutFleet): Promise<string | undefined> => (await f.hash()).phase;
const NODES = ["a1", "a2", "b1", "b2", "c1", "c2"];

describe("rollout runner, against a real redis-server", () => {
  it("a good rollout across 3 AZs: canary node, then each AZ one node at a time, promoted", async () => {
    const act = new MemoryRolloutActuator();
    const f = await rolloutFleet(redis.url, freshCluster("ro"), act);
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      await request(f, startReq());
      await waitFor("promoted", async () => (await phase(f)) === "promoted", { timeoutMs: 40_000, everyMs: 100 });
      // Then, promoted, each AZ as a whole (what starts there later starts on v2).
      expect(act.calls).toEqual(["a:a1→v2", "a:a2→v2", "b:b1→v2", "b:b2→v2", "c:c1→v2", "c:c2→v2", "a:→v2", "b:→v2", "c:→v2"]);
      const h = await f.hash();
      expect(h).toMatchObject({ id: "r1", phase: "promoted", current: "v2", allow: "v2", token: String(f.leader()!.fleet.lease.token) });
      const s = (await f.state())!;
      expect(s.steps.map((x) => `${x.kind}:${x.az}`)).toEqual(["canary:a", "az:a", "az:b", "az:c"]);
      expect(s.gates.every((g) => g.verdict === "pass")).toBe(true);
      const ev = await rolloutEvents(f);
      expect(ev[1]).toMatchObject({ id: "r1", fromRevision: "v1", toRevision: "v2", from: "r1:switching:0", transition: "r1:baking:0" });
      expect(ev.map((e) => `${e.phase}:${e.step}`)).toEqual(["switching:0", "baking:0", "switching:1", "baking:1", "switching:2", "baking:2", "switching:3", "baking:3", "promoted:3"]);
      const prom = f.leader()!.prom;
      expect(await gauge(prom, "llmha_rollout_phase", { phase: "promoted" })).toBe(1);
      expect(await gauge(prom, "llmha_rollout_active")).toBe(0);
      expect(await gauge(prom, "llmha_rollout_step")).toBe(-1);
      expect(await gauge(prom, "llmha_rollout_switches_total", { outcome: "applied" })).toBe(6);
      // The request is acted on once: nothing more happens while it stays.
      await new Promise((r) => setTimeout(r, 5 * I));
      expect(act.calls).toHaveLength(9);
    } finally {
      await f.stop();
    }
  });

  it("a failing gate (the engine reports corrupted requests on the new revision) rolls back: every node serves v1 again", async () => {
    const act = new MemoryRolloutActuator();
    const f = await rolloutFleet(redis.url, freshCluster("rob"), act, { perf: (rev) => (rev === "v2" ? { corrupted: 1 } : {}) });
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      await request(f, startReq());
      await waitFor("rolled back", async () => (await phase(f)) === "rolled-back", { timeoutMs: 30_000, everyMs: 100 });
      const s = (await f.state())!;
      expect(s.cause).toBe("corruption");
      expect(s.reason).toMatch(/corruption: engine reports corrupted requests on v2: a1=1/);
      expect(NODES.map((id) => act.revisionOf(id, "v1"))).toEqual(NODES.map(() => "v1"));
      expect(act.calls).toEqual(["a:a1→v2", "a:a1→v1"]);
      expect((await f.hash()).current).toBe("v1");
      expect((await f.hash()).allow).toBe("v1");
      expect(await gauge(f.leader()!.prom, "llmha_rollout_rollbacks_total", { cause: "corruption" })).toBe(1);
      expect((await rolloutEvents(f)).map((e) => e.phase)).toEqual(["switching", "rolling-back", "rolled-back"]);
    } finally {
      await f.stop();
    }
  });

  it("the leader replaced mid-rollout: the next leader continues from the hash", async () => {
    const act = new MemoryRolloutActuator();
    const f = await rolloutFleet(redis.url, freshCluster("rol"), act, { leaders: 2 });
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      const first = f.leader()!;
      await request(f, startReq(8 * I));
      await waitFor("step 2 under way", async () => (await f.state())?.step === 2, { timeoutMs: 30_000, everyMs: 100 });
      const before = (await f.state())!;
      await first.stop();
      await waitFor("the other leads", () => f.leader() !== null && f.leader() !== first, { timeoutMs: 10_000 });
      await waitFor("promoted", async () => (await phase(f)) === "promoted", { timeoutMs: 40_000, everyMs: 100 });
      const after = (await f.state())!;
      expect(after.id).toBe("r1");
      expect(after.startedAt).toBe(before.startedAt);
      expect(Number((await f.hash()).token)).toBe(f.leader()!.fleet.lease.token);
      // Each node asked once for v2 (a repeat, were there one, would be `already`).
      expect([...new Set(act.calls)]).toEqual(["a:a1→v2", "a:a2→v2", "b:b1→v2", "b:b2→v2", "c:c1→v2", "c:c2→v2", "a:→v2", "b:→v2", "c:→v2"]);
      expect(await gauge(f.leader()!.prom, "llmha_rollout_switches_total", { outcome: "applied" })).toBeGreaterThan(0);
    } finally {
      await f.stop();
    }
  });

  it("while the rollout is active, the canary node on the new revision is no model outlier; an abort restores it", async () => {
    const act = new MemoryRolloutActuator();
    const f = await rolloutFleet(redis.url, freshCluster("rom"), act);
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      await request(f, startReq(600_000));
      await waitFor("the canary step baking", async () => (await phase(f)) === "baking", { timeoutMs: 20_000, everyMs: 100 });
      const since = Date.now();
      // The models hash is published every 10th period: one written after a1 serves v2.
      const models = await waitFor("models published", async () => {
        const m = await f.redis.hgetall(`${f.keys.prefix}models`);
        return Number(m.updatedAt) > since + 2 * I ? m : null;
      }, { timeoutMs: 10_000, everyMs: 100 });
      expect(act.revisionOf("a1", "v1")).toBe("v2");
      expect(models).toMatchObject({ outlierCount: "0", agreeing: "6" });
      await request(f, { op: "abort", id: "r1", at: Date.now(), by: "test" });
      await waitFor("aborted", async () => (await phase(f)) === "aborted", { timeoutMs: 20_000, everyMs: 100 });
      expect(act.calls).toEqual(["a:a1→v2", "a:a1→v1"]);
      expect((await f.state())!.reason).toMatch(/aborted by test/);
      expect(await gauge(f.leader()!.prom, "llmha_rollout_rollbacks_total", { cause: "abort" })).toBe(1);
    } finally {
      await f.stop();
    }
  });

  it("the stack's change (the ConfigMap's request) made while another rollout is under way waits for it, then starts", async () => {
    const act = new MemoryRolloutActuator();
    const stack: RolloutRequest = { op: "start", id: "pulumi-abc", at: 1, to: { revision: "v3" }, bakeMs: 0, by: "pulumi" };
    let offered = false;
    const f = await rolloutFleet(redis.url, freshCluster("rox"), act, { rollout: { extraRequest: () => Promise.resolve(offered ? stack : null) } });
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      await request(f, startReq(600_000));
      await waitFor("r1 baking", async () => (await phase(f)) === "baking", { timeoutMs: 20_000, everyMs: 100 });
      offered = true;
      await new Promise((r) => setTimeout(r, 5 * I));
      const h = await f.hash();
      // Neither refused nor marked acted on: r1 goes on.
      expect(h).toMatchObject({ id: "r1", phase: "baking" });
      expect(h.actedExtra).toBeUndefined();
      expect(h.refused ?? "").not.toMatch(/pulumi-abc/);
      await request(f, { op: "abort", id: "r1", at: Date.now(), by: "test" });
      await waitFor("the stack's rollout promoted", async () => (await f.hash()).id === "pulumi-abc" && (await phase(f)) === "promoted", { timeoutMs: 40_000, everyMs: 100 });
      expect((await f.state())!.by).toBe("pulumi");
      expect(act.revisionOf("c2", "v1")).toBe("v3");
    } finally {
      await f.stop();
    }
  });

  it("a stale token cannot switch a node; with no rollout actuator a start is refused with its reason in the hash", async () => {
    const act = new MemoryRolloutActuator();
    const f = await rolloutFleet(redis.url, freshCluster("ros"), act, { rollout: { actuator: null } });
    try {
      await waitFor("a leader", () => f.leader() !== null, { timeoutMs: 10_000 });
      await waitFor("nodes registered", async () => (await f.redis.zcard(f.keys.nodes)) === 6, { timeoutMs: 10_000 });
      await request(f, startReq());
      const h = await waitFor("refused", async () => ((await f.hash()).refused ? f.hash() : null), { timeoutMs: 10_000 });
      expect(h.refused).toMatch(/start r1 refused: no rollout actuator is configured/);
      expect(h.state).toBeUndefined();
      expect(act.calls).toEqual([]);

      const leader = f.leader()!;
      const oldToken = leader.fleet.lease.token!;
      // An actuator that never answers cannot hang the leader's period: failed after the gate's timeout.
      const hung = { kind: "hung", granularity: "node" as const, switch: () => new Promise<never>(() => undefined) };
      const slow = new FencedRolloutActuator(hung, { redis: f.redis, keys: f.keys, lease: { currentToken: () => oldToken }, log: testLogger(), holder: leader.fleet.lease.holderId, timeoutMs: 100 });
      expect(await slow.switch({ rolloutId: "r1", az: "a", nodes: [{ nodeId: "a1", host: "a1" }], to: { revision: "v2" }, token: oldToken })).toMatchObject({ outcome: "failed", detail: expect.stringContaining("within 100 ms") });
      await f.redis.hset(f.keys.fenceLast, "token", oldToken + 1, "holder", "newer");
      const gate = new FencedRolloutActuator(act, { redis: f.redis, keys: f.keys, lease: { currentToken: () => oldToken }, log: testLogger(), holder: leader.fleet.lease.holderId });
      const r = await gate.switch({ rolloutId: "r1", az: "a", nodes: [{ nodeId: "a1", host: "a1" }], to: { revision: "v2" }, token: oldToken });
      expect(r.outcome).toBe("refused-stale");
      expect(r.detail).toMatch(/below the highest accepted token/);
      expect(act.calls).toEqual([]);
      expect(act.revisionOf("a1", "v1")).toBe("v1");
    } finally {
      await f.stop();
    }
  });
});
