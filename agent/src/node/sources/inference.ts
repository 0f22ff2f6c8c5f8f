import * as http from "node:http";
import * as https from "node:https";
import type { InferenceKind } from "../../config/spec";
import { safeUrl } from "../../util/log";
import type { ModelIdentity, ModelObservation, ProbeObservation } from "./signals";

/**
 * Adapters for each inference server kind: how to ask whether it is ready, which model
 * it serves, and how to send the probe. Every answer below is what the real server says.
 */

type Fail = { kind: "refused" | "timeout" | "error"; detail: string };

/** Headers every request to the inference server carries: its API key (`Authorization`), where one is set. */
export type AuthHeaders = Readonly<Record<string, string>>;

export interface HttpAnswer {
  status: number;
  text: string;
}

/** How an adapter sends a request: `request` below, or the same over a kept-alive connection (kept-alive.ts). */
export type Send = (url: string, timeoutMs: number, body?: unknown, signal?: AbortSignal, auth?: AuthHeaders) => Promise<HttpAnswer | Fail>;

/**
 * GET/POST with a time limit; failures become observations, never exceptions. A pooled
 * keep-alive connection the server dropped (it died or restarted) fails with a socket
 * error rather than ECONNREFUSED: one retry on a fresh connection tells the two apart.
 */
export async function request(url: string, timeoutMs: number, body?: unknown, signal?: AbortSignal, auth: AuthHeaders = {}): Promise<HttpAnswer | Fail> {
  const first = await requestOnce(url, timeoutMs, body, signal, auth);
  if ("kind" in first && first.kind === "error" && !signal?.aborted) return requestOnce(url, timeoutMs, body, signal, auth);
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

function requestOnce(target: string, timeoutMs: number, body: unknown, signal: AbortSignal | undefined, auth: AuthHeaders): Promise<HttpAnswer | Fail> {
  // What a reason, /readyz, /status or a log line may show: never a password in the URL.
  const url = safeUrl(target);
  return new Promise((resolve) => {
    let u: URL;
    try {
      u = new URL(target);
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
    const headers: http.OutgoingHttpHeaders = payload === undefined ? { ...auth } : { ...auth, "content-type": "application/json", "content-length": Buffer.byteLength(payload) };
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

export function isFail(a: HttpAnswer | Fail): a is Fail {
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
  return { kind: "garbage", detail: `unexpected answer from ${safeUrl(url)}: ${JSON.stringify(text.slice(0, 80))}` };
}

/**
 * 401/403: the server wants an API key the agent did not send or sent wrong (vLLM `--api-key`
 * guards every `/v1` route). Not a server fault and not "still loading": say so plainly.
 */
function keyRefused(url: string, r: HttpAnswer): ModelObservation | null {
  if (r.status !== 401 && r.status !== 403) return null;
  return { kind: "unauthorized", detail: `${safeUrl(url)} answered ${r.status}: the inference server refused the agent's API key (LLMHA_INFERENCE_API_KEY_FILE missing or not the server's key)` };
}

/** `model`: the configured id; its identity is reported when it is served (a server may list several). */
async function openAiModels(base: string, t: number, model: string | null, auth: AuthHeaders, send: Send = request): Promise<ModelObservation> {
  const url = `${base}/v1/models`;
  const r = await send(url, t, undefined, undefined, auth);
  if (isFail(r)) return r;
  const refused = keyRefused(url, r);
  if (refused) return refused;
  if (r.status !== 200) return { kind: r.status >= 500 ? "error" : "not-ready", detail: `${safeUrl(url)} answered ${r.status}` };
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
  /** Readiness and the served model ids; `auth` goes on every request, each sent with `send` (default `request`). */
  check(base: string, model: string | null, timeoutMs: number, auth?: AuthHeaders, send?: Send): Promise<ModelObservation>;
  /** The probe: a real tiny completion of `prompt`. Null when there is no model id to ask for yet. */
  probe(base: string, model: string | null, maxTokens: number, prompt?: string): ProbeRequest | null;
}

const PROMPT = "ping";

/** What a probe's answer (`r`, after `elapsedMs`) says: a timeout, a failure, a wrong answer (`expect`), or ok. */
export function probeOutcome(req: ProbeRequest, r: HttpAnswer | Fail, elapsedMs: number, expect: RegExp | null): ProbeObservation {
  if ("kind" in r) return r.kind === "timeout" ? { kind: "timeout", elapsedMs } : { kind: "failed", detail: r.detail };
  if (r.status !== 200) return { kind: "failed", detail: `probe answered ${r.status}` };
  const answer = req.answer(r.text);
  if (answer === null) return { kind: "failed", detail: `probe answer is not a completion: ${JSON.stringify(r.text.slice(0, 80))}` };
  if (expect && !expect.test(answer)) return { kind: "wrong-answer", latencyMs: elapsedMs, detail: `probe answer ${JSON.stringify(answer.slice(0, 60))} does not match ${expect}` };
  return { kind: "ok", latencyMs: elapsedMs };
}

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
  async check(base, model, t, auth = {}, send = request) {
    const r = await send(`${base}/health`, t, undefined, undefined, auth);
    if (isFail(r)) return r;
    if (r.status === 503) return { kind: "not-ready", detail: "vLLM /health 503: engine not running" };
    if (r.status !== 200) return { kind: "error", detail: `vLLM /health answered ${r.status}` };
    return openAiModels(base, t, model, auth, send);
  },
  probe: openAiProbe,
};

const tgi: InferenceAdapter = {
  kind: "tgi",
  // TGI's router listens once the shards are ready; /health 200 ready, 503 unhealthy;
  // /info carries model_id.
  async check(base, _model, t, auth = {}, send = request) {
    const r = await send(`${base}/health`, t, undefined, undefined, auth);
    if (isFail(r)) return r;
    if (r.status === 503) return { kind: "not-ready", detail: "TGI /health 503" };
    if (r.status !== 200) return { kind: "error", detail: `TGI /health answered ${r.status}` };
    const info = await send(`${base}/info`, t, undefined, undefined, auth);
    if (isFail(info)) return info;
    const refused = keyRefused(`${base}/info`, info);
    if (refused) return refused;
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
  async check(base, model, t, auth = {}, send = request) {
    const r = await send(`${base}/v2/health/ready`, t, undefined, undefined, auth);
    if (isFail(r)) return r;
    if (r.status === 400) return (model ? await tritonLoadFailure(base, model, t, auth, send) : null) ?? { kind: "not-ready", detail: "Triton /v2/health/ready 400" };
    if (r.status !== 200) return keyRefused(`${base}/v2/health/ready`, r) ?? { kind: "error", detail: `Triton /v2/health/ready answered ${r.status}` };
    if (!model) return { kind: "ready", served: [] };
    const m = await send(`${base}/v2/models/${encodeURIComponent(model)}/ready`, t, undefined, undefined, auth);
    if (isFail(m)) return m;
    if (m.status === 200) return { kind: "ready", served: [model] };
    if (m.status === 400 || m.status === 404) return (await tritonLoadFailure(base, model, t, auth, send)) ?? { kind: "ready", served: [] };
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
async function tritonLoadFailure(base: string, model: string, t: number, auth: AuthHeaders, send: Send): Promise<ModelObservation | null> {
  const r = await send(`${base}/v2/repository/index`, t, {}, undefined, auth);
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
  async check(base, model, t, auth = {}, send = request) {
    const r = await send(`${base}/health`, t, undefined, undefined, auth);
    if (isFail(r)) return r;
    if (r.status === 503) {
      return /loading model/i.test(r.text) ? { kind: "loading", detail: "llama.cpp: Loading model" } : { kind: "not-ready", detail: "llama.cpp /health 503" };
    }
    if (r.status !== 200) return { kind: "error", detail: `llama.cpp /health answered ${r.status}` };
    return openAiModels(base, t, model, auth, send);
  },
  probe: openAiProbe,
};

const openai: InferenceAdapter = {
  kind: "openai",
  // A generic OpenAI-compatible server has no health endpoint: /v1/models is the check.
  check: (base, model, t, auth = {}, send = request) => openAiModels(base, t, model, auth, send),
  probe: openAiProbe,
};

export const ADAPTERS: Readonly<Record<InferenceKind, InferenceAdapter>> = { vllm, tgi, triton, llamacpp, openai };
