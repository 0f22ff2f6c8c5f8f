/**
 * The fake inference server's public vocabulary: its fault modes, settings, options, stats and
 * state, the `FakeInference` handle a caller gets, its named errors, and the check every settings
 * change (from a caller, the admin API or the command line) goes through before it is applied.
 */
import { INFERENCE_KINDS, type InferenceKind } from "../../../agent/src/config/spec";
import { CORRUPTIONS, type Corruption } from "./greedy";

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
  "failed-load",
  "corrupt",
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
 * - `failed-load`: the weights do not load (corrupted files): vLLM, TGI, llama.cpp and generic servers exit
 *   during load (the port stays closed); Triton stays live, never ready, and its repository index says
 *   `UNAVAILABLE` with the load error.
 * - `corrupt`: the model loads and answers, but with garbage (`CORRUPT_TOKEN_TEXT`), as corrupted weights do.
 *
 * Entering `wedged` also freezes the completions already running: no token progress at all until it ends.
 */
export type FakeInferenceMode = (typeof FAKE_INFERENCE_MODES)[number];

/** What a server with corrupted weights generates for every token (NaN logits pick token 0, `!` in Llama's vocabulary). */
export const CORRUPT_TOKEN_TEXT = "!";

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
  /**
   * Time of each generated token after the first, in ms: a completion of N tokens takes the base
   * latency (its first token) plus (N − 1) × tokenMs, and a stream sends one chunk each tokenMs.
   * Default 20 (50 tokens/s, a busy GPU). The probe's one-token completion does not feel it.
   */
  tokenMs: number;
  /**
   * Whether a prompt carrying `QUERY_OF_DEATH_MARKER` kills the server (a request that crashes
   * the engine). Default true: nothing sends the marker by accident.
   */
  queryOfDeath: boolean;
  /**
   * Completions generated at once (the engine's batch); more wait in the queue (`waiting` in the
   * metrics) while tokens flow. 0 = no limit. Default 0.
   */
  maxRunning: number;
  /**
   * Silent corruption: the server loads and answers 200, wrongly. `garbage`: fluent wrong
   * text; `drift`: one token in `driftEvery` of a greedy answer differs; `nan`: logprobs NaN. Default `none`.
   */
  corruption: Corruption;
  /** `drift`: every `driftEvery`-th token of a greedy answer is wrong. Default 4. */
  driftEvery: number;
  /** Nondeterminism within tolerance, 0..1 (logprob jitter, a late token differing): `greedy.ts`. Default 0. */
  noise: number;
  /**
   * vLLM's `vllm:corrupted_requests_total` (requests whose logits went NaN) as its metrics export
   * it: a test or the drill raises it to play an engine that saw NaNs between canary rounds, and
   * sets it lower to play a restarted engine; null: a vLLM too old to export it. vLLM only; the
   * fake never raises it by itself. Default 0.
   */
  corruptedRequests: number | null;
  /**
   * The revision the server reports it serves (a weights commit or hash): vLLM as `root` in
   * `/v1/models`, TGI as `model_sha` in `/info`; the agent checks it against the revisions a
   * rollout allows. null: none reported (vLLM's `root` is the model id, TGI's `model_sha` null). Default null.
   */
  revision: string | null;
  /**
   * How the server takes the edge relay's continuation request (a final assistant message with
   * `continue_final_message`): `accept` continues it as the kind does; `refuse` answers 400, as
   * an engine without support does (an upgrade that breaks resuming a cut stream). Default `accept`.
   */
  continuation: Continuation;
}

export const CONTINUATIONS = ["accept", "refuse"] as const;
export type Continuation = (typeof CONTINUATIONS)[number];

/**
 * What a model or engine revision changes in a server (the drill's rollout profiles, a node's
 * settings on every start of its server): what it reports, how fast and how well it answers,
 * whether it takes the relay's continuation, how long it loads.
 */
export type FakeInferenceProfile = Partial<Pick<FakeInferenceSettings, "revision" | "latencyMs" | "corruption" | "continuation" | "corruptedRequests">> & { loadMs?: number };

export interface FakeInferenceOptions extends Partial<FakeInferenceSettings> {
  /** Server kind whose API is imitated. Default `"vllm"`. */
  kind?: InferenceKind;
  /**
   * Loopback address both ports listen on. Default 127.0.0.1; the drill gives each node an
   * address of its own (127.1.x.y) with the same ports, as pods behind a headless Service.
   */
  host?: string;
  /** Inference port on `host`. Default: a free port. */
  port?: number;
  /** Admin port on `host`. Default: a free port. */
  adminPort?: number;
  /**
   * vLLM's `--api-key`: routes under `/v1` answer 401 `{"error":"Unauthorized"}` without
   * `Authorization: Bearer <key>`; `/health` and `/metrics` stay open, as in vLLM's
   * `AuthenticationMiddleware`. Default: none (every route open).
   */
  apiKey?: string;
  /**
   * What a query of death does. The process (`cli.ts`) exits at once; the default, for a fake
   * run inside a test, drops every connection and closes both ports for good.
   */
  onQueryOfDeath?: () => void;
  /**
   * A model load on start: the server starts in `loading` (the kind's loading behaviour: vLLM's
   * port closed, llama.cpp's 503) and takes its configured mode after this many ms, as a real
   * engine loads its weights on every start. Default 0 (ready at once).
   */
  loadMs?: number;
}

/** Response header naming the fake that answered (`address:port`): the drill tells which server a cut stream was on. */
export const FAKE_SERVER_HEADER = "x-fake-server";

/** Text in a prompt (or a chat message) that kills a server whose `queryOfDeath` is on. */
export const QUERY_OF_DEATH_MARKER = "LLMHA-QUERY-OF-DEATH";
/** Exit code of the fake's process killed by a query of death (EX_SOFTWARE). */
export const QUERY_OF_DEATH_EXIT_CODE = 70;

export interface FakeInferenceStats {
  /** Every HTTP request on the inference port. */
  requests: number;
  /** Completions answered successfully. */
  served: number;
  /** Completions answered with an error, or abandoned by the client. */
  failed: number;
  /** Completions not answered yet (including wedged ones). */
  inFlight: number;
  /** Completions not generating: held by a wedged engine, or queued behind `maxRunning`. */
  waiting: number;
  /** Completions asked as a stream (`"stream": true`), whatever their outcome. */
  streamed: number;
  /** Streamed completions sending their chunks now (started, not finished). */
  streaming: number;
  generationTokens: number;
  promptTokens: number;
  /** Completions other than seeded greedy ones (canaries) answered 200 while `corruption` was on: wrong answers served (the agent's probes included). */
  corruptServed: number;
  /** Completions per drill tag (`l4#<tag>` opening the last message). */
  tagged?: Record<string, number>;
  /** Per drill tag, who sent each run: the replaying fallback's request id, or `direct`. */
  taggedVia?: Record<string, string[]>;
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

export const DEFAULT_SETTINGS: Readonly<FakeInferenceSettings> = Object.freeze({
  mode: "ready",
  model: "meta-llama/Llama-3.1-8B-Instruct",
  latencyMs: 5,
  jitterMs: 0,
  slowMs: 3000,
  tokenMs: 20,
  queryOfDeath: true,
  maxRunning: 0,
  corruption: "none",
  driftEvery: 4,
  noise: 0,
  corruptedRequests: 0,
  revision: null,
  continuation: "accept",
});

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
  if (r.queryOfDeath !== undefined) {
    if (typeof r.queryOfDeath !== "boolean") throw new FakeInferenceSettingsError("queryOfDeath must be true or false");
    out.queryOfDeath = r.queryOfDeath;
  }
  if (r.corruption !== undefined) {
    if (!CORRUPTIONS.includes(r.corruption as Corruption)) throw new FakeInferenceSettingsError(`corruption must be one of ${CORRUPTIONS.join(", ")}; got ${JSON.stringify(r.corruption)}`);
    out.corruption = r.corruption as Corruption;
  }
  if (r.noise !== undefined && (typeof r.noise !== "number" || !(r.noise >= 0 && r.noise <= 1))) throw new FakeInferenceSettingsError("noise must be a number from 0 to 1");
  if (r.noise !== undefined) out.noise = r.noise as number;
  if (r.corruptedRequests !== undefined) {
    const v = r.corruptedRequests;
    if (v !== null && (typeof v !== "number" || !Number.isInteger(v) || v < 0)) throw new FakeInferenceSettingsError("corruptedRequests must be an integer >= 0, or null (not exported)");
    out.corruptedRequests = v;
  }
  if (r.revision !== undefined) {
    const v = r.revision;
    if (v !== null && (typeof v !== "string" || !/^[A-Za-z0-9._:@/+-]{1,128}$/.test(v))) throw new FakeInferenceSettingsError("revision must be null or 1-128 characters of letters, digits and ._:@/+-");
    out.revision = v;
  }
  if (r.continuation !== undefined) {
    if (!CONTINUATIONS.includes(r.continuation as Continuation)) throw new FakeInferenceSettingsError(`continuation must be one of ${CONTINUATIONS.join(", ")}; got ${JSON.stringify(r.continuation)}`);
    out.continuation = r.continuation as Continuation;
  }
  for (const k of ["latencyMs", "jitterMs", "slowMs", "tokenMs", "maxRunning", "driftEvery"] as const) {
    const v = r[k];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new FakeInferenceSettingsError(`${k} must be a number >= 0`);
    out[k] = v;
  }
  return out;
}
