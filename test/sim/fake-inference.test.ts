import { spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { setFakeInferenceMode, WRONG_MODEL_ID, FakeInferenceAdminError } from "../../lab/sim/fake-inference";
import { failure, fakeServers, MODEL } from "./helpers";
import { waitFor } from "../../agent/src/util/net";

const { fake, track } = fakeServers();

interface Answer {
  status: number;
  text: string;
  ms: number;
}

async function call(url: string, path: string, body?: unknown, timeoutMs = 5000): Promise<Answer> {
  const t = Date.now();
  const res = await fetch(url + path, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? undefined : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, text: await res.text(), ms: Date.now() - t };
}

/**
 * How a request on a fresh connection fails (e.g. ECONNREFUSED), or "answered". A fresh connection, because
 * fetch may reuse a kept-alive socket that the server has just dropped and report a socket error instead.
 */
const completion = { model: MODEL, prompt: "Say ok", max_tokens: 2 };

describe("fake inference: vLLM", () => {
  it("answers health, models, completions, chat and metrics like vLLM", async () => {
    const f = await fake({ kind: "vllm" });
    expect(await call(f.url, "/health")).toMatchObject({ status: 200, text: "" });
    const models = JSON.parse((await call(f.url, "/v1/models")).text);
    expect(models).toMatchObject({ object: "list", data: [{ id: MODEL, object: "model", owned_by: "vllm", root: MODEL, parent: null }] });
    expect(models.data[0].max_model_len).toBeGreaterThan(0);
    const c = await call(f.url, "/v1/completions", completion);
    expect(c.status).toBe(200);
    const cj = JSON.parse(c.text);
    expect(cj).toMatchObject({ object: "text_completion", model: MODEL, usage: { completion_tokens: 2 } });
    expect(typeof cj.choices[0].text).toBe("string");
    const chat = JSON.parse((await call(f.url, "/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 1 })).text);
    expect(chat.choices[0].message.role).toBe("assistant");
    const metrics = (await call(f.url, "/metrics")).text;
    expect(metrics).toContain(`vllm:num_requests_running{engine="0",model_name="${MODEL}"} 0.0`);
    expect(metrics).toContain(`vllm:num_requests_waiting{engine="0",model_name="${MODEL}"} 0.0`);
    expect(metrics).toContain(`vllm:kv_cache_usage_perc{engine="0",model_name="${MODEL}"}`);
    expect(metrics).toContain(`vllm:generation_tokens_total{engine="0",model_name="${MODEL}"} 3.0`);
    expect(metrics).toMatch(/vllm:prompt_tokens_total\{engine="0",model_name=".*"\} \d/);
    const other = await call(f.url, "/v1/completions", { ...completion, model: "other/model" });
    expect(other.status).toBe(404);
    expect(JSON.parse(other.text).error.message).toBe("The model `other/model` does not exist.");
    expect(f.stats()).toMatchObject({ served: 2, failed: 1, inFlight: 0 });
  });

  it("refuses connections while loading or crashed, then serves again on the same port", async () => {
    const f = await fake({ kind: "vllm", mode: "loading" });
    expect(await failure(f.url, "/health")).toBe("ECONNREFUSED");
    expect((await call(f.adminUrl, "/state")).status).toBe(200);
    await f.setMode("ready");
    expect((await call(f.url, "/health")).status).toBe(200);
    await f.setMode("refused");
    expect(await failure(f.url, "/v1/models")).toBe("ECONNREFUSED");
    await f.setMode("ready");
    expect((await call(f.url, "/v1/completions", completion)).status).toBe(200);
  });

  it("loading503, error5xx, wrong-model, unloaded and garbage answer as a broken vLLM does", async () => {
    const f = await fake({ kind: "vllm" });
    await f.setMode("loading503");
    expect((await call(f.url, "/health")).status).toBe(503);
    await f.setMode("error5xx");
    expect((await call(f.url, "/health")).status).toBe(500);
    expect((await call(f.url, "/v1/completions", completion)).status).toBe(500);
    await f.setMode("wrong-model");
    expect(JSON.parse((await call(f.url, "/v1/models")).text).data[0].id).toBe(WRONG_MODEL_ID);
    expect((await call(f.url, "/v1/completions", completion)).status).toBe(404);
    await f.setMode("unloaded");
    expect((await call(f.url, "/health")).status).toBe(200);
    expect(JSON.parse((await call(f.url, "/v1/models")).text).data).toEqual([]);
    expect((await call(f.url, "/v1/completions", completion)).status).toBe(404);
    await f.setMode("garbage");
    const models = await call(f.url, "/v1/models");
    expect(models.status).toBe(200);
    expect(() => JSON.parse(models.text)).toThrow();
    const c = await call(f.url, "/v1/completions", completion);
    expect(c.status).toBe(200);
    expect(JSON.parse(c.text).choices).not.toBeInstanceOf(Array);
  });

  it("slow completions take slowMs; latencyMs sets the base", async () => {
    const f = await fake({ kind: "vllm", slowMs: 300, latencyMs: 0 });
    expect((await call(f.url, "/v1/completions", completion)).ms).toBeLessThan(250);
    await f.setMode("slow");
    expect((await call(f.url, "/v1/completions", completion)).ms).toBeGreaterThanOrEqual(290);
    await f.setMode({ mode: "ready", latencyMs: 150 });
    expect((await call(f.url, "/v1/completions", completion)).ms).toBeGreaterThanOrEqual(140);
  });

  it("wedged: health and models fine, completions held, metrics show waiting and no token progress", async () => {
    const f = await fake({ kind: "vllm" });
    await call(f.url, "/v1/completions", completion);
    await f.setMode("wedged");
    expect((await call(f.url, "/health")).status).toBe(200);
    expect((await call(f.url, "/v1/models")).status).toBe(200);
    const held = call(f.url, "/v1/completions", completion, 400).catch((err: Error) => err.name);
    await new Promise((r) => setTimeout(r, 100));
    const metrics = (await call(f.url, "/metrics")).text;
    expect(metrics).toContain(`vllm:num_requests_waiting{engine="0",model_name="${MODEL}"} 1.0`);
    expect(metrics).toContain(`vllm:generation_tokens_total{engine="0",model_name="${MODEL}"} 2.0`);
    expect(await held).toBe("TimeoutError");
    await new Promise((r) => setTimeout(r, 50));
    expect(f.stats()).toMatchObject({ inFlight: 0, waiting: 0, failed: 1, served: 1, generationTokens: 2 });
  });
});

describe("fake inference: TGI", () => {
  it("answers /health, /info, /generate and chat; refuses while loading", async () => {
    const f = await fake({ kind: "tgi" });
    expect(await call(f.url, "/health")).toMatchObject({ status: 200, text: "" });
    const info = JSON.parse((await call(f.url, "/info")).text);
    expect(info).toMatchObject({ model_id: MODEL, model_dtype: "torch.float16" });
    expect(info.max_total_tokens).toBeGreaterThan(0);
    expect(info.version).toMatch(/^2\./);
    const g = await call(f.url, "/generate", { inputs: "Say ok", parameters: { max_new_tokens: 1 } });
    expect(JSON.parse(g.text)).toEqual({ generated_text: " ok" });
    expect((await call(f.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1 })).status).toBe(200);
    await f.setMode("loading503");
    expect((await call(f.url, "/health")).status).toBe(503);
    await f.setMode("wrong-model");
    expect(JSON.parse((await call(f.url, "/info")).text).model_id).toBe(WRONG_MODEL_ID);
    await f.setMode("loading");
    expect(await failure(f.url, "/health")).toBe("ECONNREFUSED");
  });
});

describe("fake inference: Triton", () => {
  it("answers live/ready, per-model ready and metadata, and generate", async () => {
    const f = await fake({ kind: "triton" });
    const m = encodeURIComponent(MODEL);
    expect((await call(f.url, "/v2/health/live")).status).toBe(200);
    expect((await call(f.url, "/v2/health/ready")).status).toBe(200);
    expect((await call(f.url, `/v2/models/${m}/ready`)).status).toBe(200);
    expect((await call(f.url, "/v2/models/nope/ready")).status).toBe(400);
    const meta = await call(f.url, "/v2/models/nope");
    expect(meta.status).toBe(400);
    expect(JSON.parse(meta.text).error).toContain("unknown model");
    expect(JSON.parse((await call(f.url, `/v2/models/${m}`)).text).name).toBe(MODEL);
    const g = JSON.parse((await call(f.url, `/v2/models/${m}/generate`, { text_input: "Say ok", max_tokens: 1 })).text);
    expect(g).toMatchObject({ model_name: MODEL, text_output: " ok" });
  });

  it("is live but not ready while loading, and reports an unloaded model as not ready", async () => {
    const f = await fake({ kind: "triton", mode: "loading" });
    const m = encodeURIComponent(MODEL);
    expect((await call(f.url, "/v2/health/live")).status).toBe(200);
    expect((await call(f.url, "/v2/health/ready")).status).toBe(400);
    expect((await call(f.url, `/v2/models/${m}/ready`)).status).toBe(400);
    await f.setMode("unloaded");
    expect((await call(f.url, `/v2/models/${m}/ready`)).status).toBe(400);
    expect((await call(f.url, `/v2/models/${m}/generate`, { text_input: "x", max_tokens: 1 })).status).toBe(400);
  });
});

describe("fake inference: llama.cpp", () => {
  it("answers 503 Loading model while loading, then ok, models and both completion APIs", async () => {
    const f = await fake({ kind: "llamacpp", mode: "loading" });
    const loading = await call(f.url, "/health");
    expect(loading.status).toBe(503);
    expect(JSON.parse(loading.text)).toEqual({ error: { code: 503, message: "Loading model", type: "unavailable_error" } });
    await f.setMode("ready");
    expect(JSON.parse((await call(f.url, "/health")).text)).toEqual({ status: "ok" });
    expect(JSON.parse((await call(f.url, "/v1/models")).text).data[0].id).toBe(MODEL);
    expect(JSON.parse((await call(f.url, "/v1/completions", completion)).text).choices[0].text).toBe(" ok ok");
    const native = JSON.parse((await call(f.url, "/completion", { prompt: "x", n_predict: 1 })).text);
    expect(native).toMatchObject({ content: " ok", tokens_predicted: 1 });
    expect((await call(f.url, "/metrics")).text).toContain("llamacpp:tokens_predicted_total 3.0");
  });
});

describe("fake inference: generic OpenAI", () => {
  it("has no /health, answers models and completions, refuses while loading", async () => {
    const f = await fake({ kind: "openai" });
    expect((await call(f.url, "/health")).status).toBe(404);
    expect(JSON.parse((await call(f.url, "/v1/models")).text).data[0].id).toBe(MODEL);
    expect((await call(f.url, "/v1/completions", completion)).status).toBe(200);
    await f.setMode("loading");
    expect(await failure(f.url, "/v1/models")).toBe("ECONNREFUSED");
  });
});

describe("fake inference admin API", () => {
  it("changes mode over HTTP, reports state and stats, and refuses bad changes", async () => {
    const f = await fake({ kind: "vllm" });
    expect(await failure(f.url, "/mode")).toBe("answered");
    expect((await call(f.url, "/mode", { mode: "refused" })).status).toBe(404);
    const state = await setFakeInferenceMode(f.adminUrl, { mode: "slow", latencyMs: 7, model: "x/y" });
    expect(state).toMatchObject({ mode: "slow", latencyMs: 7, model: "x/y", kind: "vllm", port: f.port, listening: true });
    expect(JSON.parse((await call(f.adminUrl, "/state")).text).mode).toBe("slow");
    expect(JSON.parse((await call(f.adminUrl, "/stats")).text)).toMatchObject({ served: 0, failed: 0, inFlight: 0 });
    await expect(setFakeInferenceMode(f.adminUrl, { mode: "melted" as never })).rejects.toBeInstanceOf(FakeInferenceAdminError);
    expect((await call(f.adminUrl, "/mode", { latencyMs: -1 })).status).toBe(400);
  });
});

describe("fake inference as a process", () => {
  it("prints its ready line, serves, switches mode through the admin port, and dies on SIGKILL", async () => {
    const entry = resolve(__dirname, "../../lab/sim/fake-inference.ts");
    const child = spawn(process.execPath, ["--import", "tsx", entry, "--port", "0", "--kind", "vllm", "--model", MODEL, "--mode", "ready"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    track(child);
    const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
    const ready = JSON.parse(line) as { ready: boolean; port: number; adminPort: number };
    expect(ready.ready).toBe(true);
    const url = `http://127.0.0.1:${ready.port}`;
    expect((await call(url, "/health")).status).toBe(200);
    await setFakeInferenceMode(`http://127.0.0.1:${ready.adminPort}`, { mode: "loading503" });
    expect((await call(url, "/health")).status).toBe(503);
    const exited = once(child, "exit");
    process.kill(child.pid!, "SIGKILL");
    expect((await exited)[1]).toBe("SIGKILL");
    expect(await failure(url, "/health")).toBe("ECONNREFUSED");
  });

  it("exits 2 with a message on a bad argument", async () => {
    const entry = resolve(__dirname, "../../lab/sim/fake-inference.ts");
    const child = spawn(process.execPath, ["--import", "tsx", entry, "--kind", "sglang"], { stdio: ["ignore", "pipe", "pipe"] });
    track(child);
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const [code] = (await once(child, "exit")) as [number];
    expect(code).toBe(2);
    expect(err).toContain("--kind must be one of");
  });
});

describe("fake inference: progress, queue, wedge, load failure", () => {
  const tokens = async (url: string): Promise<number> => Number(/vllm:generation_tokens_total\{[^}]*\} ([\d.]+)/.exec((await call(url, "/metrics")).text)![1]);

  it("counts tokens while a completion generates, and a wedge freezes the ones already running", async () => {
    const f = await fake({ kind: "vllm", tokenMs: 20 });
    const long = call(f.url, "/v1/completions", { ...completion, max_tokens: 100 }, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const moving = await tokens(f.url);
    expect(moving).toBeGreaterThan(5);
    expect(moving).toBeLessThan(100);
    await f.setMode("wedged");
    const frozen = await tokens(f.url);
    await new Promise((r) => setTimeout(r, 300));
    expect(await tokens(f.url)).toBe(frozen);
    await f.setMode("ready");
    expect((await long).status).toBe(200);
    expect(await tokens(f.url)).toBe(100);
  });

  it("maxRunning queues the rest (waiting) while the batch's tokens flow; held wedged requests run once it ends", async () => {
    const f = await fake({ kind: "vllm", tokenMs: 10, maxRunning: 2 });
    // A batch runs 0.5 s (50 tokens): all six arrive within it on a loaded machine; waited for, not slept on.
    const all = Array.from({ length: 6 }, () => call(f.url, "/v1/completions", { ...completion, max_tokens: 50 }, 20_000));
    await waitFor("six in, four waiting", () => f.stats().inFlight === 6, { timeoutMs: 5_000, everyMs: 5 });
    expect(f.stats()).toMatchObject({ inFlight: 6, waiting: 4 });
    expect((await Promise.all(all)).every((a) => a.status === 200)).toBe(true);
    expect(f.stats()).toMatchObject({ inFlight: 0, waiting: 0, served: 6 });
    await f.setMode("wedged");
    const held = call(f.url, "/v1/completions", completion, 10_000);
    await waitFor("the request held", () => f.stats().inFlight === 1, { timeoutMs: 5_000, everyMs: 5 });
    expect(f.stats().waiting).toBe(1);
    await f.setMode("ready");
    expect((await held).status).toBe(200);
  });

  it("failed-load: closed port (vLLM), live but UNAVAILABLE (Triton); corrupt: answers garbage tokens", async () => {
    const v = await fake({ kind: "vllm", mode: "failed-load" });
    expect(await failure(v.url, "/health")).toBe("ECONNREFUSED");
    const t = await fake({ kind: "triton", mode: "failed-load" });
    expect((await call(t.url, "/v2/health/live")).status).toBe(200);
    expect((await call(t.url, "/v2/health/ready")).status).toBe(400);
    const index = JSON.parse((await call(t.url, "/v2/repository/index", {})).text) as { state: string; reason: string }[];
    expect(index[0]).toMatchObject({ state: "UNAVAILABLE" });
    const c = await fake({ kind: "vllm", mode: "corrupt" });
    const body = JSON.parse((await call(c.url, "/v1/completions", completion)).text) as { choices: { text: string }[] };
    expect(body.choices[0].text).toBe("!!");
  });
});
