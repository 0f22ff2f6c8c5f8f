/**
 * Field-like client traffic for the drill's proxy scenarios, sent with the official `openai`
 * client pointed at an AZ proxy (`maxRetries: 0`: every failure is counted, none hidden by a
 * client retry): prompts of 1 KB–100 KB, streamed chat and completions of several seconds,
 * non-streaming generations; a closed loop of `concurrency` workers or a steady rate. Every
 * request is kept (start, end, shape, outcome, HTTP status, `Retry-After`); a failed one also
 * goes to the timeline with its start time and reason, as the light traffic's failures do.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, OpenAI } from "openai";
import { drillKey } from "./credentials";
import { sleep } from "../../agent/src/util/net";
import { FAKE_SERVER_HEADER } from "../sim/fake-inference/settings";
import { STREAM_CUT, type Timeline } from "./timeline";
import { continuationOf, continuationWatchingFetch, DRILL_SEED, recordContinued, undisturbedText } from "./continued";

export type RequestShape = "chat-stream" | "completion-stream" | "chat" | "completion";

/** What the requests look like; each request draws its own shape, prompt size and length. */
export interface WorkloadMix {
  /** Prompt size in bytes, drawn log-uniformly from [min, max]. */
  promptBytes: readonly [number, number];
  /** `max_tokens`, drawn uniformly from [min, max]; the fake spends `tokenMs` (20 ms) on each. */
  maxTokens: readonly [number, number];
  /** Share of streamed requests, 0–1. */
  streamShare: number;
  /** Share of chat requests (the others are completions), 0–1. */
  chatShare: number;
}

/** The field's mix: prompts of 1–100 KB, half of them streamed, generations of 1–5 s. */
export const FIELD_MIX: Readonly<WorkloadMix> = Object.freeze({ promptBytes: [1024, 100 * 1024] as const, maxTokens: [50, 250] as const, streamShare: 0.5, chatShare: 0.5 });

export interface RequestRecord {
  /** Start, ms on the drill clock. */
  t: number;
  end: number;
  shape: RequestShape;
  promptBytes: number;
  maxTokens: number;
  /** Tokens received. */
  tokens: number;
  ok: boolean;
  /** Why it failed: `HTTP 503`, `timeout`, `ECONNRESET`, `stream cut`… */
  why?: string;
  status?: number;
  /** The `Retry-After` header of an HTTP error, null when it had none. */
  retryAfter?: string | null;
  /** A cut stream's server and address. */
  place?: StreamPlace;
}

export interface WorkloadOptions {
  /** Client name in the timeline and the report. */
  client: string;
  /** Base URL of the next request (`http://address:port`), or null to skip. */
  target(): string | null;
  mix: WorkloadMix;
  /** Closed loop: this many workers, each sending its next request when the last one ended. */
  concurrency?: number;
  /** Open loop: requests started per second whatever the answers (used instead of `concurrency`). */
  ratePerS?: number;
  timeline: Timeline;
  /** ms since the drill started. */
  now(): number;
  model: string;
  /** Whole-request limit (a stream included). */
  timeoutMs: number;
  /** Pause between one worker's requests. Default 10 ms. */
  gapMs?: number;
  random?: () => number;
}

export interface Workload {
  readonly records: RequestRecord[];
  inFlight(): number;
  /** Stops starting requests and waits for those in flight. */
  stop(): Promise<void>;
}

/** Where a cut stream ran: the server that answered (`address:port`) and the address the client sent it to. */
export interface StreamPlace {
  server: string | null;
  via: string | null;
}

/** A stream that ended without its finish reason, or an answer shorter than asked. */
export class ShortAnswerError extends Error {
  constructor(
    message: string,
    readonly place?: StreamPlace,
  ) {
    super(message);
    this.name = "ShortAnswerError";
  }
}

const FILLER = "The quick brown fox jumps over the lazy dog while the GPU keeps the batch full. ";

/** A prompt of exactly `bytes` ASCII bytes, with `marker` (if any) in the middle. */
export function promptOf(bytes: number, marker = ""): string {
  const body = FILLER.repeat(Math.ceil(bytes / FILLER.length) + 1).slice(0, Math.max(0, bytes - marker.length));
  const mid = Math.floor(body.length / 2);
  return body.slice(0, mid) + marker + body.slice(mid);
}

/** One request's shape drawn from the mix. */
export function drawRequest(mix: WorkloadMix, random: () => number = Math.random): { shape: RequestShape; promptBytes: number; maxTokens: number } {
  const [pmin, pmax] = mix.promptBytes;
  const promptBytes = Math.round(pmin * Math.pow(pmax / pmin, random()));
  const [tmin, tmax] = mix.maxTokens;
  const maxTokens = tmin + Math.floor(random() * (tmax - tmin + 1));
  const chat = random() < mix.chatShare;
  const stream = random() < mix.streamShare;
  const shape: RequestShape = chat ? (stream ? "chat-stream" : "chat") : stream ? "completion-stream" : "completion";
  return { shape, promptBytes, maxTokens };
}

function codeOf(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e && i < 5; i++) {
    const x = e as { code?: unknown; cause?: unknown };
    if (typeof x.code === "string" && x.code !== "") return x.code;
    e = x.cause;
  }
  return undefined;
}

/** Why a request failed, in the light traffic's words where they overlap (`HTTP 503`, `timeout`, `ECONNRESET`). */
export function failureOf(err: unknown): Pick<RequestRecord, "why" | "status" | "retryAfter" | "place"> {
  if (err instanceof APIUserAbortError || err instanceof APIConnectionTimeoutError) return { why: "timeout" };
  if (err instanceof APIConnectionError) return { why: codeOf(err.cause) ?? "connection error" };
  if (err instanceof APIError) return { why: `HTTP ${err.status ?? "?"}`, status: err.status, retryAfter: err.headers?.get("retry-after") ?? null };
  if (err instanceof ShortAnswerError) return { why: err.message, ...(err.place ? { place: err.place } : {}) };
  const e = err as Error;
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return { why: "timeout" };
  return { why: codeOf(err) ?? e?.name ?? "error" };
}

/**
 * Reads a stream whose response has begun (status and headers in): any error now is a cut
 * stream, named with its cause, never a connection error a client would retry, and tagged
 * with where it ran: the server that answered (the fake's `x-fake-server`) and the address
 * the request went to. The caller's own timeout stays a timeout.
 */
async function cutIfBroken(response: Response, read: () => Promise<void>): Promise<void> {
  try {
    await read();
  } catch (err) {
    if (err instanceof APIUserAbortError || (err as Error)?.name === "AbortError" || (err as Error)?.name === "TimeoutError") throw err;
    const why = err instanceof ShortAnswerError ? err.message : `${STREAM_CUT} (${codeOf(err) ?? (err as Error)?.message ?? "error"})`;
    throw new ShortAnswerError(why, { server: response.headers.get(FAKE_SERVER_HEADER), via: hostOf(response.url) });
  }
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).hostname;
  } catch {
    return null;
  }
}

/** What one answered request got. */
export interface Sent {
  tokens: number;
  /** How the continuation relay carried the answer on (`continue after 12 tokens`, `retried`), or null. */
  continued: string | null;
  /** A greedy request's text equals an undisturbed run's; null when not greedy. */
  exact: boolean | null;
}

/**
 * Sends one request of `shape`; throws when it failed or came back short. `greedy`: a seeded
 * greedy request (temperature 0), whose text is then checked against an undisturbed run's.
 * The client's `fetch` should be `continuationWatchingFetch` for `continued` to be seen.
 */
export async function send(client: OpenAI, model: string, shape: RequestShape, prompt: string, maxTokens: number, signal: AbortSignal, greedy = false): Promise<Sent> {
  const opts = { signal };
  const sampling = greedy ? { temperature: 0, seed: DRILL_SEED } : {};
  let tokens = 0;
  let text = "";
  let finish: string | null = null;
  let response: Response;
  if (shape === "completion") {
    const r = await client.completions.create({ model, prompt, max_tokens: maxTokens, ...sampling }, opts).withResponse();
    response = r.response;
    tokens = r.data.usage?.completion_tokens ?? 0;
    text = r.data.choices[0]?.text ?? "";
    finish = r.data.choices[0]?.finish_reason ?? null;
  } else if (shape === "chat") {
    const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], max_tokens: maxTokens, ...sampling }, opts).withResponse();
    response = r.response;
    tokens = r.data.usage?.completion_tokens ?? 0;
    text = r.data.choices[0]?.message?.content ?? "";
    finish = r.data.choices[0]?.finish_reason ?? null;
  } else {
    // One reader for both streams: a token is a chunk with text (a completion's `text`, a chat's `delta.content`).
    const r =
      shape === "completion-stream"
        ? await client.completions.create({ model, prompt, max_tokens: maxTokens, stream: true, ...sampling }, opts).withResponse()
        : await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], max_tokens: maxTokens, stream: true, ...sampling }, opts).withResponse();
    response = r.response;
    await cutIfBroken(r.response, async () => {
      for await (const c of r.data as AsyncIterable<{ choices: { text?: string; delta?: { content?: string | null }; finish_reason?: string | null }[] }>) {
        const choice = c.choices[0];
        const t = choice?.text ?? choice?.delta?.content;
        if (t) {
          tokens++;
          text += t;
        }
        finish = choice?.finish_reason ?? finish;
      }
      if (finish === null) throw new ShortAnswerError(STREAM_CUT);
    });
  }
  if (finish === null) throw new ShortAnswerError(shape.endsWith("stream") ? STREAM_CUT : "no finish reason");
  if (tokens < maxTokens) throw new ShortAnswerError(`short answer (${tokens} of ${maxTokens} tokens)`);
  const exact = greedy ? text === undisturbedText(shape.startsWith("chat") ? "chat" : "completion", prompt, maxTokens) : null;
  return { tokens, continued: continuationOf(response), exact };
}

/** A client for one base URL: the official one, no retries of its own. */
export function openaiClient(baseUrl: string, timeoutMs: number): OpenAI {
  return new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: drillKey("ops"), maxRetries: 0, timeout: timeoutMs, fetch: continuationWatchingFetch() });
}

/** One request, recorded; a failure also goes to the timeline under `client`. */
export async function sendRecorded(
  o: Pick<WorkloadOptions, "client" | "timeline" | "now" | "model" | "timeoutMs">,
  baseUrl: string,
  req: { shape: RequestShape; promptBytes: number; maxTokens: number; marker?: string },
  clients: Map<string, OpenAI> = new Map(),
): Promise<RequestRecord> {
  let client = clients.get(baseUrl);
  if (!client) clients.set(baseUrl, (client = openaiClient(baseUrl, o.timeoutMs)));
  const t = o.now();
  o.timeline.sent[o.client] = (o.timeline.sent[o.client] ?? 0) + 1;
  const rec: RequestRecord = { t, end: t, shape: req.shape, promptBytes: req.promptBytes, maxTokens: req.maxTokens, tokens: 0, ok: false };
  try {
    // Streams greedy: a continued one is checked against an undisturbed run.
    const greedy = req.shape.endsWith("stream");
    const got = await send(client, o.model, req.shape, promptOf(req.promptBytes, req.marker), req.maxTokens, AbortSignal.timeout(o.timeoutMs), greedy);
    rec.tokens = got.tokens;
    rec.ok = true;
    recordContinued(o.timeline, o.client, t, o.now(), got);
  } catch (err) {
    Object.assign(rec, failureOf(err));
    o.timeline.failures.push({ t, end: o.now(), client: o.client, why: rec.why ?? "error", ...(rec.place ? { place: rec.place } : {}) });
  }
  rec.end = o.now();
  return rec;
}

/** Starts the workload; it runs until `stop()`. */
export function startWorkload(o: WorkloadOptions): Workload {
  const records: RequestRecord[] = [];
  const inFlight = new Set<Promise<void>>();
  const clients = new Map<string, OpenAI>();
  const random = o.random ?? Math.random;
  let stopped = false;
  const fire = (): Promise<void> | null => {
    const url = o.target();
    if (!url) return null;
    const p = sendRecorded(o, url, drawRequest(o.mix, random), clients).then((r) => void records.push(r));
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    return p;
  };
  const loops: Promise<void>[] = [];
  let timer: NodeJS.Timeout | null = null;
  if (o.ratePerS !== undefined) {
    timer = setInterval(() => void fire(), 1000 / o.ratePerS);
  } else {
    for (let w = 0; w < (o.concurrency ?? 1); w++) {
      loops.push(
        (async () => {
          await sleep(w * 3);
          while (!stopped) {
            await (fire() ?? Promise.resolve());
            await sleep(o.gapMs ?? 10);
          }
        })(),
      );
    }
  }
  return {
    records,
    inFlight: () => inFlight.size,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await Promise.allSettled([...loops, ...inFlight]);
    },
  };
}
