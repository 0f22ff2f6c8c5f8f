/**
 * Warning facts end to end: a real `llm-ha agent` process with the fake nvidia-smi on a real
 * redis-server. The node serves (HEALTHY) while its corrected-ECC count rises; its record's
 * `gpuFault` then carries the warning (`warn`: the count and its rise, in coarse steps) with no
 * fault, which is what the leader's predictive drain reads.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseGpuFault } from "../../agent/src/node/sources/gpu-fault";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { eccCorrected } from "../../lab/sim/nvsmi-state";
import { SimNode } from "../../lab/sim/sim-node";
import { freshCluster } from "../redis/helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-gpu-warn-"));
const cluster = freshCluster("warn");
let redis: RedisServerHandle;
let node: SimNode;
let r: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  r = new Redis(redis.url);
  node = await SimNode.start({
    id: "gpu-w1", az: "az-a", dir,
    env: { LLMHA_REDIS_URL: redis.url, LLMHA_CLUSTER: cluster, LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "0", LLMHA_ROLE: "node" },
  });
}, 60_000);

afterAll(async () => {
  await node?.stop();
  r?.disconnect();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const hash = (): Promise<Record<string, string>> => r.hgetall(`llmha:${cluster}:node:gpu-w1`);

describe("warning facts in the node record (real agent, fake nvidia-smi, real redis-server)", () => {
  it("no warning on the capture's 0 corrected errors; a rise to 130 is published as {ecc: 100, eccRise: 100} while the node serves", async () => {
    await waitFor("node HEALTHY", async () => (await hash()).status === "HEALTHY", { timeoutMs: 20_000, everyMs: 100 });
    expect((await hash()).gpuFault).toBe("");
    await node.setGpu(eccCorrected(130));
    const f = await waitFor("warning in the record", async () => parseGpuFault((await hash()).gpuFault)?.warn ?? null, { timeoutMs: 10_000, everyMs: 100 });
    expect(f).toEqual({ ecc: 100, eccRise: 100, slow: 0 });
    const h = await hash();
    expect(h.status).toBe("HEALTHY");
    expect(h.hard).toBe("");
    expect(parseGpuFault(h.gpuFault)).toMatchObject({ xids: [], recovery: null, remap: null });
  });
});
