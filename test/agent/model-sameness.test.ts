import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/controller/fleet";
import { modelSameness } from "../../agent/src/evaluator/model-sameness";
import { modelReasons } from "../../agent/src/evaluator/rules";
import { ADAPTERS } from "../../agent/src/sources/inference";
import type { NodeReport } from "../../agent/src/redis/registry";
import type { Decision } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { startFakeInference, WRONG_MODEL_ID, type FakeInference } from "../../lab/sim/fake-inference";
import { freshCluster, testLogger } from "../redis/helpers";

/** Issue 16: same model everywhere — what each server serves, the fleet's majority, the odd one out. */
const S = { gpuCount: 8, model: "m", probeLatencyMs: 1000, wedgeMs: 500, probeStuckMs: 4000 };

describe("model sameness: the fleet's majority and the odd ones", () => {
  it("flags nodes and whole AZs that serve another model; loading nodes have no say", () => {
    const s = modelSameness([
      { nodeId: "a1", az: "a", model: "llama@r1" },
      { nodeId: "a2", az: "a", model: "llama@r1" },
      { nodeId: "b1", az: "b", model: "llama@r1" },
      { nodeId: "b2", az: "b", model: "llama@r2" },
      { nodeId: "c1", az: "c", model: "llama-fp8@r1" },
      { nodeId: "c2", az: "c", model: "" },
    ]);
    expect(s.majority).toBe("llama@r1");
    expect(s.outliers).toEqual([
      { nodeId: "b2", az: "b", model: "llama@r2" },
      { nodeId: "c1", az: "c", model: "llama-fp8@r1" },
    ]);
    expect(s.outlierAzs).toEqual(["c"]);
    expect(modelSameness([])).toEqual({ majority: null, outliers: [], outlierAzs: [] });
  });
});

describe("the agent reports what the server serves, and takes out a wrong model", () => {
  const fakes: FakeInference[] = [];
  afterAll(async () => Promise.all(fakes.map((f) => f.close())));

  it("TGI's /info and vLLM's model list give the identity (revision, dtype, context)", async () => {
    const tgi = await startFakeInference({ kind: "tgi", model: "m" });
    const vllm = await startFakeInference({ kind: "vllm", model: "m" });
    fakes.push(tgi, vllm);
    const t = await ADAPTERS.tgi.check(tgi.url, "m", 2000);
    expect(t).toMatchObject({ kind: "ready", identity: { id: "m", dtype: "torch.float16", maxContext: 8192 } });
    const v = await ADAPTERS.vllm.check(vllm.url, "m", 2000);
    expect(v).toMatchObject({ kind: "ready", served: ["m"], identity: { id: "m", maxContext: 8192 } });
  });
  it("another model id is MODEL_MISSING; another revision under the same id is MODEL_MISMATCH (both hard)", async () => {
    const wrong = await startFakeInference({ kind: "vllm", model: "m", mode: "wrong-model" });
    fakes.push(wrong);
    const obs = await ADAPTERS.vllm.check(wrong.url, "m", 2000);
    expect(modelReasons(obs, S, true).map((r) => [r.code, r.hard])).toEqual([["MODEL_MISSING", true]]);
    expect(obs.kind === "ready" && obs.served).toEqual([WRONG_MODEL_ID]);
    const ready = { kind: "ready" as const, served: ["m"], identity: { id: "m", revision: "abc123", dtype: null, maxContext: null } };
    expect(modelReasons(ready, { ...S, modelRevision: "def456" }, true).map((r) => [r.code, r.hard])).toEqual([["MODEL_MISMATCH", true]]);
    expect(modelReasons(ready, { ...S, modelRevision: "abc123" }, true)).toEqual([]);
    // A server that tells no revision cannot be judged on it.
    expect(modelReasons({ kind: "ready", served: ["m"] }, { ...S, modelRevision: "def456" }, true)).toEqual([]);
  });
});

describe("the leader flags the odd node (real redis-server)", () => {
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("publishes the majority and the outliers in <prefix>models, with an event", async () => {
    const cluster = freshCluster();
    const up = (): Decision => ({ status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: Date.now(), checkedAt: Date.now(), loadScore: 1 });
    const fleets = [
      ["n1", "a", "llama"],
      ["n2", "a", "llama"],
      ["n3", "b", "llama"],
      ["n4", "b", "opt-125m"],
    ].map(([nodeId, az, model]) => {
      const f = new Fleet({ redisUrl: redis.url, cluster, nodeId, az, intervalMs: 200, log: testLogger(), metrics: new Registry(), lease: { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 } });
      f.start((): NodeReport => ({ nodeId, az, decision: up(), gpus: 8, gpusExpected: 8, model }));
      return f;
    });
    const r = new Redis(redis.url);
    try {
      await waitFor("models published", async () => (await r.hget(`llmha:${cluster}:models`, "outliers")) === "n4=opt-125m", { timeoutMs: 15_000, everyMs: 100 });
      expect(await r.hgetall(`llmha:${cluster}:models`)).toMatchObject({ majority: "llama", outliers: "n4=opt-125m", outlierAzs: "" });
      const events = await r.xrange(`llmha:${cluster}:events`, "-", "+");
      expect(events.some(([, f]) => f.includes("model"))).toBe(true);
    } finally {
      r.disconnect();
      await Promise.all(fleets.map((f) => f.stop()));
    }
  }, 30_000);
});
