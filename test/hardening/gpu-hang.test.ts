/**
 * While nvidia-smi hangs, the node's heartbeat in Redis and its agent-check
 * reply agree — the heartbeat does not drop to 0 GPUs while HAProxy is still told `up` —
 * and the drain comes within 10 s at the default settings (1 s period, 5 s nvidia-smi
 * timeout, fall 3). Real agent, real redis-server, the fake nvidia-smi hanging.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { sleep, waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { SimNode } from "../../lab/sim/sim-node";
import { testLogger } from "../redis/helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-gpuhang-"));
let redis: RedisServerHandle;
let client: RedisClient;
let node: SimNode;
const keys = new RedisKeys("hang");

beforeAll(async () => {
  redis = await startRedisServer();
  client = createRedisClient(redis.url, { name: "gpu-hang-test", log: testLogger() });
  // Default periods; only the warm-up ramp is shortened so the node starts at 100 %.
  node = await SimNode.start({ id: "gpu-h1", az: "az-a", dir, env: { LLMHA_REDIS_URL: redis.url, LLMHA_CLUSTER: "hang", LLMHA_WARMUP_STEP_MS: "200" } });
  await waitFor("the node up ready 100%", async () => (await node.agentCheck()) === "up ready 100%", { timeoutMs: 30_000 });
});
afterAll(async () => {
  await node?.stop();
  await client?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("nvidia-smi hang", () => {
  it("heartbeat and agent-check agree until the drain, which comes within 10 s", async () => {
    await node.gpuFault("hang");
    const t0 = Date.now();
    let drainedAt: number | null = null;
    const disagreements: string[] = [];
    while (Date.now() - t0 < 20_000 && drainedAt === null) {
      const [reply, gpus] = await Promise.all([node.agentCheck(), client.redis.hget(keys.node("gpu-h1"), "gpus")]);
      if (reply.startsWith("up") && gpus === "0") disagreements.push(`${Date.now() - t0} ms: ${reply} with 0 GPUs in Redis`);
      if (reply === "drain") drainedAt = Date.now();
      await sleep(100);
    }
    process.stderr.write(`[gpu-hang] drain ${drainedAt === null ? "never" : `${drainedAt - t0} ms`} after nvidia-smi hung\n`);
    expect(disagreements).toEqual([]);
    expect(drainedAt).not.toBeNull();
    expect(drainedAt! - t0).toBeLessThan(10_000);
    await waitFor("the heartbeat to say 0 GPUs once drained", async () => (await client.redis.hget(keys.node("gpu-h1"), "gpus")) === "0", { timeoutMs: 5000 });
  }, 60_000);
});
