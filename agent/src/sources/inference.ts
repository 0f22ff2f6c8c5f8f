import * as http from "node:http";
import * as https from "node:https";
import type { InferenceKind } from "../config/spec";
import type { EngineObservation, ModelIdentity, ModelObservation } from "./signals";

/**
 * Adapters for each inference server kind: how to ask whether it is ready, which model
 * it serves, and how to send the probe. Every answer below is what the real server says.
 */

type Fail = { kind: "refused" | "timeout" | "error"; detail: string };

interface HttpAnswer {
  status: number;
  text: string;
}

/**
 * GET/POST with a time limit; failures become observations, never exceptions. A pooled
 * keep-alive connection the server dropped (it died or restarted) fails with a socket
 * error rather than ECONNREFUSED: one retry on a fresh connection tells the two apart.
 */
export async function request(url: string, timeoutMs: number, body?: unknown, signal?: AbortSignal): Promise<HttpAnswer | Fail> {
  const first = await requestOnce(url, timeoutMs, body, signal);
  if ("kind" in first && first.kind === "error" && !signal?.aborted) return requestOnce(url, timeoutMs, body, signal);
  return first;
}

/**
 * Pooled keep-alive connections through `node:http` rather than `fetch`: the agent sends a
 * few requests every period for the life of the node, and undici's machinery costs more
 * CPU and memory per request than this does (agent overhead budget).
 */
const POOLS = {
  "http:": new http.Agent({ keepAlive: true, maxSockets: 8, maxFreeSockets: 4 }),
  "https:": new https.Agent({ keepAlive: true, maxSockets: 8, maxFreeSockets: 4 }),
} as const;

function requestOnce(url: string, timeoutMs: number, body?: unknown, signal?: AbortSignal): Promise<HttpAnswer | Fail> {
  return new Promise((resolve) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      resolve({ kind: "error", detail: `${url}: not a URL` });
      return;
    }
    const pool = u.protocol === "https:" ? POOLS["https:"] : POOLS["http:"];
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let req: http.ClientRequest | null = null;
    let settled = false;
    const finish = (a: HttpAnswer | Fail): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(a);
    };
    const giveUp = (): void => {
      finish({ kind: "timeout", detail: `no answer from ${url} within ${timeoutMs} ms` });
      req?.destroy();
    };
    const onAbort = (): void => giveUp();
    const timer = setTimeout(giveUp, timeoutMs);
    if (signal?.aborted) return giveUp();
    signal?.addEventListener("abort", onAbort, { once: true });
    const headers: http.OutgoingHttpHeaders = payload === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(payload) };
    req = (u.protocol === "https:" ? https : http).request(u, { method: payload === undefined ? "GET" : "POST", agent: pool, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => finish({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (e: NodeJS.ErrnoException) => finish({ kind: "error", detail: `${url}: ${e.code ?? e.message}` }));
    });
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ECONNREFUSED") finish({ kind: "refused", detail: `connection refused: ${url}` });
      else finish({ kind: "error", detail: `${url}: ${e.code ?? e.message}` });
    });
    req.end(payload);
  });
}

function isFail(a: HttpAnswer | Fail): a is Fail {
  return "kind" in a;
}

function json(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * What an OpenAI model list says about the model: vLLM adds `root` (the weights' path or
 * repository) and `max_model_len`; llama.cpp adds `meta.n_ctx_train`.
 */
export function identityFromModels(text: string, id: string): ModelIdentity | undefined {
  const body = json(text);
  if (!isRecord(body) || !Array.isArray(body.data)) return undefined;
  const m = body.data.find((x) => isRecord(x) && x.id === id);
  if (!isRecord(m)) return undefined;
  const meta = isRecord(m.meta) ? m.meta : {};
  const ctx = typeof m.max_model_len === "number" ? m.max_model_len : typeof meta.n_ctx_train === "number" ? meta.n_ctx_train : null;
  const root = typeof m.root === "string" && m.root !== id ? m.root : null;
  return { id, revision: root, dtype: null, maxContext: ctx };
}

/** OpenAI `GET /v1/models` → ids, or null when the shape is wrong. */
export function servedModels(text: string): string[] | null {
  const body = json(text);
  if (!isRecord(body) || !Array.isArray(body.data)) return null;
  const ids = body.data.map((m) => (isRecord(m) && typeof m.id === "string" ? m.id : null));
  return ids.every((x): x is string => x !== null) ? ids : null;
}

function garbage(url: string, text: string): ModelObservation {
  return { kind: "garbage", detail: `unexpected answer from ${url}: ${JSON.stringify(text.slice(0, 80))}` };
}

/** `model`: the configured id; its identity is reported when it is served (a server may list several). */
async function openAiModels(base: string, t: number, model: string | null = null): Promise<ModelObservation> {
  const url = `${base}/v1/models`;
  const r = await request(url, t);
  if (isFail(r)) return r;
  if (r.status !== 200) return { kind: r.status >= 500 ? "error" : "not-ready", detail: `${url} answered ${r.status}` };
  const ids = servedModels(r.text);
  if (ids === null) return garbage(url, r.text);
  const which = model !== null && ids.includes(model) ? model : ids[0];
  const identity = which !== undefined ? identityFromModels(r.text, which) : undefined;
  return identity ? { kind: "ready", served: ids, identity } : { kind: "ready", served: ids };
}

export interface ProbeRequest {
  url: string;
  body: unknown;
  /** The generated text when the answer has the shape of a completion, else null. */
  answer(text: string): string | null;
}

export interface InferenceAdapter {
  readonly kind: InferenceKind;
  /** Readiness and the served model ids. */
  check(base: string, model: string | null, timeoutMs: number): Promise<ModelObservation>;
  /** The probe: a real tiny completion of `prompt`. Null when there is no model id to ask for yet. */
  probe(base: string, model: string | null, maxTokens: number, prompt?: string): ProbeRequest | null;
}

const PROMPT = "ping";

function openAiProbe(base: string, model: string | null, maxTokens: number, prompt = PROMPT): ProbeRequest | null {
  if (!model) return null;
  return {
    url: `${base}/v1/completions`,
    body: { model, prompt, max_tokens: maxTokens, temperature: 0, stream: false },
    answer: (text) => {
      const b = json(text);
      if (!isRecord(b) || !Array.isArray(b.choices) || b.choices.length === 0) return null;
      const c: unknown = b.choices[0];
      return isRecord(c) && typeof c.text === "string" ? c.text : "";
    },
  };
}

const vllm: InferenceAdapter = {
  kind: "vllm",
  // vLLM does not listen until the model is loaded; /health is 200 with an empty body,
  // 503 once the engine is dead. /v1/models lists the served ids.
  async check(base, model, t) {
    const r = await request(`${base}/health`, t);
    if (isFail(r)) return r;
    if (r.status === 503) return { kind: "not-ready", detail: "vLLM /health 503: engine not running" };
    if (r.status !== 200) return { kind: "error", detail: `vLLM /health answered ${r.status}` };
    return openAiModels(base, t, model);
  },
  probe: openAiProbe,
};

const tgi: InferenceAdapter = {
  kind: "tgi",
  // TGI's router listens once the shards are ready; /health 200 ready, 503 unhealthy;
  // /info carries model_id.
  async check(base, _model, t) {
    const r = await request(`${base}/health`, t);
    if (isFail(r)) return r;
    if (r.status === 503) return { kind: "not-ready", detail: "TGI /health 503" };
    if (r.status !== 200) return { kind: "error", detail: `TGI /health answered ${r.status}` };
    const info = await request(`${base}/info`, t);
    if (isFail(info)) return info;
    const b = json(info.text);
    if (info.status !== 200 || !isRecord(b) || typeof b.model_id !== "string") return garbage(`${base}/info`, info.text);
    const identity: ModelIdentity = {
      id: b.model_id,
      revision: typeof b.model_sha === "string" ? b.model_sha : null,
      dtype: typeof b.model_dtype === "string" ? b.model_dtype : null,
      maxContext: typeof b.max_total_tokens === "number" ? b.max_total_tokens : null,
    };
    return { kind: "ready", served: [b.model_id], identity };
  },
  probe(base, _model, maxTokens, prompt = PROMPT) {
    return {
      url: `${base}/generate`,
      body: { inputs: prompt, parameters: { max_new_tokens: maxTokens, do_sample: false } },
      answer: (text) => {
        const b = json(text);
        return isRecord(b) && typeof b.generated_text === "string" ? b.generated_text : null;
      },
    };
  },
};

const triton: InferenceAdapter = {
  kind: "triton",
  // Triton: /v2/health/ready 200 or 400; /v2/models/{m}/ready 200 or 400 (loading, or not in the repository).
  async check(base, model, t) {
    const r = await request(`${base}/v2/health/ready`, t);
    if (isFail(r)) return r;
    if (r.status === 400) return (model ? await tritonLoadFailure(base, model, t) : null) ?? { kind: "not-ready", detail: "Triton /v2/health/ready 400" };
    if (r.status !== 200) return { kind: "error", detail: `Triton /v2/health/ready answered ${r.status}` };
    if (!model) return { kind: "ready", served: [] };
    const m = await request(`${base}/v2/models/${encodeURIComponent(model)}/ready`, t);
    if (isFail(m)) return m;
    if (m.status === 200) return { kind: "ready", served: [model] };
    if (m.status === 400 || m.status === 404) return (await tritonLoadFailure(base, model, t)) ?? { kind: "ready", served: [] };
    return { kind: "error", detail: `Triton model ready answered ${m.status}` };
  },
  probe(base, model, maxTokens, prompt = PROMPT) {
    if (!model) return null;
    return {
      url: `${base}/v2/models/${encodeURIComponent(model)}/generate`,
      body: { text_input: prompt, max_tokens: maxTokens, temperature: 0 },
      answer: (text) => {
        const b = json(text);
        return isRecord(b) && typeof b.text_output === "string" ? b.text_output : null;
      },
    };
  },
};

/**
 * Triton's repository index says why a model is not ready: `UNAVAILABLE` with the load error
 * (corrupted weights, a bad engine file) is a failed load, not a model still loading.
 */
async function tritonLoadFailure(base: string, model: string, t: number): Promise<ModelObservation | null> {
  const r = await request(`${base}/v2/repository/index`, t, {});
  if (isFail(r) || r.status !== 200) return null;
  const list = json(r.text);
  if (!Array.isArray(list)) return null;
  const entry: unknown = list.find((x) => isRecord(x) && x.name === model);
  if (!isRecord(entry) || entry.state !== "UNAVAILABLE") return null;
  return { kind: "load-failed", detail: `Triton: ${model} UNAVAILABLE: ${typeof entry.reason === "string" ? entry.reason.slice(0, 200) : "no reason given"}` };
}

const llamacpp: InferenceAdapter = {
  kind: "llamacpp",
  // llama.cpp server listens at once and answers /health 503
  // {"error":{"code":503,"message":"Loading model",...}} until the model is in memory.
  async check(base, model, t) {
    const r = await request(`${base}/health`, t);
    if (isFail(r)) return r;
    if (r.status === 503) {
      return /loading model/i.test(r.text) ? { kind: "loading", detail: "llama.cpp: Loading model" } : { kind: "not-ready", detail: "llama.cpp /health 503" };
    }
    if (r.status !== 200) return { kind: "error", detail: `llama.cpp /health answered ${r.status}` };
    return openAiModels(base, t, model);
  },
  probe: openAiProbe,
};

const openai: InferenceAdapter = {
  kind: "openai",
  // A generic OpenAI-compatible server has no health endpoint: /v1/models is the check.
  check: (base, model, t) => openAiModels(base, t, model),
  probe: openAiProbe,
};

export const ADAPTERS: Readonly<Record<InferenceKind, InferenceAdapter>> = { vllm, tgi, triton, llamacpp, openai };

/**
 * Sums every series of a metric in Prometheus text; null when absent. `labels` keeps only
 * the series whose labels include each `name="value"` given.
 */
export function promSum(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | null {
  let total: number | null = null;
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (want.length) {
      const close = rest.indexOf("}");
      const set = rest[0] === "{" && close > 0 ? rest.slice(1, close) : "";
      if (!want.every((w) => set.split(",").some((p) => p.trim() === w))) continue;
    }
    const value = Number(rest.slice(rest.lastIndexOf(rest[0] === "{" ? "}" : " ") + 1).trim().split(/\s+/)[0]);
    if (Number.isFinite(value)) total = (total ?? 0) + value;
  }
  return total;
}

/**
 * One server family's Prometheus series: what waits, what runs, and the counters that move
 * whenever the engine makes progress (tokens, decode steps, iterations). Busy ≠ dead rests
 * on the progress counters: they move every engine step, whatever the queue holds.
 */
export interface EngineFamily {
  readonly name: string;
  readonly waiting: readonly string[];
  readonly running: readonly string[];
  /** Progress counters: their sum must move while the engine works. */
  readonly progress: readonly (string | readonly [string, Readonly<Record<string, string>>])[];
  readonly kv?: readonly string[];
}

/** The families the agent reads, tried in this order; each server exports exactly one. */
export const ENGINE_FAMILIES: readonly EngineFamily[] = [
  {
    name: "vllm",
    waiting: ["vllm:num_requests_waiting"],
    running: ["vllm:num_requests_running"],
    progress: ["vllm:generation_tokens_total", "vllm:prompt_tokens_total"],
    kv: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
  },
  {
    // TGI: the queue, the batch, and one count per forward pass (prefill and decode).
    name: "tgi",
    waiting: ["tgi_queue_size"],
    running: ["tgi_batch_current_size"],
    progress: ["tgi_batch_inference_count", "tgi_request_generated_tokens_sum"],
  },
  {
    // Triton: pending requests per model; TensorRT-LLM's iteration counter moves every engine step,
    // executions count finished batches for other backends.
    name: "triton",
    waiting: ["nv_inference_pending_request_count"],
    running: [],
    progress: [["nv_trt_llm_general_metrics", { general_type: "iteration_counter" }], "nv_inference_exec_count"],
  },
  {
    // llama.cpp (`--metrics`): deferred requests wait for a slot; decode calls move every step.
    name: "llamacpp",
    waiting: ["llamacpp:requests_deferred"],
    running: ["llamacpp:requests_processing"],
    progress: ["llamacpp:n_decode_total", "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_total"],
  },
  {
    // SGLang, the usual "generic OpenAI-compatible" server that exports metrics.
    name: "sglang",
    waiting: ["sglang:num_queue_reqs"],
    running: ["sglang:num_running_reqs"],
    progress: ["sglang:generation_tokens_total", "sglang:prompt_tokens_total"],
    kv: ["sglang:token_usage"],
  },
];

function firstOf(text: string, names: readonly string[]): number | null {
  for (const n of names) {
    const v = promSum(text, n);
    if (v !== null) return v;
  }
  return null;
}

/**
 * Engine counters from a server's Prometheus text, whichever family it is; null when no
 * family's queue and progress series are there (metrics off, or an unknown server).
 */
export function parseEngineMetrics(text: string): EngineObservation | null {
  for (const f of ENGINE_FAMILIES) {
    const waiting = firstOf(text, f.waiting);
    if (waiting === null) continue;
    let progress: number | null = null;
    for (const p of f.progress) {
      const v = typeof p === "string" ? promSum(text, p) : promSum(text, p[0], p[1]);
      if (v !== null) progress = (progress ?? 0) + v;
    }
    if (progress === null) continue;
    return { family: f.name, running: firstOf(text, f.running) ?? 0, waiting, kvCacheUsage: f.kv ? firstOf(text, f.kv) : null, tokensTotal: progress };
  }
  return null;
}

/** vLLM engine counters from its Prometheus text; null when they are missing. */
export function parseVllmMetrics(text: string): EngineObservation | null {
  const e = parseEngineMetrics(text);
  return e?.family === "vllm" ? e : null;
}

/**
 * Where each kind's metrics are, by default: on the inference port (`/metrics`), except Triton,
 * whose metrics port is 8002; a generic OpenAI-compatible server has none unless configured.
 */
export function defaultMetricsUrl(kind: InferenceKind, inferenceUrl: string): string | null {
  if (kind === "openai") return null;
  const u = new URL(inferenceUrl);
  if (kind === "triton") u.port = "8002";
  return `${u.origin}${u.pathname.replace(/\/+$/, "")}/metrics`;
}

/** Reads the engine metrics at `url`; null when they cannot be read or hold no known family. */
export async function readEngine(url: string, timeoutMs: number): Promise<EngineObservation | null> {
  const r = await request(url, timeoutMs);
  if (isFail(r) || r.status !== 200) return null;
  return parseEngineMetrics(r.text);
}
