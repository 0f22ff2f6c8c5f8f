/**
 * The contract between the fake's server and the file of each server kind it imitates: what a kind
 * sees of the running server (`Engine`), what each kind must provide (`KindApi`), the shape of a
 * streamed completion (`StreamFormat`), and the request and metrics helpers the kinds share.
 */
import type { ServerResponse } from "node:http";
import type { GreedyToken } from "./greedy";
import type { FakeInferenceSettings, FakeInferenceStats, InferenceKind } from "./settings";
import type { Reply } from "./wire";

/** A parsed JSON request body (an empty object when the request had none). */
export type Body = Record<string, unknown>;

/** Context length every kind reports where its API carries one. */
export const MAX_MODEL_LEN = 8192;
/** Completions default to 16 tokens (the OpenAI API's default) and are capped so a test cannot ask for megabytes. */
const DEFAULT_TOKENS = 16;
const MAX_TOKENS = 4096;

/** Completions that must be answered with a kind-specific success body once `infer` lets them through. */
export interface Completion {
  /** Model named in the request, if the API takes one. */
  model?: string;
  prompt: string;
  maxTokens: number;
  /** A seeded request at temperature 0 (a canary): answered with the deterministic greedy tokens. */
  seeded?: boolean;
  /** The success body for `tokens` generated tokens from `prompt` tokens; `greedy`: the tokens of a seeded greedy answer (ids, logprobs). */
  ok(text: string, tokens: number, prompt: number, greedy?: readonly GreedyToken[]): unknown;
  /** Set when the client asked for a stream (`"stream": true`): the chunks in the kind's format. */
  stream?: StreamFormat;
}

/**
 * The chunks of one streamed completion, each sent as a server-sent event `data: {json}`;
 * the stream then ends with `data: [DONE]` (the OpenAI format vLLM, TGI and llama.cpp copy).
 */
export interface StreamFormat {
  /** Chunks before the first token (chat: the assistant role with empty content). */
  opening(): unknown[];
  /** The chunk that carries one token's text. */
  token(text: string): unknown;
  /** The closing chunks: the finish reason, then the usage when the client asked for it. */
  closing(tokens: number, prompt: number): unknown[];
}

/**
 * The running server as a kind's handlers see it. Fault modes live behind it, so a kind maps
 * endpoints to replies and never decides on its own whether a completion fails.
 */
export interface Engine {
  /** The server kind imitated (its continuation parameters differ). */
  readonly kind: InferenceKind;
  readonly settings: Readonly<FakeInferenceSettings>;
  /** Unix seconds at start, the `created` field of model lists. */
  readonly created: number;
  stats(): FakeInferenceStats;
  /** The model id the server lists, or none once unloaded. */
  servedModel(): string | undefined;
  /** While loading: listening (or not) but not ready to serve. */
  notReady(): boolean;
  /** The weights failed to load (`failed-load`): not ready, and never will be. */
  loadFailed(): boolean;
  /** This kind's not-ready answer for anything but liveness and metrics. */
  unavailable(): Reply;
  /** This kind's answer for a model it does not serve. */
  modelNotFound(model: string): Reply;
  /** This kind's answer for an unknown path. */
  notFound(): Reply;
  /** One completion through the current fault mode; nothing is returned when it was answered (or held). */
  infer(res: ServerResponse, c: Completion): Promise<Reply | undefined>;
}

/** One imitated server kind: its endpoints and the exact error bodies and status codes it answers with. */
export interface KindApi {
  /** Whether the port stays closed while the model loads (vLLM, TGI, generic) rather than answering not-ready. */
  readonly closedWhileLoading: boolean;
  /** Returns the reply, or nothing when the reply was sent (or deliberately withheld) by `infer`. */
  route(e: Engine, method: string, path: string, body: Body, res: ServerResponse): Promise<Reply | undefined>;
  unavailable(e: Engine): Reply;
  modelNotFound(model: string): Reply;
  internalError(): Reply;
  badRequest(message: string): Reply;
  notFound(): Reply;
}

/** Text of a prompt field: a string, or the strings of an array joined by spaces. */
export function str(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(str).join(" ");
  return "";
}

export function wantedTokens(v: unknown): number {
  return typeof v === "number" && v > 0 ? Math.min(Math.floor(v), MAX_TOKENS) : DEFAULT_TOKENS;
}

/** Prometheus text as Python's prometheus_client writes it (vLLM): floats with a decimal point. */
export function prom(name: string, type: "gauge" | "counter", help: string, labels: string, value: number): string {
  const v = Number.isInteger(value) ? value.toFixed(1) : String(value);
  return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name}${labels} ${v}\n`;
}

/** Prometheus text exposition's content type, which every kind's `/metrics` answers with. */
export function metricsReply(text: string): Reply {
  return { status: 200, body: text, type: "text/plain; version=0.0.4; charset=utf-8" };
}
