import type { InferenceKind } from "../../config/spec";
import { isFail, request, type AuthHeaders } from "./inference";
import { KeepAliveGet } from "../../util/keepalive-get";
import type { EngineObservation, Signals } from "./signals";

/**
 * The inference server's Prometheus metrics: which series each server family exports for its
 * queue and its progress, and how the agent reads them (the engine source).
 */

/**
 * Sums every series of a metric in Prometheus text; null when absent. `labels` keeps only
 * the series whose labels include each `name="value"` given.
 */
export function promSum(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | null {
  return sumOf(text.split("\n"), name, labels);
}

/** `promSum` over lines already split (and, from `seriesLines`, already those of `name`). */
function sumOf(lines: readonly string[], name: string, labels: Readonly<Record<string, string>>): number | null {
  let total: number | null = null;
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of lines) {
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
  /**
   * The engine's own count of requests whose numerics went bad (vLLM: logits NaN), first found
   * wins; absent from the family, or from an older server, the signal is null, never an error.
   */
  readonly corrupted?: readonly string[];
  /**
   * How far one of the agent's probes moves the progress counters at most, where they do not count
   * tokens (default: the probe's tokens and its prompt's); more means other work (`EngineActivity`).
   */
  readonly perProbe?: number;
}

/** The families the agent reads, tried in this order; each server exports exactly one. */
export const ENGINE_FAMILIES: readonly EngineFamily[] = [
  {
    name: "vllm",
    waiting: ["vllm:num_requests_waiting"],
    running: ["vllm:num_requests_running"],
    progress: ["vllm:generation_tokens_total", "vllm:prompt_tokens_total"],
    kv: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    // A counter: Prometheus text names it with `_total`; some exporters write the bare name.
    corrupted: ["vllm:corrupted_requests_total", "vllm:corrupted_requests"],
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
    // Steps and executions, not tokens: a 1-token probe is one execution and a step or two.
    perProbe: 4,
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

/** How long the probe goes unanswered before the engine is read at once, and then at the fast period. */
export const ENGINE_LOOK_MS = 100;

/**
 * Whether the engine works for others than the agent's probe, from one read to the next: requests
 * wait, more than one runs, or its progress counters moved by more than the probes answered in
 * between account for (each allowed `perProbe` tokens).
 */
export class EngineActivity {
  private last: { tokens: number; probes: number } | null = null;
  private probes = 0;
  busy = false;

  /** The agent's probe was answered (its tokens are its own, not others' work). */
  probeAnswered(): void {
    this.probes += 1;
  }

  /** After each read. */
  update(e: EngineObservation | null, perProbe: number): void {
    const probes = this.probes;
    const prev = this.last;
    this.last = e ? { tokens: e.tokensTotal, probes } : null;
    const own = ENGINE_FAMILIES.find((f) => f.name === e?.family)?.perProbe ?? perProbe;
    const others = e !== null && prev !== null && e.tokensTotal - prev.tokens > (probes - prev.probes + 1) * own;
    this.busy = e !== null && (e.waiting > 0 || e.running > 1 || others);
  }
}

/**
 * The engine source's period now: `fastMs` (`LLMHA_ENGINE_INTERVAL_MS`) while the engine serves others
 * (`busy`, `EngineActivity`) or the agent's own probe has gone unanswered for `ENGINE_LOOK_MS` (a wedged
 * engine holds it): the wedge check needs its samples then. Else `idleMs` (`LLMHA_ENGINE_IDLE_INTERVAL_MS`):
 * reading an idle engine five times a second was the largest part of the agent's own CPU.
 */
export function enginePeriodMs(signals: Signals, busy: boolean, fastMs: number, idleMs: number, now: number): number {
  const held = signals.probeInFlightSince != null && now - signals.probeInFlightSince >= ENGINE_LOOK_MS;
  return busy || held ? fastMs : Math.max(fastMs, idleMs);
}

/** Every series any family reads: the only lines of a server's metrics text worth keeping. */
const WANTED = new Set(ENGINE_FAMILIES.flatMap((f) => [...f.waiting, ...f.running, ...(f.kv ?? []), ...(f.corrupted ?? []), ...f.progress.map((p) => (typeof p === "string" ? p : p[0]))]));

/** A line of one of the `WANTED` series: its name at the start of a line, then its labels or its value. */
const WANTED_LINE = new RegExp(`^(${[...WANTED].map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})[{ ][^\n]*`, "gm");

/**
 * The lines of the series in `WANTED`, by name. A real server's metrics text is tens of KB
 * (vLLM's histograms: 42 KB, 455 lines in the fake's copy of one) and is read up to five times a
 * second (enginePeriodMs): one regular expression finds the few lines wanted. It runs as
 * the regex engine's own compiled code, 0.03 ms for vLLM's text whatever JavaScript tier the agent
 * runs at (a loop over the lines took 0.1 ms optimised, 0.45 ms in the baseline tier the agent now runs).
 */
function seriesLines(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of text.matchAll(WANTED_LINE)) {
    const lines = out.get(m[1]);
    if (lines) lines.push(m[0]);
    else out.set(m[1], [m[0]]);
  }
  return out;
}

/**
 * Engine counters from a server's Prometheus text, whichever family it is; null when no
 * family's queue and progress series are there (metrics off, or an unknown server).
 */
export function parseEngineMetrics(text: string): EngineObservation | null {
  const series = seriesLines(text);
  const sum = (name: string, labels: Readonly<Record<string, string>> = {}): number | null => {
    const lines = series.get(name);
    return lines ? sumOf(lines, name, labels) : null;
  };
  const firstOf = (names: readonly string[]): number | null => {
    for (const n of names) {
      const v = sum(n);
      if (v !== null) return v;
    }
    return null;
  };
  for (const f of ENGINE_FAMILIES) {
    const waiting = firstOf(f.waiting);
    if (waiting === null) continue;
    let progress: number | null = null;
    for (const p of f.progress) {
      const v = typeof p === "string" ? sum(p) : sum(p[0], p[1]);
      if (v !== null) progress = (progress ?? 0) + v;
    }
    if (progress === null) continue;
    return {
      family: f.name,
      running: firstOf(f.running) ?? 0,
      waiting,
      kvCacheUsage: f.kv ? firstOf(f.kv) : null,
      tokensTotal: progress,
      corruptedRequests: f.corrupted ? firstOf(f.corrupted) : null,
    };
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
export async function readEngine(url: string, timeoutMs: number, headers: AuthHeaders = {}): Promise<EngineObservation | null> {
  const r = await request(url, timeoutMs, undefined, undefined, headers);
  if (isFail(r) || r.status !== 200) return null;
  return parseEngineMetrics(r.text);
}

/**
 * The engine source's reader: the metrics read up to five times a second over one kept-alive connection
 * (keepalive-get.ts, a fifth of the full client's CPU), the full client where that cannot be used
 * (`https:`, an answer it does not take). Same outcome as `readEngine`: null when unread.
 */
export class EngineReader {
  private lean: KeepAliveGet | null = null;
  private leanFor: string | null = null;
  /** The server gave an answer the kept-alive reader does not take: the full client from now on. */
  private fullOnly = false;

  constructor(private readonly url: string) {}

  async read(timeoutMs: number, headers: AuthHeaders = {}): Promise<EngineObservation | null> {
    if (this.fullOnly) return readEngine(this.url, timeoutMs, headers);
    // The credential can change (its file re-read): a connection per set of headers.
    const key = JSON.stringify(headers);
    if (key !== this.leanFor) {
      this.lean?.close();
      this.lean = new KeepAliveGet(this.url, headers);
      this.leanFor = key;
    }
    const r = await this.lean!.get(timeoutMs);
    if ("kind" in r && r.kind === "unsupported") {
      this.fullOnly = true;
      this.close();
      return readEngine(this.url, timeoutMs, headers);
    }
    if ("kind" in r || r.status !== 200) return null;
    return parseEngineMetrics(r.text);
  }

  close(): void {
    this.lean?.close();
    this.lean = null;
    this.leanFor = null;
  }
}
