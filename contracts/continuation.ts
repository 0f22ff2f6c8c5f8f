/**
 * Stream continuation at the L1 tier (`llm-ha continue`, docs/continuation.md): how each
 * inference server kind can carry on an answer another server started. The relay reads it to
 * build the second request, the fake servers to imitate each kind, the docs to say what a
 * client sees per kind.
 */

/**
 * How long the relay keeps an idle connection to HAProxy's continuation listener, and how long
 * the listener keeps it (`timeout http-keep-alive`): longer there, so the relay is always the
 * one to close it, never HAProxy under a request the relay is sending on it.
 */
export const CONTINUE_IDLE = Object.freeze({ relayMs: 20_000, listenerMs: 30_000 });

/** Server kinds the relay knows (the agent's `LLMHA_INFERENCE_KIND` values plus SGLang). */
export const CONTINUATION_KINDS = ["vllm", "sglang", "tgi", "triton", "llamacpp", "openai"] as const;
export type ContinuationKind = (typeof CONTINUATION_KINDS)[number];

/**
 * How a kind carries on a chat answer:
 * - `continue`: the partial assistant message is appended and the server continues it
 *   (the fields of `chatFields` tell it not to open a new turn);
 * - `restart`: the server cannot; a greedy seeded request (temperature 0 + seed) is run again
 *   and the delivered prefix skipped after checking it matches; any other ends with an error event.
 * Completions always continue: the prompt plus the delivered text is a plain prompt for every kind.
 */
export interface KindContinuation {
  chat: "continue" | "restart";
  /** Request fields that make the server continue the final assistant message. */
  chatFields: Readonly<Record<string, boolean>>;
  /** Where the behaviour is documented (checked for docs/continuation.md). */
  source: string;
}

export const KIND_CONTINUATION: Readonly<Record<ContinuationKind, KindContinuation>> = Object.freeze({
  // vLLM refuses continue_final_message together with add_generation_prompt (which defaults to true).
  vllm: { chat: "continue", chatFields: { continue_final_message: true, add_generation_prompt: false }, source: "vLLM OpenAI server, extra chat parameters" },
  sglang: { chat: "continue", chatFields: { continue_final_message: true }, source: "sgl-project/sglang PR #4226 (2025-03)" },
  tgi: { chat: "continue", chatFields: { continue_final_message: true }, source: "huggingface/text-generation-inference PR #2733 (2024-11)" },
  // llama-server prefills a trailing assistant message by default (PR #13174) and takes vLLM's flags since PR #23012.
  llamacpp: { chat: "continue", chatFields: { continue_final_message: true, add_generation_prompt: false }, source: "ggml-org/llama.cpp PRs #13174, #23012" },
  triton: { chat: "restart", chatFields: {}, source: "Triton's OpenAI frontend (beta) documents no assistant prefill" },
  openai: { chat: "restart", chatFields: {}, source: "a generic OpenAI-compatible server: no continuation parameter is part of the API" },
});

/** A request body as JSON (the OpenAI chat or completions request). */
export type ContinuationBody = Record<string, unknown>;

/** Whether a request's output is deterministic: greedy with a seed. */
export function isGreedySeeded(body: ContinuationBody): boolean {
  return body.temperature === 0 && typeof body.seed === "number" && Number.isInteger(body.seed);
}

/**
 * The second request for an answer cut after `delivered` (its text, and its tokens: the servers
 * stream one token a chunk) on servers of `kind`: `continue` (the delivered text appended, the
 * kind's continuation fields, `max_tokens` less what was delivered), `restart` (a greedy seeded
 * request on a kind that cannot continue a chat: run again), or null (it cannot be carried on).
 * The edge's relay sends it; the agent's continuation check sends it to its own server, so an
 * engine that stops taking it is seen before a client's stream needs it.
 */
export function continuationRequest(
  route: "chat" | "completions",
  kind: ContinuationKind,
  body: ContinuationBody,
  delivered: { text: string; tokens: number },
): { how: "continue" | "restart"; body: ContinuationBody } | null {
  const k = KIND_CONTINUATION[kind];
  if (route === "chat" && k.chat === "restart") return isGreedySeeded(body) ? { how: "restart", body } : null;
  const out: ContinuationBody = { ...body };
  const maxKey = route === "chat" && body.max_completion_tokens !== undefined ? "max_completion_tokens" : "max_tokens";
  const max = body[maxKey];
  if (typeof max === "number") out[maxKey] = Math.max(1, max - delivered.tokens);
  if (route === "completions") {
    if (typeof body.prompt !== "string") return isGreedySeeded(body) ? { how: "restart", body } : null;
    out.prompt = body.prompt + delivered.text;
    // `echo` would send the prompt again, delivered text included.
    delete out.echo;
  } else {
    const messages = Array.isArray(body.messages) ? body.messages : [];
    out.messages = [...messages, { role: "assistant", content: delivered.text }];
    Object.assign(out, k.chatFields);
  }
  return { how: "continue", body: out };
}

/** Outcomes of a request the relay watched, the `outcome` label of its metrics. */
export const CONTINUATION_OUTCOMES = [
  /** A stream cut after output, carried on by a second server. */
  "continued",
  /** A greedy seeded stream run again on a kind that cannot continue, the delivered prefix skipped. */
  "restarted",
  /** A request whose server died before answering, sent once more. */
  "retried",
  /** The second server failed too: the query-of-death guard ended it with an error. */
  "failed_twice",
  /** Cut while emitting tool calls: not continued. */
  "tool_calls",
  /** Cut on a kind that cannot continue, and not greedy with a seed. */
  "not_continuable",
  /** The restarted answer did not begin with what was delivered. */
  "mismatch",
  /** The second request was refused (no server left, an error status). */
  "failed",
] as const;
export type ContinuationOutcome = (typeof CONTINUATION_OUTCOMES)[number];

/** The most relay processes one pod runs (`LLMHA_CONTINUE_WORKERS`). */
export const MAX_CONTINUE_WORKERS = 16;

/**
 * Where relay worker `index` of `workers` listens (`LLMHA_CONTINUE_WORKERS`), as the relay and
 * HAProxy's generator both name it: with one worker the configured address itself; with several,
 * a listener each, so HAProxy balances the streams over them by its own count (`leastconn`)
 * and checks each. A Unix socket `relay.sock` becomes `relay-0.sock`, `relay-1.sock`, …; a TCP
 * port P becomes P, P + 1, ….
 */
export function relayWorkerSocket(path: string, index: number, workers: number): string {
  if (workers <= 1) return path;
  const dot = path.lastIndexOf(".");
  return dot > path.lastIndexOf("/") ? `${path.slice(0, dot)}-${index}${path.slice(dot)}` : `${path}-${index}`;
}

export function relayWorkerPort(port: number, index: number, workers: number): number {
  return workers <= 1 ? port : port + index;
}

/** The same for an address in HAProxy's syntax: `unix@/path` or `host:port`. */
export function relayWorkerAddress(address: string, index: number, workers: number): string {
  if (address.startsWith("unix@")) return `unix@${relayWorkerSocket(address.slice(5), index, workers)}`;
  const colon = address.lastIndexOf(":");
  return `${address.slice(0, colon)}:${relayWorkerPort(Number(address.slice(colon + 1)), index, workers)}`;
}
