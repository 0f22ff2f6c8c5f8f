/**
 * A practice wake on request (issue 15): `llm-ha practice` run as a process against a real
 * redis-server writes the request; the schedule step acts on it once, as on a firing, also
 * with no cron; a request while the standby is awake is skipped; a bad Redis URL or an
 * unreachable Redis is a clear error with a non-zero exit.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyPracticeMemory, PracticeSchedule, type PracticeInput } from "../../agent/src/actuators/practice";
import { RedisKeys } from "../../agent/src/redis/keys";
import { freePort } from "../../agent/src/util/net";
import { runLlmHa } from "../../lab/cli-process";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";

const QUIET: PracticeInput = { tier: "L0", standbyWanted: false, standbyHealthy: 0, unavailable: null };
/** `llm-ha` as a process, with no `LLMHA_REDIS_URL` of the caller's. */
async function llmha(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runLlmHa(args);
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

  it("writes the request (Redis time, epoch ms) under the cluster's prefix and says what happens next", async () => {
    const r = await llmha(["practice", "--redis-url", redis.url, "--cluster", "prac-1"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("practice wake requested");
    expect(r.out).toContain("no leader holds the lease now");
    const c = new Redis(redis.url);
    try {
      const at = Number(await c.get(new RedisKeys("prac-1").practiceRequest));
      expect(Math.abs(at - Date.now())).toBeLessThan(5000);
      expect(await c.pttl(new RedisKeys("prac-1").practiceRequest)).toBeGreaterThan(0);
    } finally {
      c.disconnect();
    }
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
