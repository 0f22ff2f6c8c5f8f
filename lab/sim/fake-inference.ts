import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { freePort, sleep } from "../../agent/src/util/net";

/**
 * Stand-in for an inference server (vLLM, TGI, Triton, llama.cpp, generic OpenAI) on machines without GPUs.
 * It answers each kind's readiness, model, completion and metrics endpoints with the real shapes and status
 * codes, and switches between fault modes at run time through an admin API on a separate port, so that a
 * fault never depends on the inference port answering.
 */

import { INFERENCE_KINDS, type InferenceKind } from "../../agent/src/config/spec";

export { INFERENCE_KINDS, type InferenceKind };

export const FAKE_INFERENCE_MODES = [
  "ready",
  "loading",
  "refused",
  "loading503",
  "wrong-model",
  "slow",
  "wedged",
  "error5xx",
  "garbage",
  "unloaded",
] as const;
/**
 * - `ready`: everything answers.
 * - `loading`: vLLM, TGI and generic servers do not listen yet (connection refused); llama.cpp answers 503
 *   "Loading model"; Triton is live but not ready (400).
 * - `refused`: the inference port is closed (a crashed process); the admin port stays up.
 * - `loading503`: listening, but health answers the kind's not-ready code.
 * - `wrong-model`: serves `WRONG_MODEL_ID` instead of the configured model.
 * - `slow`: completions take `slowMs`.
 * - `wedged`: health and model list fine, completions never answer; metrics show them waiting, no token progress.
 * - `error5xx`: completions answer 500 (and vLLM's `/health` too).
 * - `garbage`: JSON endpoints answer 200 with malformed JSON or the wrong shape.
 * - `unloaded`: the model is gone from the model list; completions answer "model not found".
 */
export type FakeInferenceMode = (typeof FAKE_INFERENCE_MODES)[number];

/** vLLM's own default model: what a server started without the right `--model` serves. */
export const WRONG_MODEL_ID = "facebook/opt-125m";

export interface FakeInferenceSettings {
  /** Fault mode. Default `"ready"`. */
  mode: FakeInferenceMode;
  /** Model id served when healthy. Default `"meta-llama/Llama-3.1-8B-Instruct"`. */
  model: string;
  /** Base completion latency in ms. Default 5. */
  latencyMs: number;
  /** Random extra latency, uniform in [0, jitterMs). Default 0. */
  jitterMs: number;
  /** Completion latency in `slow` mode, in ms. Default 3000. */
  slowMs: number;
}

export interface FakeInferenceOptions extends Partial<FakeInferenceSettings> {
  /** Server kind whose API is imitated. Default `"vllm"`. */
  kind?: InferenceKind;
  /** Inference port on 127.0.0.1. Default: a free port. */
  port?: number;
  /** Admin port on 127.0.0.1. Default: a free port. */
  adminPort?: number;
}

export interface FakeInferenceStats {
  /** Every HTTP request on the inference port. */
  requests: number;
  /** Completions answered successfully. */
  served: number;
  /** Completions answered with an error, or abandoned by the client. */
  failed: number;
  /** Completions not answered yet (including wedged ones). */
  inFlight: number;
  /** Completions held by a wedged engine. */
  waiting: number;
  generationTokens: number;
  promptTokens: number;
}

export interface FakeInferenceState extends FakeInferenceSettings {
  kind: InferenceKind;
  port: number;
  adminPort: number;
  /** Whether the inference port accepts connections. */
  listening: boolean;
}

export interface FakeInference {
  readonly kind: InferenceKind;
  readonly port: number;
  readonly adminPort: number;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** `http://127.0.0.1:<adminPort>` */
  readonly adminUrl: string;
  /** Applies a new mode, or a partial change of settings; resolves once the listener is open or closed. */
  setMode(change: FakeInferenceMode | Partial<FakeInferenceSettings>): Promise<FakeInferenceState>;
  state(): FakeInferenceState;
  stats(): FakeInferenceStats;
  /** Closes both ports and drops every connection, held completions included. */
  close(): Promise<void>;
}

/** A bad mode, kind or setting, from a caller or the command line. */
export class FakeInferenceSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FakeInferenceSettingsError";
  }
}

/** The admin API refused a change or could not be reached. */
export class FakeInferenceAdminError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FakeInferenceAdminError";
  }
}

const DEFAULT_SETTINGS: Readonly<FakeInferenceSettings> = Object.freeze({
  mode: "ready",
  model: "meta-llama/Llama-3.1-8B-Instruct",
  latencyMs: 5,
  jitterMs: 0,
  slowMs: 3000,
});
const MAX_MODEL_LEN = 8192;
const MAX_BODY_BYTES = 1 << 20;
/** Completions default to 16 tokens (the OpenAI API's default) and are capped so a test cannot ask for megabytes. */
const DEFAULT_TOKENS = 16;
const MAX_TOKENS = 256;

interface Reply {
  status: number;
  body?: string;
  type?: string;
}
type Body = Record<string, unknown>;

const json = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), type: "application/json" });
const empty = (status: number): Reply => ({ status });

/** Checks a settings change before anything is applied, naming the first bad field. */
export function parseSettingsChange(raw: unknown): Partial<FakeInferenceSettings> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new FakeInferenceSettingsError("settings change must be a JSON object");
  }
  const r = raw as Record<string, unknown>;
  const out: Partial<FakeInferenceSettings> = {};
  if (r.mode !== undefined) {
    if (!FAKE_INFERENCE_MODES.includes(r.mode as FakeInferenceMode)) {
      throw new FakeInferenceSettingsError(`mode must be one of ${FAKE_INFERENCE_MODES.join(", ")}; got ${JSON.stringify(r.mode)}`);
    }
    out.mode = r.mode as FakeInferenceMode;
  }
  if (r.model !== undefined) {
    if (typeof r.model !== "string" || r.model === "") throw new FakeInferenceSettingsError("model must be a non-empty string");
    out.model = r.model;
  }
  for (const k of ["latencyMs", "jitterMs", "slowMs"] as const) {
    const v = r[k];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new FakeInferenceSettingsError(`${k} must be a number >= 0`);
    out[k] = v;
  }
  return out;
}

function str(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(str).join(" ");
  return "";
}

function wantedTokens(v: unknown): number {
  return typeof v === "number" && v > 0 ? Math.min(Math.floor(v), MAX_TOKENS) : DEFAULT_TOKENS;
}

/** About four characters a token, as for English text with a BPE tokenizer. */
const promptTokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));
const generated = (n: number): string => " ok".repeat(n);

/** Prometheus text as Python's prometheus_client writes it (vLLM): floats with a decimal point. */
function prom(name: string, type: "gauge" | "counter", help: string, labels: string, value: number): string {
  const v = Number.isInteger(value) ? value.toFixed(1) : String(value);
  return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name}${labels} ${v}\n`;
}

/** Completions that must be answered with a kind-specific success body once `infer` lets them through. */
interface Completion {
  /** Model named in the request, if the API takes one. */
  model?: string;
  prompt: string;
  maxTokens: number;
  /** The success body for `tokens` generated tokens from `prompt` tokens. */
  ok(text: string, tokens: number, prompt: number): unknown;
}

class FakeInferenceServer implements FakeInference {
  readonly url: string;
  readonly adminUrl: string;
  private settings: FakeInferenceSettings;
  private readonly counters: FakeInferenceStats = {
    requests: 0,
    served: 0,
    failed: 0,
    inFlight: 0,
    waiting: 0,
    generationTokens: 0,
    promptTokens: 0,
  };
  private readonly inference: Server;
  private readonly admin: Server;
  private listening = false;
  private closed = false;
  /** Mode changes run one at a time, since opening and closing the listener takes a turn of the loop. */
  private changes: Promise<unknown> = Promise.resolve();
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(
    readonly kind: InferenceKind,
    readonly port: number,
    readonly adminPort: number,
    settings: FakeInferenceSettings,
  ) {
    this.settings = settings;
    this.url = `http://127.0.0.1:${port}`;
    this.adminUrl = `http://127.0.0.1:${adminPort}`;
    this.inference = createServer((req, res) => void this.onInference(req, res));
    this.admin = createServer((req, res) => void this.onAdmin(req, res));
  }

  async start(): Promise<void> {
    await listen(this.admin, this.adminPort);
    await this.applyListener();
  }

  setMode(change: FakeInferenceMode | Partial<FakeInferenceSettings>): Promise<FakeInferenceState> {
    const patch = parseSettingsChange(typeof change === "string" ? { mode: change } : change);
    const next = this.changes.then(async () => {
      this.settings = { ...this.settings, ...patch };
      await this.applyListener();
      return this.state();
    });
    this.changes = next.catch(() => undefined);
    return next;
  }

  state(): FakeInferenceState {
    return { ...this.settings, kind: this.kind, port: this.port, adminPort: this.adminPort, listening: this.listening };
  }

  stats(): FakeInferenceStats {
    return { ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.changes;
    await Promise.all([shut(this.inference), shut(this.admin)]);
    this.listening = false;
  }

  /** Closed for a crashed process, and while vLLM, TGI or a generic server is still loading. */
  private shouldListen(): boolean {
    const { mode } = this.settings;
    if (this.closed || mode === "refused") return false;
    return !(mode === "loading" && (this.kind === "vllm" || this.kind === "tgi" || this.kind === "openai"));
  }

  private async applyListener(): Promise<void> {
    const want = this.shouldListen();
    if (want === this.listening) return;
    if (want) await listen(this.inference, this.port);
    else await shut(this.inference);
    this.listening = want;
  }

  /** The model id the server lists, or none once unloaded. */
  private servedModel(): string | undefined {
    if (this.settings.mode === "unloaded") return undefined;
    return this.settings.mode === "wrong-model" ? WRONG_MODEL_ID : this.settings.model;
  }

  private notReady(): boolean {
    return this.settings.mode === "loading" || this.settings.mode === "loading503";
  }

  private async onAdmin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (req.method === "POST" && req.url === "/mode") {
        const body = await readBody(req);
        send(res, json(200, await this.setMode(parseSettingsChange(JSON.parse(body)))));
      } else if (req.method === "GET" && req.url === "/state") {
        send(res, json(200, this.state()));
      } else if (req.method === "GET" && req.url === "/stats") {
        send(res, json(200, this.stats()));
      } else {
        send(res, json(404, { error: `no ${req.method} ${req.url} on the admin port` }));
      }
    } catch (err) {
      const bad = err instanceof FakeInferenceSettingsError || err instanceof SyntaxError;
      send(res, json(bad ? 400 : 500, { error: err instanceof Error ? err.message : String(err) }));
    }
  }

  private async onInference(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.counters.requests++;
    const path = (req.url ?? "/").split("?")[0];
    let body: Body = {};
    try {
      if (req.method === "POST") {
        const parsed: unknown = JSON.parse((await readBody(req)) || "{}");
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) body = parsed as Body;
      }
    } catch {
      send(res, this.badRequest("request body is not valid JSON"));
      return;
    }
    try {
      const reply = await this.route(req.method ?? "GET", path, body, res);
      if (reply) send(res, reply);
    } catch (err) {
      // A bug in the fake must show as a 500, not as a crash that a test would read as an inference crash.
      send(res, json(500, { error: err instanceof Error ? err.message : String(err) }));
    }
  }

  /** Returns the reply, or nothing when the reply was sent (or deliberately withheld) by `infer`. */
  private async route(method: string, path: string, body: Body, res: ServerResponse): Promise<Reply | undefined> {
    const k = this.kind;
    const get = method === "GET";
    const post = method === "POST";
    if (get && path === "/metrics" && (k === "vllm" || k === "tgi" || k === "llamacpp")) return this.metrics();
    switch (true) {
      case get && path === "/health" && k !== "triton" && k !== "openai":
        return this.health();
      case get && path === "/v2/health/live" && k === "triton":
        // Triton: live as soon as the HTTP endpoint is up, even while models load.
        return empty(200);
      case get && path === "/v2/health/ready" && k === "triton":
        // Triton: 200 when the server and its models are ready, 400 (empty body) otherwise.
        return empty(this.notReady() ? 400 : 200);
      case get && path === "/v1/models" && k !== "tgi" && k !== "triton":
        return this.models();
      case get && path === "/info" && k === "tgi":
        return this.tgiInfo();
      case k === "triton" && path.startsWith("/v2/models/"):
        return this.triton(method, path, body, res);
      case post && path === "/v1/completions" && k !== "tgi" && k !== "triton":
        return this.infer(res, {
          model: str(body.model) || undefined,
          prompt: str(body.prompt),
          maxTokens: wantedTokens(body.max_tokens),
          ok: (text, tokens, prompt) => this.openaiBody("text_completion", { index: 0, text, logprobs: null, finish_reason: "length", stop_reason: null }, tokens, prompt),
        });
      case post && path === "/v1/chat/completions" && k !== "triton":
        return this.infer(res, {
          model: str(body.model) || undefined,
          prompt: Array.isArray(body.messages) ? body.messages.map((m: unknown) => str((m as Body | null)?.content)).join("\n") : "",
          maxTokens: wantedTokens(body.max_completion_tokens ?? body.max_tokens),
          ok: (text, tokens, prompt) =>
            this.openaiBody("chat.completion", { index: 0, message: { role: "assistant", content: text }, logprobs: null, finish_reason: "length" }, tokens, prompt),
        });
      case post && path === "/generate" && k === "tgi":
        // TGI's native API: {"inputs": "...", "parameters": {"max_new_tokens": n}} → {"generated_text": "..."}.
        return this.infer(res, {
          prompt: str(body.inputs),
          maxTokens: wantedTokens((body.parameters as Body | undefined)?.max_new_tokens),
          ok: (text) => ({ generated_text: text }),
        });
      case post && path === "/completion" && k === "llamacpp":
        // llama.cpp's native API: {"prompt": "...", "n_predict": n} → {"content": "...", "tokens_predicted": n, ...}.
        return this.infer(res, {
          prompt: str(body.prompt),
          maxTokens: wantedTokens(body.n_predict),
          ok: (text, tokens, prompt) => ({
            content: text,
            id_slot: 0,
            stop: true,
            model: this.servedModel() ?? "",
            tokens_predicted: tokens,
            tokens_evaluated: prompt,
            stop_type: "limit",
          }),
        });
      default:
        return this.notFound();
    }
  }

  private health(): Reply {
    const { mode } = this.settings;
    if (this.kind === "llamacpp") {
      // llama.cpp: 503 with this exact error object while the model loads, then {"status":"ok"}.
      if (this.notReady()) return this.loadingLlamacpp();
      return mode === "garbage" ? garbageJson() : json(200, { status: "ok" });
    }
    if (this.kind === "tgi") {
      // TGI: 200 with an empty body when a tiny generation succeeds, 503 with its error object otherwise.
      return this.notReady() ? json(503, { error: "unhealthy", error_type: "healthcheck" }) : empty(200);
    }
    // vLLM: 200 with an empty body; 503 when the engine is dead. error5xx also fails it (500).
    if (this.notReady()) return empty(503);
    return empty(mode === "error5xx" ? 500 : 200);
  }

  private loadingLlamacpp(): Reply {
    return json(503, { error: { code: 503, message: "Loading model", type: "unavailable_error" } });
  }

  /** Everything but liveness and metrics answers like this while the server is up but not ready. */
  private unavailable(): Reply {
    switch (this.kind) {
      case "llamacpp":
        return this.loadingLlamacpp();
      case "tgi":
        return json(503, { error: "unhealthy", error_type: "healthcheck" });
      case "triton":
        return json(400, { error: `Request for unknown model: '${this.settings.model}' is not ready` });
      default:
        return json(503, { error: { message: "Service Unavailable", type: "ServiceUnavailableError", param: null, code: 503 } });
    }
  }

  private models(): Reply {
    if (this.notReady()) return this.unavailable();
    if (this.settings.mode === "garbage") return garbageJson();
    const id = this.servedModel();
    const owner = this.kind === "vllm" ? "vllm" : this.kind === "llamacpp" ? "llamacpp" : "system";
    // vLLM: {"object":"list","data":[{id, object:"model", created, owned_by:"vllm", root, parent, max_model_len}]}.
    const data = id
      ? [
          this.kind === "vllm"
            ? { id, object: "model", created: this.created, owned_by: owner, root: id, parent: null, max_model_len: MAX_MODEL_LEN, permission: [] }
            : { id, object: "model", created: this.created, owned_by: owner },
        ]
      : [];
    return json(200, { object: "list", data });
  }

  private tgiInfo(): Reply {
    if (this.notReady()) return this.unavailable();
    if (this.settings.mode === "garbage") return garbageJson();
    // TGI 2.x GET /info, with the fields a router reports.
    return json(200, {
      model_id: this.servedModel() ?? "",
      model_sha: null,
      model_dtype: "torch.float16",
      model_device_type: "cuda",
      model_pipeline_tag: "text-generation",
      max_concurrent_requests: 128,
      max_best_of: 2,
      max_stop_sequences: 4,
      max_input_tokens: MAX_MODEL_LEN - 1,
      max_total_tokens: MAX_MODEL_LEN,
      validation_workers: 2,
      max_client_batch_size: 4,
      router: "text-generation-router",
      version: "2.4.1",
      sha: null,
      docker_label: null,
    });
  }

  /** Triton's per-model endpoints: ready, metadata, generate. Unknown or unready models answer 400. */
  private async triton(method: string, path: string, body: Body, res: ServerResponse): Promise<Reply | undefined> {
    const m = /^\/v2\/models\/([^/]+)(?:\/versions\/[^/]+)?(\/ready|\/generate)?$/.exec(path);
    if (!m) return this.notFound();
    const name = decodeURIComponent(m[1]);
    const known = name === this.servedModel();
    if (method === "GET" && m[2] === "/ready") return empty(known && !this.notReady() ? 200 : 400);
    if (this.notReady()) return this.unavailable();
    if (method === "GET" && m[2] === undefined) {
      if (!known) return this.modelNotFound(name);
      if (this.settings.mode === "garbage") return garbageJson();
      return json(200, {
        name,
        versions: ["1"],
        platform: "ensemble",
        inputs: [
          { name: "text_input", datatype: "BYTES", shape: [-1] },
          { name: "max_tokens", datatype: "INT32", shape: [-1] },
        ],
        outputs: [{ name: "text_output", datatype: "BYTES", shape: [-1] }],
      });
    }
    if (method === "POST" && m[2] === "/generate") {
      // Triton generate extension: {"text_input": "...", "max_tokens": n} → {"model_name", "model_version", "text_output"}.
      return this.infer(res, {
        model: name,
        prompt: str(body.text_input),
        maxTokens: wantedTokens(body.max_tokens),
        ok: (text) => ({ model_name: name, model_version: "1", text_output: text }),
      });
    }
    return this.notFound();
  }

  private openaiBody(object: string, choice: unknown, tokens: number, prompt: number): unknown {
    const prefix = object === "chat.completion" ? "chatcmpl" : "cmpl";
    return {
      id: `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`,
      object,
      created: Math.floor(Date.now() / 1000),
      model: this.servedModel() ?? "",
      choices: [choice],
      usage: { prompt_tokens: prompt, total_tokens: prompt + tokens, completion_tokens: tokens },
    };
  }

  /**
   * One completion through the current mode: refused by model or mode, held forever when wedged, or
   * answered after the mode's latency. Counts it in the stats and the token counters.
   */
  private async infer(res: ServerResponse, c: Completion): Promise<Reply | undefined> {
    const { mode } = this.settings;
    let reply: Reply | undefined;
    if (this.notReady()) reply = this.unavailable();
    else if (mode === "unloaded" || (c.model !== undefined && c.model !== this.servedModel())) reply = this.modelNotFound(c.model ?? this.settings.model);
    else if (mode === "error5xx") reply = this.internalError();
    if (reply) {
      this.counters.failed++;
      return reply;
    }
    this.counters.inFlight++;
    let answered = false;
    let gone = false;
    res.on("close", () => {
      if (answered) return;
      gone = true;
      this.counters.inFlight--;
      this.counters.failed++;
      if (mode === "wedged") this.counters.waiting--;
    });
    if (mode === "wedged") {
      // A wedged engine accepts the request and never schedules it: hold it until the client gives up.
      this.counters.waiting++;
      return undefined;
    }
    const base = mode === "slow" ? this.settings.slowMs : this.settings.latencyMs;
    await sleep(base + Math.random() * this.settings.jitterMs);
    if (gone) return undefined;
    answered = true;
    this.counters.inFlight--;
    this.counters.served++;
    if (mode === "garbage") {
      send(res, json(200, { result: "ok", choices: "none" }));
      return undefined;
    }
    const prompt = promptTokens(c.prompt);
    this.counters.generationTokens += c.maxTokens;
    this.counters.promptTokens += prompt;
    send(res, json(200, c.ok(generated(c.maxTokens), c.maxTokens, prompt)));
    return undefined;
  }

  private modelNotFound(model: string): Reply {
    switch (this.kind) {
      case "triton":
        return json(400, { error: `Request for unknown model: '${model}' is not found` });
      case "tgi":
        // TGI serves one model and has no unload; this mirrors its {error, error_type} error body.
        return json(404, { error: `Model ${model} is not loaded`, error_type: "not_found" });
      default:
        // vLLM and OpenAI-compatible servers: 404 with an OpenAI error object.
        return json(404, { error: { message: `The model \`${model}\` does not exist.`, type: "NotFoundError", param: "model", code: 404 } });
    }
  }

  private internalError(): Reply {
    switch (this.kind) {
      case "tgi":
        return json(500, { error: "Request failed during generation: CUDA error: an illegal memory access was encountered", error_type: "generation" });
      case "triton":
        return json(500, { error: "in ensemble 'ensemble', Encountered error for requestId 1: CUDA error" });
      case "llamacpp":
        return json(500, { error: { code: 500, message: "Internal server error", type: "server_error" } });
      default:
        return json(500, { error: { message: "EngineCore encountered an issue.", type: "InternalServerError", param: null, code: 500 } });
    }
  }

  private badRequest(message: string): Reply {
    if (this.kind === "tgi" || this.kind === "triton") return json(400, { error: message });
    return json(400, { error: { message, type: "BadRequestError", param: null, code: 400 } });
  }

  private notFound(): Reply {
    // FastAPI's 404 (vLLM); the others answer an empty 404.
    return this.kind === "vllm" ? json(404, { detail: "Not Found" }) : empty(404);
  }

  private metrics(): Reply {
    const running = this.counters.inFlight - this.counters.waiting;
    const waiting = this.counters.waiting;
    const gen = this.counters.generationTokens;
    const prompt = this.counters.promptTokens;
    let text: string;
    if (this.kind === "vllm") {
      const l = `{model_name="${this.settings.model}"}`;
      // vLLM ≥ 0.10 names it kv_cache_usage_perc (was gpu_cache_usage_perc); 0..1, grows with the batch.
      const kv = Math.min(1, (running + waiting) * 0.02);
      text =
        prom("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", l, running) +
        prom("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", l, waiting) +
        prom("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", l, kv) +
        prom("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", l, prompt) +
        prom("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", l, gen);
    } else if (this.kind === "tgi") {
      text =
        `# TYPE tgi_queue_size gauge\ntgi_queue_size ${waiting}\n` +
        `# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size ${running}\n` +
        `# TYPE tgi_request_generated_tokens_sum counter\ntgi_request_generated_tokens_sum ${gen}\n`;
    } else {
      text =
        prom("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", "", prompt) +
        prom("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", "", gen) +
        prom("llamacpp:requests_processing", "gauge", "Number of requests processing.", "", running) +
        prom("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", "", waiting);
    }
    return { status: 200, body: text, type: "text/plain; version=0.0.4; charset=utf-8" };
  }
}

/** A 200 whose body is not JSON at all: the start of an answer cut off mid-object. */
function garbageJson(): Reply {
  return { status: 200, body: '{"object":"list","data":[{"id":', type: "application/json" };
}

function send(res: ServerResponse, r: Reply): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = { "content-length": Buffer.byteLength(r.body ?? "") };
  if (r.type) headers["content-type"] = r.type;
  res.writeHead(r.status, headers);
  res.end(r.body ?? "");
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > MAX_BODY_BYTES) throw new FakeInferenceSettingsError("request body too large");
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Stops accepting and drops every open connection at once, as a dying process would. */
function shut(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Starts a fake inference server on loopback. */
export async function startFakeInference(opts: FakeInferenceOptions = {}): Promise<FakeInference> {
  const kind = opts.kind ?? "vllm";
  if (!INFERENCE_KINDS.includes(kind)) throw new FakeInferenceSettingsError(`kind must be one of ${INFERENCE_KINDS.join(", ")}`);
  const { kind: _k, port: _p, adminPort: _a, ...rest } = opts;
  const settings = { ...DEFAULT_SETTINGS, ...parseSettingsChange(rest) };
  const port = opts.port || (await freePort());
  const adminPort = opts.adminPort || (await freePort());
  const server = new FakeInferenceServer(kind, port, adminPort, settings);
  await server.start();
  return server;
}

/** Changes a running fake's mode or settings through its admin API (for the drill and process tests). */
export async function setFakeInferenceMode(
  adminUrl: string,
  change: Partial<FakeInferenceSettings>,
  timeoutMs = 5000,
): Promise<FakeInferenceState> {
  let res: Response;
  try {
    res = await fetch(new URL("/mode", adminUrl), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(change),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new FakeInferenceAdminError(`cannot reach ${adminUrl}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const text = await res.text();
  if (res.status !== 200) throw new FakeInferenceAdminError(`${adminUrl}/mode answered ${res.status}: ${text}`);
  return JSON.parse(text) as FakeInferenceState;
}

/** `--port P --admin-port Q --kind K --model M --mode X --latency-ms N --jitter-ms N --slow-ms N`. */
export function parseFakeInferenceArgs(argv: string[]): FakeInferenceOptions {
  const opts: Record<string, unknown> = {};
  const numeric = new Set(["port", "adminPort", "latencyMs", "jitterMs", "slowMs"]);
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new FakeInferenceSettingsError(`unexpected argument ${argv[i]}`);
    const key = m[1].replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new FakeInferenceSettingsError(`--${m[1]} needs a value`);
    if (!["kind", "model", "mode", ...numeric].includes(key)) throw new FakeInferenceSettingsError(`unknown option --${m[1]}`);
    if (numeric.has(key)) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new FakeInferenceSettingsError(`--${m[1]} must be an integer >= 0`);
      opts[key] = n;
    } else {
      opts[key] = value;
    }
  }
  const { kind, port, adminPort, ...rest } = opts;
  if (kind !== undefined && !INFERENCE_KINDS.includes(kind as InferenceKind)) {
    throw new FakeInferenceSettingsError(`--kind must be one of ${INFERENCE_KINDS.join(", ")}`);
  }
  return { ...parseSettingsChange(rest), kind: kind as InferenceKind | undefined, port: port as number | undefined, adminPort: adminPort as number | undefined };
}

async function main(): Promise<void> {
  let fake: FakeInference;
  try {
    fake = await startFakeInference(parseFakeInferenceArgs(process.argv.slice(2)));
  } catch (err) {
    process.stderr.write(`fake-inference: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  process.stdout.write(`${JSON.stringify({ ready: true, port: fake.port, adminPort: fake.adminPort })}\n`);
  const stop = (): void => {
    void fake.close().then(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (require.main === module) void main();
