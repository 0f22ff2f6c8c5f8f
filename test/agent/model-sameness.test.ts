import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { modelSameness } from "../../agent/src/node/evaluator/model-sameness";
import { modelReasons } from "../../agent/src/node/evaluator/rules";
import { ADAPTERS } from "../../agent/src/node/sources/inference";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import type { Decision } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { startFakeInference, WRONG_MODEL_ID, type FakeInference } from "../../lab/sim/fake-inference";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { defineScripts } from "../../agent/src/fleet/redis/scripts";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";
import { freshCluster, testLogger } from "../redis/helpers";

/** Same model everywhere — what each server serves, the fleet's majority, the odd one out. */
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
      { nodeId: "b2", az: "b", model: "llama@r2", differs: ["id"] },
      { nodeId: "c1", az: "c", model: "llama-fp8@r1", differs: ["id"] },
    ]);
    expect(s.outlierAzs).toEqual(["c"]);
    expect(s.agreeing).toBe(3);
    expect(modelSameness([])).toEqual({ majority: null, majorityIdentity: null, agreeing: 0, outliers: [], outlierAzs: [] });
  });

  it("compares id@revision, dtype and context field by field: another revision or precision under one id is an outlier", () => {
    const n = (nodeId: string, az: string, revision: string | null, dtype: string | null, maxContext: number | null = 8192) => ({ nodeId, az, model: "llama", revision, dtype, maxContext });
    const s = modelSameness([
      n("a1", "a", "r1", "torch.bfloat16"),
      n("a2", "a", "r1", "bfloat16"), // TGI says torch.bfloat16, vLLM's flag bfloat16: one precision
      n("b1", "b", "r1", "bfloat16"),
      n("b2", "b", "r2", "bfloat16"), // another revision
      n("c1", "c", "r1", "float16"), // another precision
      n("c2", "c", "r1", "bfloat16", 4096), // another context length
      n("d1", "d", null, null, null), // a server that tells no revision, dtype or context: cannot be judged on them
    ]);
    expect(s.majority).toBe("llama@r1 dtype:bfloat16 ctx:8192");
    expect(s.majorityIdentity).toEqual({ id: "llama", revision: "r1", dtype: "bfloat16", maxContext: 8192 });
    expect(s.outliers).toEqual([
      { nodeId: "b2", az: "b", model: "llama@r2 dtype:bfloat16 ctx:8192", differs: ["revision"] },
      { nodeId: "c1", az: "c", model: "llama@r1 dtype:float16 ctx:8192", differs: ["dtype"] },
      { nodeId: "c2", az: "c", model: "llama@r1 dtype:bfloat16 ctx:4096", differs: ["maxContext"] },
    ]);
    expect(s.outlierAzs).toEqual(["c"]);
    expect(s.agreeing).toBe(4);
  });

  it("the majority revision is the one most nodes report, not the unknown; ties go to more AZs, then the name", () => {
    const n = (nodeId: string, az: string, revision: string | null) => ({ nodeId, az, model: "llama", revision });
    // Three servers tell no revision; of those that do, r1 and r2 are two each — r2 in more AZs.
    const s = modelSameness([n("a1", "a", null), n("a2", "a", null), n("a3", "a", null), n("b1", "b", "r1"), n("b2", "b", "r1"), n("c1", "c", "r2"), n("d1", "d", "r2")]);
    expect(s.majority).toBe("llama@r2");
    expect(s.outliers.map((o) => [o.nodeId, o.differs])).toEqual([["b1", ["revision"]], ["b2", ["revision"]]]);
    expect(s.outlierAzs).toEqual(["b"]);
    // Equal in nodes and AZs: the smaller name, so every leader picks the same one.
    expect(modelSameness([n("x", "a", "r2"), n("y", "b", "r1")]).majority).toBe("llama@r1");
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

  it("compares revision and dtype from the node hashes; the leader's metrics, hash and status view name the odd node and AZ", async () => {
    const cluster = freshCluster();
    const up = (): Decision => ({ status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: Date.now(), checkedAt: Date.now(), loadScore: 1 });
    const nodes: [string, string, string, string][] = [
      ["n1", "a", "r1", "bfloat16"],
      ["n2", "a", "r1", "torch.bfloat16"],
      ["n3", "b", "r1", "bfloat16"],
      ["n4", "b", "r2", "bfloat16"],
      ["n5", "c", "r1", "float16"],
    ];
    const fleets = nodes.map(([nodeId, az, revision, dtype]) => {
      const registry = new Registry();
      const f = new Fleet({ redisUrl: redis.url, cluster, nodeId, az, intervalMs: 200, log: testLogger(), metrics: registry, lease: { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 } });
      f.start((): NodeReport => ({ nodeId, az, decision: up(), gpus: 8, gpusExpected: 8, model: "llama", modelRevision: revision, modelDtype: dtype, maxContext: 8192 }));
      return { f, registry };
    });
    const r = new Redis(redis.url);
    try {
      const key = `llmha:${cluster}:models`;
      await waitFor("models published", async () => (await r.hget(key, "outlierCount")) === "2", { timeoutMs: 15_000, everyMs: 100 });
      expect(await r.hgetall(`llmha:${cluster}:node:n4`)).toMatchObject({ model: "llama", modelRevision: "r2", modelDtype: "bfloat16", maxContext: "8192" });
      expect(await r.hgetall(key)).toMatchObject({
        majority: "llama@r1 dtype:bfloat16 ctx:8192",
        outliers: "n4=llama@r2 dtype:bfloat16 ctx:8192,n5=llama@r1 dtype:float16 ctx:8192",
        outlierAzs: "c",
        agreeing: "3",
        differs: JSON.stringify({ n4: "revision", n5: "dtype" }),
      });
      // The leader's series (what LlmHaModelMismatch reads).
      const leader = fleets.find((x) => x.f.isLeader)!;
      const value = async (name: string, labels: Record<string, string> = {}): Promise<number | undefined> => {
        const m = await leader.registry.getSingleMetric(name)!.get();
        return m.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
      };
      await waitFor("leader metrics set", async () => (await value("llmha_model_outlier_nodes")) === 2, { timeoutMs: 5000, everyMs: 100 });
      expect(await value("llmha_model_outlier_az", { az: "c" })).toBe(1);
      expect(await value("llmha_model_outlier_az", { az: "b" })).toBe(0);
      expect(await value("llmha_model_outlier_az", { az: "a" })).toBe(0);
      expect((await leader.registry.getSingleMetric("llmha_model_majority_info")!.get()).values).toEqual([{ labels: { model: "llama@r1 dtype:bfloat16 ctx:8192" }, value: 1 }]);
      // llm-ha status reads the same hash.
      defineScripts(r);
      const v = await readFleetView(r, new RedisKeys(cluster));
      expect(v.models).toMatchObject({
        majority: "llama@r1 dtype:bfloat16 ctx:8192", agreeing: 3, outlierCount: 2, outlierAzs: ["c"], stale: false,
        outliers: [
          { nodeId: "n4", model: "llama@r2 dtype:bfloat16 ctx:8192", differs: ["revision"] },
          { nodeId: "n5", model: "llama@r1 dtype:float16 ctx:8192", differs: ["dtype"] },
        ],
      });
      expect(v.azs.flatMap((a) => a.nodes).find((x) => x.id === "n5")).toMatchObject({ model: "llama", modelRevision: "r1", modelDtype: "float16", maxContext: 8192 });
      const line = renderFleetView(v, { width: 300 }).find((l) => l.startsWith("model "));
      expect(line).toMatch(/^model {4}2 nodes differ, AZ c serves none of it {2}majority llama@r1 dtype:bfloat16 ctx:8192 \(3 nodes\): n4 llama@r2 dtype:bfloat16 ctx:8192 \(revision\), n5 llama@r1 dtype:float16 ctx:8192 \(dtype\) {2}\(refreshed \d+s ago\)$/);
      expect(v.events.find((e) => e.type === "model")?.summary).toBe(
        "model: 2 nodes serve another model than llama@r1 dtype:bfloat16 ctx:8192: n4=llama@r2 dtype:bfloat16 ctx:8192, n5=llama@r1 dtype:float16 ctx:8192; AZ c serves none of it",
      );
    } finally {
      r.disconnect();
      await Promise.all(fleets.map((x) => x.f.stop()));
    }
  }, 30_000);

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
