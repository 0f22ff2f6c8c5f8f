import * as http from "node:http";
import * as https from "node:https";
import type { InferenceKind } from "../config/spec";
import type { EngineObservation, ModelObservation } from "./signals";

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

async function openAiModels(base: string, t: number): Promise<ModelObservation> {
  const url = `${base}/v1/models`;
  const r = await request(url, t);
  if (isFail(r)) return r;
  if (r.status !== 200) return { kind: r.status >= 500 ? "error" : "not-ready", detail: `${url} answered ${r.status}` };
  const ids = servedModels(r.text);
  return ids === null ? garbage(url, r.text) : { kind: "ready", served: ids };
}

export interface ProbeRequest {
  url: string;
  body: unknown;
  /** True when the answer has the shape of a completion. */
  valid(text: string): boolean;
}

export interface InferenceAdapter {
  readonly kind: InferenceKind;
  /** Readiness and the served model ids. */
  check(base: string, model: string | null, timeoutMs: number): Promise<ModelObservation>;
  /** The probe: a real tiny completion. Null when there is no model id to ask for yet. */
  probe(base: string, model: string | null, maxTokens: number): ProbeRequest | null;
  /** Prometheus metrics path with engine counters, or null. */
  readonly metricsPath: string | null;
}

const PROMPT = "ping";

function openAiProbe(base: string, model: string | null, maxTokens: number): ProbeRequest | null {
  if (!model) return null;
  return {
    url: `${base}/v1/completions`,
    body: { model, prompt: PROMPT, max_tokens: maxTokens, temperature: 0, stream: false },
    valid: (text) => {
      const b = json(text);
      return isRecord(b) && Array.isArray(b.choices) && b.choices.length > 0;
    },
  };
}

const vllm: InferenceAdapter = {
  kind: "vllm",
  metricsPath: "/metrics",
  // vLLM does not listen until the model is loaded; /health is 200 with an empty body,
  // 503 once the engine is dead. /v1/models lists the served ids.
  async check(base, _model, t) {
    const r = await request(`${base}/health`, t);
    if (isFail(r)) return r;
    if (r.status === 503) return { kind: "not-ready", detail: "vLLM /health 503: engine not running" };
    if (r.status !== 200) return { kind: "error", detail: `vLLM /health answered ${r.status}` };
    return openAiModels(base, t);
  },
  probe: openAiProbe,
};

const tgi: InferenceAdapter = {
  kind: "tgi",
  metricsPath: null,
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
    return { kind: "ready", served: [b.model_id] };
  },
  probe(base, _model, maxTokens) {
    return {
      url: `${base}/generate`,
      body: { inputs: PROMPT, parameters: { max_new_tokens: maxTokens } },
      valid: (text) => {
        const b = json(text);
        return isRecord(b) && typeof b.generated_text === "string";
      },
    };
  },
};

const triton: InferenceAdapter = {
  kind: "triton",
  metricsPath: null,
  // Triton: /v2/health/ready 200 or 400; /v2/models/{m}/ready 200 or 400 (loading, or not in the repository).
  async check(base, model, t) {
    const r = await request(`${base}/v2/health/ready`, t);
    if (isFail(r)) return r;
    if (r.status === 400) return { kind: "not-ready", detail: "Triton /v2/health/ready 400" };
    if (r.status !== 200) return { kind: "error", detail: `Triton /v2/health/ready answered ${r.status}` };
    if (!model) return { kind: "ready", served: [] };
    const m = await request(`${base}/v2/models/${encodeURIComponent(model)}/ready`, t);
    if (isFail(m)) return m;
    if (m.status === 200) return { kind: "ready", served: [model] };
    if (m.status === 400 || m.status === 404) return { kind: "ready", served: [] };
    return { kind: "error", detail: `Triton model ready answered ${m.status}` };
  },
  probe(base, model, maxTokens) {
    if (!model) return null;
    return {
      url: `${base}/v2/models/${encodeURIComponent(model)}/generate`,
      body: { text_input: PROMPT, max_tokens: maxTokens },
      valid: (text) => {
        const b = json(text);
        return isRecord(b) && typeof b.text_output === "string";
      },
    };
  },
};

const llamacpp: InferenceAdapter = {
  kind: "llamacpp",
  metricsPath: null,
  // llama.cpp server listens at once and answers /health 503
  // {"error":{"code":503,"message":"Loading model",...}} until the model is in memory.
  async check(base, _model, t) {
    const r = await request(`${base}/health`, t);
    if (isFail(r)) return r;
    if (r.status === 503) {
      return /loading model/i.test(r.text) ? { kind: "loading", detail: "llama.cpp: Loading model" } : { kind: "not-ready", detail: "llama.cpp /health 503" };
    }
    if (r.status !== 200) return { kind: "error", detail: `llama.cpp /health answered ${r.status}` };
    return openAiModels(base, t);
  },
  probe: openAiProbe,
};

const openai: InferenceAdapter = {
  kind: "openai",
  metricsPath: null,
  // A generic OpenAI-compatible server has no health endpoint: /v1/models is the check.
  check: (base, _model, t) => openAiModels(base, t),
  probe: openAiProbe,
};

export const ADAPTERS: Readonly<Record<InferenceKind, InferenceAdapter>> = { vllm, tgi, triton, llamacpp, openai };

/** Sums every series of a metric in Prometheus text (labels ignored); null when absent. */
export function promSum(text: string, name: string): number | null {
  let total: number | null = null;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    const value = Number(rest.slice(rest.lastIndexOf(rest[0] === "{" ? "}" : " ") + 1).trim().split(/\s+/)[0]);
    if (Number.isFinite(value)) total = (total ?? 0) + value;
  }
  return total;
}

/** vLLM engine counters from its Prometheus text; null when they are missing. */
export function parseVllmMetrics(text: string): EngineObservation | null {
  const running = promSum(text, "vllm:num_requests_running");
  const waiting = promSum(text, "vllm:num_requests_waiting");
  if (running === null || waiting === null) return null;
  const kv = promSum(text, "vllm:kv_cache_usage_perc") ?? promSum(text, "vllm:gpu_cache_usage_perc");
  const tokens = (promSum(text, "vllm:generation_tokens_total") ?? 0) + (promSum(text, "vllm:prompt_tokens_total") ?? 0);
  return { running, waiting, kvCacheUsage: kv, tokensTotal: tokens };
}

/** Reads the engine metrics; null when the kind has none or they cannot be read. */
export async function readEngine(adapter: InferenceAdapter, base: string, timeoutMs: number): Promise<EngineObservation | null> {
  if (!adapter.metricsPath) return null;
  const r = await request(`${base}${adapter.metricsPath}`, timeoutMs);
  if (isFail(r) || r.status !== 200) return null;
  return parseVllmMetrics(r.text);
}
