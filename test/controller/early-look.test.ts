/**
 * The leader's early look: a node whose report worsens writes an event with its record, and the
 * leader evaluates at once instead of at its next period. On a real redis-server with the ACL
 * roles (agents heartbeat as `llmha-agent`, the leader reads the stream as `llmha-controller`),
 * with a period far longer than the test waits, so a decision seen is an early one. Counted, not
 * timed: the AZ is published DOWN with no period passed; early evaluations never make a state
 * better nor count toward `recoverPeriods` (recovery still takes that many periods).
 */
import { describe, expect, it } from "vitest";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { worsens } from "../../agent/src/fleet/controller/early";
import type { RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { heartbeatArgs } from "../../agent/src/fleet/redis/registry";
import { heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import type { NodeStatus } from "../../agent/src/types";
import { sleep, waitFor } from "../../agent/src/util/net";
import { roleRedis } from "../support/role-redis";
import { testLogger } from "../redis/helpers";

const log = testLogger();
const { keys, as } = roleRedis("early");
const NODES = ["a1", "a2", "b1", "b2", "c1", "c2"];
const azOf = (id: string): string => `az-${id[0]}`;

function beat(agent: RedisClient, id: string, status: NodeStatus): Promise<unknown> {
  const now = Date.now();
  const ok = status === "HEALTHY";
  const { k, a } = heartbeatArgs(keys, {
    nodeId: id, az: azOf(id), gpus: 8, gpusExpected: 8, model: "m",
    decision: {
      status, phase: ok ? "serving" : "down", weight: ok ? 100 : 0, since: now, checkedAt: now, loadScore: 0.5, pending: [], suppressed: [],
      reasons: ok ? [] : [{ source: "gpu", code: "GPU_LOST", hard: true, effect: "unknown", detail: "lost" }],
    },
  }, 60_000, 1000);
  return heartbeatScript(agent.redis, k, a);
}

describe("the leader's early look at a worsening node", () => {
  it("publishes an AZ DOWN between periods, and recovers only after recoverPeriods periods", async () => {
    const agent = await as("llmha-agent");
    const ctl = await as("llmha-controller");
    const admin = await as(null);
    await Promise.all(NODES.map((id) => beat(agent, id, "HEALTHY")));
    const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "early-leader", settings: { ttlMs: 60_000, renewMs: 20_000, contendMs: 200, marginMs: 2000 }, log });
    lease.start();
    // A period longer than the whole test: every decision after the first is an early one or a tick called here.
    const controller = new Controller({ redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, settings: { intervalMs: 600_000, recoverPeriods: 3 }, early: { minGapMs: 50 } });
    const state = async (az: string): Promise<string | null> => (await admin.redis.hget(keys.azState(az), "state")) ?? null;
    try {
      await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
      controller.start();
      await waitFor("the first period", () => controller.tickCount === 1, { timeoutMs: 5000 });
      expect(await state("az-a")).toBe("OK");
      // The stream is followed from here on: let the watch's first read reach Redis.
      await sleep(300);

      await Promise.all(["a1", "a2"].map((id) => beat(agent, id, "UNHEALTHY")));
      // Published once the early evaluation's writes are all accepted (then it is counted).
      await waitFor("az-a DOWN", async () => controller.earlyTickCount >= 1 && (await state("az-a")) === "DOWN", { timeoutMs: 10_000, everyMs: 20 });
      expect(controller.tickCount).toBe(1);
      expect(controller.lastEvaluation?.tier.level).not.toBe("L0");

      // Healed: a node becoming HEALTHY starts no early look, and another node's fault (which does)
      // leaves az-a DOWN: an early evaluation only makes states worse and counts no period.
      await Promise.all(["a1", "a2"].map((id) => beat(agent, id, "HEALTHY")));
      await sleep(300); // the first fault's early evaluations (one per gap) all done
      const early = controller.earlyTickCount;
      await beat(agent, "c1", "UNHEALTHY");
      await waitFor("az-c DEGRADED", async () => controller.earlyTickCount > early && (await state("az-c")) === "DEGRADED", { timeoutMs: 10_000, everyMs: 20 });
      expect(await state("az-a")).toBe("DOWN");
      expect(controller.tickCount).toBe(1);

      // recoverPeriods = 3 periodic evaluations: DOWN after two, better at the third.
      await controller.tick();
      await controller.tick();
      expect(await state("az-a")).toBe("DOWN");
      await controller.tick();
      expect(await state("az-a")).not.toBe("DOWN");
      expect(controller.tickCount).toBe(4);
    } finally {
      controller.stop();
      await lease.release();
    }
  }, 30_000);

  it("with early: false, a worsening waits for the period", async () => {
    const agent = await as("llmha-agent");
    const ctl = await as("llmha-controller");
    const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "early-leader-2", settings: { ttlMs: 60_000, renewMs: 20_000, contendMs: 200, marginMs: 2000 }, log });
    lease.start();
    const controller = new Controller({ redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, settings: { intervalMs: 600_000 }, early: false });
    try {
      await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
      controller.start();
      await waitFor("the first period", () => controller.tickCount === 1, { timeoutMs: 5000 });
      await beat(agent, "b1", "UNHEALTHY");
      await sleep(1000);
      expect(controller.earlyTickCount).toBe(0);
      expect(controller.tickCount).toBe(1);
    } finally {
      controller.stop();
      await lease.release();
    }
  }, 30_000);
});

describe("which node events are decided at once", () => {
  const ev = (status: string, soft = "", hard = ""): string[] => ["type", "node", "node", "n1", "az", "a", "from", "HEALTHY", "status", status, "soft", soft, "hard", hard];
  it("a hard reason or a swept silent node: at once; soft checks alone wait for the period (the blast-radius cap sees them together); a recovery never", () => {
    expect(worsens(ev("UNHEALTHY", "", "GPU_LOST"))).toBe(true);
    expect(worsens(ev("UNHEALTHY", "PROBE_LATENCY", "XID_79"))).toBe(true);
    expect(worsens(["type", "node", "node", "n1", "az", "a", "status", "EXPIRED", "token", "7", "leader", "l"])).toBe(true);
    expect(worsens(ev("DEGRADED", "PROBE_LATENCY"))).toBe(false);
    expect(worsens(ev("UNHEALTHY", "PROBE_LATENCY"))).toBe(false);
    expect(worsens(ev("HEALTHY"))).toBe(false);
    expect(worsens(["type", "az", "az", "a", "status", "DOWN", "hard", "x"])).toBe(false);
  });
});
