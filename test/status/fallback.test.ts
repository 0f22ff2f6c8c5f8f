/**
 * `llm-ha status` shows L4: whether the tier is L4, so the L1 proxies answer from
 * `llm-ha fallback`, and the queue depth the fallback publishes in
 * `llmha:<cluster>:fallback:queue` {depth, topic, updatedAt} — text view and `--json`.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { main } from "../../agent/src/cli";
import { runInProcess } from "../support/in-process";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { fallbackQueueKey } from "../../agent/src/ops/status/view";
import { freshCluster, testLogger } from "../redis/helpers";
import type { FleetView } from "../../agent/src/ops/status/types";

const cli = (args: string[]) => runInProcess(main, ["status", ...args], { cleanLlmha: true });

let redis: RedisServerHandle;
let client: RedisClient;

beforeAll(async () => {
  redis = await startRedisServer();
  client = createRedisClient(redis.url, { name: "test-status-l4", log: testLogger() });
  await client.whenReady(5000);
});
afterAll(async () => {
  await client?.close();
  await redis?.stop();
});

async function tier(cluster: string, level: string, reason: string): Promise<void> {
  await client.redis.hset(new RedisKeys(cluster).tier, { level, reason, token: 7, updatedAt: Date.now() });
}

describe("llm-ha status: L4 and the fallback's queue", () => {
  it("L4 active with 12 queued requests, as the fallback publishes them", async () => {
    const cluster = freshCluster("l4");
    // What the leader and agent/src/edge/fallback/command.ts keep writing (every 1 and 2 s): kept
    // fresh while the CLI runs, which takes seconds to start on a loaded machine.
    const key = fallbackQueueKey(cluster);
    const publish = async (): Promise<void> => {
      await tier(cluster, "L4", "every AZ DOWN");
      await client.redis.multi().hset(key, { depth: 12, topic: `llmha.${cluster}.requests`, updatedAt: Date.now() - 1500 }).pexpire(key, 30_000).exec();
    };
    await publish();
    // A write still in flight when the test ends meets a closed client: not the test's failure.
    const publisher = setInterval(() => void publish().catch(() => undefined), 1000);
    onTestFinished(() => clearInterval(publisher));

    const text = await cli(["--redis-url", redis.url, "--cluster", cluster]);
    expect(text.stderr).toBe("");
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`\\nL4 +ACTIVE +queue 12 requests +\\(llmha\\.${cluster}\\.requests, \\d+s ago\\) +L1 sends to the fallback\\n`));

    const json = await cli(["--redis-url", redis.url, "--cluster", cluster, "--json"]);
    const v = JSON.parse(json.stdout) as FleetView;
    expect(v.fallback.l4).toBe(true);
    expect(v.fallback.queue).toMatchObject({ depth: 12, topic: `llmha.${cluster}.requests`, stale: false });
    expect(v.fallback.queue!.ageMs).toBeGreaterThanOrEqual(1000);
  });

  it("below L4: inactive; a queue no fallback samples any more is stale; none published says so", async () => {
    const a = freshCluster("l4");
    await tier(a, "L0", "all AZs OK");
    await client.redis.hset(fallbackQueueKey(a), { depth: 0, topic: `llmha.${a}.requests`, updatedAt: Date.now() - 20_000 });
    const text = await cli(["--redis-url", redis.url, "--cluster", a]);
    expect(text.stdout).toMatch(/\nL4 +inactive +queue 0 requests +stale: not sampled +\(llmha\.\S+\.requests, [2-9]\ds ago\)\n/);
    const va = JSON.parse((await cli(["--redis-url", redis.url, "--cluster", a, "--json"])).stdout) as FleetView;
    expect(va.fallback).toMatchObject({ l4: false, queue: { depth: 0, stale: true } });

    const b = freshCluster("l4");
    await tier(b, "L1", "nodes out: a3");
    const tb = await cli(["--redis-url", redis.url, "--cluster", b]);
    expect(tb.stdout).toMatch(/\nL4 +inactive +queue not published \(no fallback with Kafka\)\n/);
    const vb = JSON.parse((await cli(["--redis-url", redis.url, "--cluster", b, "--json"])).stdout) as FleetView;
    expect(vb.fallback).toEqual({ l4: false, queue: null });
  });
});
