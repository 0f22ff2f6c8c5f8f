/**
 * What the relay keeps of one answer and how it carries it on: the server-sent events split as
 * they arrive, the delivered text (the only thing that grows with the answer), the second
 * request's body, and the second stream's chunks rewritten so the client sees one answer.
 * Pure: no I/O, no clock.
 */
import type { ContinuationKind } from "../../../../contracts/continuation";
import { continuationRequest } from "../../../../contracts/continuation";

export type Body = Record<string, unknown>;
export type Route = "chat" | "completions";

/** Splits a byte stream into server-sent events (`…\n\n`); keeps only the unfinished tail. */
export class SseSplitter {
  private tail = "";

  /** The complete events in `chunk` (each with its blank line), in order. */
  push(chunk: string): string[] {
    const text = this.tail + chunk;
    const out: string[] = [];
    let from = 0;
    for (;;) {
      const end = text.indexOf("\n\n", from);
      if (end < 0) break;
      out.push(text.slice(from, end + 2));
      from = end + 2;
    }
    this.tail = text.slice(from);
    return out;
  }
}

/** The JSON of an event's `data:` line, `"[DONE]"`, or null (a comment, another field). */
export function eventData(event: string): Body | "[DONE]" | null {
  // The servers put `data:` first; a comment or another field before it is rare.
  const at = event.startsWith("data:") ? 0 : event.indexOf("\ndata:") + 1;
  if (at === 0 && !event.startsWith("data:")) return null;
  const end = event.indexOf("\n", at);
  const data = event.slice(at + 5, end < 0 ? undefined : end).trim();
  if (data === "[DONE]") return "[DONE]";
  try {
    const v: unknown = JSON.parse(data);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Body) : null;
  } catch {
    return null;
  }
}

function firstChoice(chunk: Body): Body | null {
  const c = Array.isArray(chunk.choices) ? (chunk.choices[0] as unknown) : undefined;
  return typeof c === "object" && c !== null ? (c as Body) : null;
}

/** The text a chunk adds to the answer (chat `delta.content`, completions `text`). */
export function chunkText(route: Route, chunk: Body): string {
  const c = firstChoice(chunk);
  if (!c) return "";
  const v = route === "chat" ? (c.delta as Body | undefined)?.content : c.text;
  return typeof v === "string" ? v : "";
}

/** The answer so far, as the client has it. */
export class Delivered {
  text = "";
  /** Chunks that carried text: the servers stream one token a chunk, so this counts tokens. */
  tokens = 0;
  toolCalls = false;
  finished = false;
  done = false;
  /** The first server's `id`, `created` and `model`, which every later chunk carries. */
  head: Body | null = null;

  constructor(readonly route: Route) {}

  /** Records one chunk the client was sent. */
  add(chunk: Body): void {
    this.head ??= { id: chunk.id, created: chunk.created, model: chunk.model };
    const c = firstChoice(chunk);
    const delta = c?.delta as Body | undefined;
    if (delta && (delta.tool_calls !== undefined || delta.function_call !== undefined)) this.toolCalls = true;
    if (c && c.finish_reason !== null && c.finish_reason !== undefined) this.finished = true;
    const t = chunkText(this.route, chunk);
    if (t) {
      this.text += t;
      this.tokens++;
    }
  }
}

export { isGreedySeeded } from "../../../../contracts/continuation";

/** How the second request carries on, or why it cannot. */
export type Plan = { how: "continue" | "restart"; body: Body } | { how: "none"; outcome: "tool_calls" | "not_continuable" };

/** The second request for an answer cut after `d` was delivered, on servers of `kind` (the shape: contracts/continuation.ts, shared with the agent's continuation check). */
export function planContinuation(route: Route, kind: ContinuationKind, body: Body, d: Delivered): Plan {
  if (d.toolCalls) return { how: "none", outcome: "tool_calls" };
  return continuationRequest(route, kind, body, d) ?? { how: "none", outcome: "not_continuable" };
}

/**
 * Rewrites the chunks of the second stream into the first: its `id`, `created` and `model`;
 * the second chat opening (the role again) dropped; a restart's delivered prefix skipped after
 * checking it matches; usage for the whole answer. `feed` returns the events to send.
 */
export class Splicer {
  private skipped = 0;
  mismatch = false;
  /** What the client had when the first server failed (the delivered answer grows on as this one is sent). */
  private readonly prefix: string;
  private readonly tokens: number;

  /** A restart is checked only once it has given back the whole delivered prefix. */
  get caughtUp(): boolean {
    return this.how === "continue" || this.skipped >= this.prefix.length;
  }

  constructor(
    private readonly d: Delivered,
    private readonly how: "continue" | "restart",
  ) {
    this.prefix = d.text;
    this.tokens = d.tokens;
  }

  /** The event to send for one chunk of the second stream, or null to drop it. */
  feed(chunk: Body): Body | null {
    Object.assign(chunk, this.d.head);
    const c = firstChoice(chunk);
    const route = this.d.route;
    if (c === null) {
      // The usage chunk: a continuation's counts the delivered tokens as prompt.
      const u = chunk.usage as Body | undefined;
      if (u && this.how === "continue" && typeof u.prompt_tokens === "number" && typeof u.completion_tokens === "number") {
        const prompt = Math.max(0, u.prompt_tokens - this.tokens);
        const completion = u.completion_tokens + this.tokens;
        chunk.usage = { ...u, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
      }
      return chunk;
    }
    const text = chunkText(route, chunk);
    const delta = c.delta as Body | undefined;
    if (route === "chat" && delta && delta.role !== undefined && !text && c.finish_reason == null) return null;
    if (this.how === "restart" && this.skipped < this.prefix.length) {
      const want = this.prefix.slice(this.skipped, this.skipped + text.length);
      const common = Math.min(text.length, this.prefix.length - this.skipped);
      if (text.slice(0, common) !== want.slice(0, common)) {
        this.mismatch = true;
        return null;
      }
      this.skipped += common;
      const rest = text.slice(common);
      if (!rest && c.finish_reason == null) return null;
      if (route === "chat" && delta) delta.content = rest;
      else c.text = rest;
    }
    return chunk;
  }
}

/** An error event an OpenAI client raises as an API error. */
export function errorEvent(message: string, code: string): string {
  return `data: ${JSON.stringify({ error: { message, type: "server_error", param: null, code } })}\n\n`;
}
