/**
 * A practice wake on request: `llm-ha practice` (its entry function, as bin/llm-ha runs it) against a real
 * redis-server reads the fleet first and writes the request only when the leader would act on
 * it (L0, the standby asleep), refusing otherwise and on a cluster with no data; the schedule
 * step acts on a request once, as on a firing, also with no cron; a request while the standby
 * is awake is skipped; a bad Redis URL or an unreachable Redis is a clear error with a non-zero exit.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyPracticeMemory, PracticeSchedule, type PracticeInput } from "../../agent/src/fleet/actuators/practice";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { freePort } from "../../agent/src/util/net";
import { main } from "../../agent/src/cli";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { runInProcess } from "../support/in-process";

const QUIET: PracticeInput = { tier: "L0", standbyWanted: false, standbyHealthy: 0, unavailable: null };
/** `llm-ha ARGS`, with no `LLMHA_REDIS_URL` of the caller's. */
async function llmha(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runInProcess(main, args, { cleanLlmha: true });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

describe("PracticeSchedule.step on request", () => {
  const sched = new PracticeSchedule({ cron: null, timeZone: "UTC", budgetMs: 600_000 });

  it("with no cron, nothing happens until a request; the request starts one practice, once", () => {
    const t = 1_800_000_000_000;
    expect(sched.step(emptyPracticeMemory(), QUIET, t).wake).toBe(false);
    const s1 = sched.step(emptyPracticeMemory(), { ...QUIET, requestedAt: t - 500 }, t);
    expect(s1.wake).toBe(true);
    expect(s1.memory).toMatchObject({ firedAt: t - 500, startedAt: t });
    const s2 = sched.step(s1.memory, { ...QUIET, requestedAt: t - 500, standbyHealthy: 8 }, t + 4000);
    expect(s2.record).toMatchObject({ outcome: "served", wakeMs: 4000 });
    // The same request is not acted on again.
    const s3 = sched.step(s2.memory, { ...QUIET, requestedAt: t - 500 }, t + 5000);
    expect(s3.wake).toBe(false);
    expect(s3.record).toBeUndefined();
  });

  it("a request while the standby is awake or above L0 is skipped and recorded; one from the future waits", () => {
    const t = 1_800_000_000_000;
    expect(sched.step(emptyPracticeMemory(), { ...QUIET, requestedAt: t, standbyHealthy: 8 }, t).record).toMatchObject({ outcome: "skipped" });
    expect(sched.step(emptyPracticeMemory(), { ...QUIET, requestedAt: t, tier: "L2" }, t).record?.reason).toContain("tier L2");
    expect(sched.step(emptyPracticeMemory(), { ...QUIET, requestedAt: t + 60_000 }, t).wake).toBe(false);
  });
});

describe("llm-ha practice", () => {
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** A cluster as a leader leaves it: the tier and the standby's desired state (`wake` 0 = asleep). */
  async function seed(cluster: string, tier: string, standby: { az: string; wake: 0 | 1 } | null): Promise<void> {
    const c = new Redis(redis.url);
    try {
      const k = new RedisKeys(cluster);
      await c.hset(k.tier, { level: tier, reason: tier === "L0" ? "all AZs serve" : "az-a down", updatedAt: Date.now() });
      if (standby) await c.hset(k.standbyWake, { az: standby.az, wake: standby.wake, reason: standby.wake ? "az-a down" : "not needed", updatedAt: Date.now() });
    } finally {
      c.disconnect();
    }
  }
  async function requested(cluster: string): Promise<string | null> {
    const c = new Redis(redis.url);
    try {
      return await c.get(new RedisKeys(cluster).practiceRequest);
    } finally {
      c.disconnect();
    }
  }

  it("at L0 with the standby asleep: writes the request (Redis time, epoch ms) and says what the leader will do", async () => {
    await seed("prac-1", "L0", { az: "az-c", wake: 0 });
    const r = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-1"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("practice wake requested");
    expect(r.out).toContain("tier L0; standby az-c asleep");
    expect(r.out).toContain("no leader holds the lease now: the next leader wakes the standby");
    const c = new Redis(redis.url);
    try {
      const at = Number(await c.get(new RedisKeys("prac-1").practiceRequest));
      expect(Math.abs(at - Date.now())).toBeLessThan(5000);
      expect(await c.pttl(new RedisKeys("prac-1").practiceRequest)).toBeGreaterThan(0);
    } finally {
      c.disconnect();
    }
  }, 20_000);

  it("refuses, writing nothing, what the leader would skip: the tier above L0, the standby awake, no standby AZ", async () => {
    await seed("prac-l2", "L2", { az: "az-c", wake: 0 });
    const l2 = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-l2"]);
    expect(l2.code).toBe(4);
    expect(l2.out).toBe("");
    expect(l2.err).toContain("llm-ha practice: not requested: the tier is L2 (az-a down): the leader skips a practice above L0");
    expect(await requested("prac-l2")).toBeNull();

    await seed("prac-awake", "L0", { az: "az-c", wake: 1 });
    const awake = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-awake"]);
    expect(awake.code).toBe(4);
    expect(awake.err).toContain("the standby az-c is already awake");
    expect(await requested("prac-awake")).toBeNull();

    await seed("prac-nosb", "L0", null);
    const none = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-nosb"]);
    expect(none.code).toBe(4);
    expect(none.err).toContain("no standby AZ is published");
    expect(await requested("prac-nosb")).toBeNull();
  }, 30_000);

  it("refuses a cluster with no data (exit 3, as status), writing nothing", async () => {
    const r = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-empty"]);
    expect(r.code).toBe(3);
    expect(r.err).toContain("no llm-ha data for cluster prac-empty");
    expect(await requested("prac-empty")).toBeNull();
  }, 20_000);

  /** Plays the leader's part on the `practice` hash as the controller writes it: acts on the request, then records `outcome`. */
  async function leaderActs(cluster: string, outcome: "served" | "failed" | "skipped" | "interrupted"): Promise<void> {
    const c = new Redis(redis.url);
    const k = new RedisKeys(cluster);
    try {
      let req: string | null = null;
      for (let i = 0; i < 100 && !req; i++) {
        req = await c.get(k.practiceRequest);
        if (!req) await new Promise((r) => setTimeout(r, 100));
      }
      expect(req, "the command wrote no request").not.toBeNull();
      const start = Date.now();
      if (outcome === "skipped") {
        await c.hset(k.practice, { firedAt: req!, startedAt: "", lastAt: start, lastOutcome: "skipped", lastWakeMs: "", lastReason: "skipped: tier L2" });
        return;
      }
      await c.hset(k.practice, { firedAt: req!, startedAt: start });
      await new Promise((r) => setTimeout(r, 1200));
      const reason = outcome === "served" ? "first standby node serving 4.0 s after the practice wake" : outcome === "failed" ? "no standby node serving 1200 s after the practice wake (budget 1200 s)" : "an incident wants the standby";
      await c.hset(k.practice, { startedAt: "", lastAt: start, lastOutcome: outcome, lastWakeMs: outcome === "served" ? 4000 : "", lastReason: reason });
    } finally {
      c.disconnect();
    }
  }

  it("--wait follows the request to the leader's outcome, with its exit code (served 0, skipped 4, failed 5, interrupted 6)", async () => {
    for (const [outcome, code] of [["served", 0], ["skipped", 4], ["failed", 5], ["interrupted", 6]] as const) {
      const cluster = `prac-wait-${outcome}`;
      await seed(cluster, "L0", { az: "az-c", wake: 0 });
      // An older practice's record must not be taken for this one's.
      const c = new Redis(redis.url);
      await c.hset(new RedisKeys(cluster).practice, { firedAt: 1, startedAt: "", lastAt: 1, lastOutcome: "served", lastWakeMs: 3000, lastReason: "old" });
      c.disconnect();
      const [r] = await Promise.all([llmha(["practice", "--redis-url", redis.url, "--cluster", cluster, "--wait", "--wait-timeout", "20"]), leaderActs(cluster, outcome)]);
      expect(r.code, `${outcome}: ${r.err}`).toBe(code);
      if (outcome !== "skipped") expect(r.out).toContain("practice wake started at");
      if (outcome === "served") expect(r.out).toContain("practice wake served in 4.0 s");
      else expect(r.err).toContain(`llm-ha practice: practice wake ${outcome}`);
    }
  }, 90_000);

  it("--wait with no leader acting gives up after --wait-timeout with exit 7; --wait-timeout alone is a usage error", async () => {
    await seed("prac-noleader", "L0", { az: "az-c", wake: 0 });
    const r = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-noleader", "--wait", "--wait-timeout=1"]);
    expect(r.code).toBe(7);
    expect(r.err).toContain("no outcome within 1 s (no leader acted on the request");
    const bad = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-noleader", "--wait-timeout", "5"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--wait-timeout only applies with --wait");
    const typo = await llmha(["practice", "--redis-url", redis.url, "--wiat"]);
    expect(typo.code).toBe(2);
    expect(typo.err).toContain("did you mean --wait?");
  }, 30_000);

  it("status shows a pending request (text and -o json) until the leader acts on it", async () => {
    await seed("prac-pending", "L0", { az: "az-c", wake: 0 });
    expect((await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-pending"])).code).toBe(0);
    const text = await llmha(["status", "--redis-url", redis.url, "--cluster", "prac-pending"]);
    expect(text.out).toMatch(/practice\s+requested \d+s ago, pending: the leader acts on its next period/);
    const json = JSON.parse((await llmha(["status", "--redis-url", redis.url, "--cluster", "prac-pending", "-o", "json"])).out);
    const req = Number(await requested("prac-pending"));
    expect(json.practice.requestedAt).toBe(req);
    // The leader acted (firedAt moved to the request): no longer pending.
    const c = new Redis(redis.url);
    await c.hset(new RedisKeys("prac-pending").practice, { firedAt: req, startedAt: Date.now() });
    c.disconnect();
    const after = JSON.parse((await llmha(["status", "--redis-url", redis.url, "--cluster", "prac-pending", "-o", "json"])).out);
    expect(after.practice.requestedAt).toBeNull();
    expect(after.practice.runningSince).not.toBeNull();
  }, 30_000);

  it("--help is practice's own help, on stdout, exit 0", async () => {
    const r = await llmha(["practice", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("Usage: llm-ha practice");
    expect(r.out).not.toContain("Usage: llm-ha status");
  }, 20_000);

  it("an unreachable Redis or a bad URL is a clear error and a non-zero exit", async () => {
    const port = await freePort();
    const down = await llmha(["practice", "--redis-url", `redis://127.0.0.1:${port}`, "--cluster", "prac-1"]);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/llm-ha practice: cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+/);
    const bad = await llmha(["practice", "--redis-url", "http://nope", "--cluster", "prac-1"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--redis-url");
  }, 20_000);
});
