/**
 * Practice wakes: the pure schedule step, and the controller publishing the
 * practice's standby decision, its record and its events (real redis-server and lease).
 */
import type { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyPracticeMemory, PracticeSchedule, type PracticeInput, type PracticeMemory } from "../../agent/src/fleet/actuators/practice";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";
import { loadConfig } from "../../agent/src/config/load";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";

const log = testLogger();
// Tuesday 2026-12-01 04:00 Europe/Berlin = 03:00 UTC.
const DUE = Date.parse("2026-12-01T03:00:00Z");
const QUIET: PracticeInput = { tier: "L0", standbyWanted: false, standbyHealthy: 0, unavailable: null };

function run(schedule: PracticeSchedule, steps: [number, Partial<PracticeInput>][], mem: PracticeMemory = emptyPracticeMemory()) {
  const out = [];
  for (const [t, inp] of steps) {
    const s = schedule.step(mem, { ...QUIET, ...inp }, t);
    mem = s.memory;
    out.push(s);
  }
  return { out, mem };
}

describe("PracticeSchedule.step", () => {
  const registry = new Registry();
  const sched = new PracticeSchedule({ cron: "0 4 * * 2", timeZone: "Europe/Berlin", budgetMs: 1_200_000 }, registry);

  it("wakes at the firing (L0, standby at zero), releases at the first standby node serving, records the wake time once", () => {
    const { out, mem } = run(sched, [
      [DUE - 30_000, {}],
      [DUE + 1000, {}],
      [DUE + 2000, {}],
      [DUE + 95_000, { standbyHealthy: 8 }],
      [DUE + 96_000, {}],
    ]);
    expect(out.map((s) => s.wake)).toEqual([false, true, true, false, false]);
    expect(out[1].reason).toBe("practice wake (due 2026-12-01T03:00:00.000Z)");
    expect(out[3].record).toEqual({ at: DUE + 1000, outcome: "served", wakeMs: 94_000, reason: "first standby node serving 94.0 s after the practice wake" });
    expect(out[4].record).toBeUndefined(); // the same firing is not practised twice
    expect(mem).toMatchObject({ firedAt: DUE, startedAt: null });
  });

  it("skips above L0 and when the standby is already awake", () => {
    expect(run(sched, [[DUE + 1000, { tier: "L2" }]]).out[0]).toMatchObject({ wake: false, record: { outcome: "skipped", reason: "skipped: tier L2" } });
    expect(run(sched, [[DUE + 1000, { standbyHealthy: 8 }]]).out[0]).toMatchObject({ wake: false, record: { outcome: "skipped", reason: "skipped: the standby is already awake" } });
  });

  it("fails past its budget, or at once when capacity is unavailable; an incident takes over", () => {
    const over = run(sched, [[DUE + 1000, {}], [DUE + 1000 + 1_200_000, {}]]).out[1];
    expect(over).toMatchObject({ wake: false, record: { outcome: "failed", reason: "no standby node serving 1200 s after the practice wake (budget 1200 s)" } });
    const ice = run(sched, [[DUE + 1000, {}], [DUE + 20_000, { unavailable: "capacity unavailable after 2 steps (capacity on g: We currently do not have sufficient…)" }]]).out[1];
    expect(ice).toMatchObject({ wake: false, record: { outcome: "failed", reason: expect.stringMatching(/^capacity unavailable after 2 steps/) } });
    expect(run(sched, [[DUE + 1000, {}], [DUE + 5000, { standbyWanted: true, tier: "L3" }]]).out[1]).toMatchObject({ record: { outcome: "interrupted" } });
  });

  it("a new leader continues a running practice and does not repeat a handled firing", () => {
    expect(run(sched, [[DUE + 10_000, {}]], { ...emptyPracticeMemory(DUE), startedAt: null }).out[0].wake).toBe(false);
    expect(run(sched, [[DUE + 10_000, {}]], { ...emptyPracticeMemory(DUE), startedAt: DUE + 1000 }).out[0]).toMatchObject({ wake: true, reason: "practice wake (started 2026-12-01T03:00:01.000Z)" });
    // A term looks back one minute on its first period (a leader handover at the firing).
    expect(run(sched, [[DUE + 50_000, {}]]).out[0].wake).toBe(true);
    expect(run(sched, [[DUE + 70_000, {}]]).out[0].wake).toBe(false);
  });

  it("counts outcomes in metrics", async () => {
    sched.recorded({ at: DUE, outcome: "served", wakeMs: 94_000, reason: "x" });
    const text = await registry.metrics();
    expect(text).toContain('llmha_practice_wakes_total{outcome="served"} 1');
    expect(text).toContain("llmha_practice_last_wake_seconds 94");
  });

  it("config: a bad cron, zone, or no standby AZ stops start-up naming the variable", async () => {
    const base = { LLMHA_AZ: "az-a", LLMHA_NODE_ID: "n1" };
    await expect(loadConfig([], { ...base, LLMHA_PRACTICE_WAKE: "0 4 * *", LLMHA_STANDBY_AZ: "az-c" })).rejects.toThrow(/LLMHA_PRACTICE_WAKE/);
    await expect(loadConfig([], { ...base, LLMHA_PRACTICE_WAKE: "0 4 * * 2", LLMHA_PRACTICE_WAKE_TZ: "Mars/Olympus", LLMHA_STANDBY_AZ: "az-c" })).rejects.toThrow(/LLMHA_PRACTICE_WAKE_TZ/);
    await expect(loadConfig([], { ...base, LLMHA_PRACTICE_WAKE: "0 4 * * 2" })).rejects.toThrow(/LLMHA_PRACTICE_WAKE.*LLMHA_STANDBY_AZ/);
  });
});

let server: RedisServerHandle;
let client: RedisClient;
let redis: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "practice-test", log });
  redis = client.redis;
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

describe("Controller with a practice schedule", () => {
  it("publishes the practice wake without moving the tier, then the record and an event", async () => {
    const keys = new RedisKeys(freshCluster());
    const lease = new LeaderLease({ redis, keys, holderId: "leader-p", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    lease.start();
    await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
    try {
      const ctl = new Controller({
        redis, keys, lease, writer: new FencedWriter(redis, keys, lease), log,
        settings: { standbyAz: "az-c", intervalMs: 1000 },
        practice: new PracticeSchedule({ cron: "0 4 * * 2", timeZone: "Europe/Berlin", budgetMs: 60_000 }),
      });
      const first = await ctl.tick(DUE + 1000);
      expect(first?.standby).toMatchObject({ az: "az-c", wake: true, reason: "practice wake (due 2026-12-01T03:00:00.000Z)" });
      expect(first?.tier.level).toBe("L0");
      expect(await redis.hgetall(keys.standbyWake)).toMatchObject({ wake: "1", reason: "practice wake (due 2026-12-01T03:00:00.000Z)" });
      expect(await redis.hgetall(`${keys.prefix}practice`)).toMatchObject({ firedAt: String(DUE), startedAt: String(DUE + 1000) });
      // No standby node ever serves (nothing registered): failed at the budget, released.
      const last = await ctl.tick(DUE + 61_000);
      expect(last?.standby.wake).toBe(false);
      expect(await redis.hgetall(`${keys.prefix}practice`)).toMatchObject({ lastOutcome: "failed", lastAt: String(DUE + 1000), startedAt: "" });
      const evs = (await redis.xrange(keys.events, "-", "+")).map(([, kv]) => kv.join(" "));
      expect(evs.some((e) => e.includes("type practice"))).toBe(true);
      // `llm-ha status` shows the last practice.
      const view = await readFleetView(redis, keys);
      expect(view.practice).toMatchObject({ outcome: "failed", at: DUE + 1000, wakeMs: null, runningSince: null });
      const line = renderFleetView(view, { width: 200 }).find((l) => l.startsWith("practice"));
      expect(line).toMatch(/^practice last 2026-12-01T03:00Z failed {2}no standby node serving 60 s after the practice wake/);
    } finally {
      await lease.release();
    }
  });
});
