import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INFERENCE_KINDS, type InferenceKind } from "../../agent/src/config/spec";
import { parseVllmMetrics, promSum } from "../../agent/src/node/sources/engine-metrics";
import { ADAPTERS, request, servedModels } from "../../agent/src/node/sources/inference";
import { startFakeInference, type FakeInference, type FakeInferenceMode } from "../../lab/sim/fake-inference";

const MODEL = "llm-ha/test-model";
const servers = new Map<InferenceKind, FakeInference>();

beforeAll(async () => {
  for (const kind of INFERENCE_KINDS) servers.set(kind, await startFakeInference({ kind, model: MODEL, mode: "ready" }));
});
afterAll(async () => {
  await Promise.all([...servers.values()].map((s) => s.close()));
});

async function check(kind: InferenceKind, mode: FakeInferenceMode): Promise<string> {
  const s = servers.get(kind)!;
  await s.setMode(mode);
  const obs = await ADAPTERS[kind].check(s.url, MODEL, 1000);
  if (obs.kind === "ready") return obs.served.includes(MODEL) ? "ready" : "wrong-model";
  return obs.kind;
}

// What each server kind really answers, as the adapters must read it.
const EXPECTED: Record<InferenceKind, Partial<Record<FakeInferenceMode, string>>> = {
  vllm: { ready: "ready", loading: "refused", refused: "refused", loading503: "not-ready", "wrong-model": "wrong-model", unloaded: "wrong-model", garbage: "garbage", error5xx: "error" },
  tgi: { ready: "ready", loading: "refused", loading503: "not-ready", "wrong-model": "wrong-model", garbage: "garbage" },
  triton: { ready: "ready", loading: "not-ready", loading503: "not-ready", unloaded: "wrong-model" },
  llamacpp: { ready: "ready", loading: "loading", "wrong-model": "wrong-model", garbage: "garbage" },
  openai: { ready: "ready", loading: "refused", "wrong-model": "wrong-model", garbage: "garbage" },
};

describe("model adapters against each server kind's real answers", () => {
  for (const kind of INFERENCE_KINDS) {
    for (const [mode, want] of Object.entries(EXPECTED[kind])) {
      it(`${kind} in mode ${mode} reads as ${want}`, async () => {
        expect(await check(kind, mode as FakeInferenceMode)).toBe(want);
        await servers.get(kind)!.setMode("ready");
      });
    }
  }

  it.each(INFERENCE_KINDS)("%s: the probe is a real completion the server answers", async (kind) => {
    const s = servers.get(kind)!;
    await s.setMode("ready");
    const req = ADAPTERS[kind].probe(s.url, MODEL, 1)!;
    const r = await request(req.url, 2000, req.body);
    expect("status" in r && r.status).toBe(200);
    expect("text" in r ? req.answer(r.text) : null).toBe(" ok");
  });

  it("a wedged engine answers /health but the probe never finishes", async () => {
    const s = servers.get("vllm")!;
    await s.setMode("wedged");
    expect(await check("vllm", "wedged")).toBe("ready");
    const req = ADAPTERS.vllm.probe(s.url, MODEL, 1)!;
    const r = await request(req.url, 300, req.body);
    expect(r).toMatchObject({ kind: "timeout" });
    await s.setMode("ready");
  });

  it("reads vLLM engine metrics for the load score and progress", async () => {
    const s = servers.get("vllm")!;
    const r = await request(`${s.url}/metrics`, 1000);
    const e = "text" in r ? parseVllmMetrics(r.text) : null;
    expect(e).not.toBeNull();
    expect(e!.tokensTotal).toBeGreaterThan(0);
  });

  it("parses Prometheus text and OpenAI model lists defensively", () => {
    const text = 'vllm:num_requests_waiting{model_name="a"} 2\nvllm:num_requests_waiting{model_name="b"} 3\n# HELP x\nvllm:num_requests_waiting_other 9\n';
    expect(promSum(text, "vllm:num_requests_waiting")).toBe(5);
    expect(promSum(text, "vllm:absent")).toBeNull();
    expect(parseVllmMetrics("garbage")).toBeNull();
    expect(servedModels('{"data":[{"id":"a"},{"id":"b"}]}')).toEqual(["a", "b"]);
    expect(servedModels('{"data":[{"name":"a"}]}')).toBeNull();
    expect(servedModels("<html>")).toBeNull();
  });
});
