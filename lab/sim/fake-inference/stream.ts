/**
 * A streamed completion on the wire: server-sent events as OpenAI-compatible servers send them
 * (`content-type: text/event-stream`, one `data: {json}` event a chunk, a blank line after each,
 * `data: [DONE]` last), one token chunk every `tokenMs`, stopping at once when the client goes.
 */
import type { ServerResponse } from "node:http";
import { sleep } from "../../../agent/src/util/net";
import type { StreamFormat } from "./kind";

/** The text of one generated token. */
export const TOKEN_TEXT = " ok";

/** One server-sent event carrying a JSON chunk. */
export function sseEvent(chunk: unknown): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

/** The event that ends an OpenAI stream. */
export const SSE_DONE = "data: [DONE]\n\n";

/**
 * Sends `tokens` tokens in `f`'s format, the first at once and the others `tokenMs` apart;
 * a wedged engine holds the next token (`hold`); returns true when the whole stream went out, false when the client left first (`gone`).
 */
export async function sendStream(
  res: ServerResponse,
  f: StreamFormat,
  tokens: number,
  prompt: number,
  tokenMs: number,
  gone: () => boolean,
  /** Resolves when the engine may produce the next token (a wedge holds it). */
  hold: () => Promise<void> = async () => undefined,
  /** One text for every token, or each token's own (a seeded greedy answer). */
  text: string | readonly string[] = TOKEN_TEXT,
): Promise<boolean> {
  if (gone() || res.destroyed) return false;
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  for (const c of f.opening()) res.write(sseEvent(c));
  for (let i = 0; i < tokens; i++) {
    if (i > 0) await sleep(tokenMs);
    await hold();
    if (gone() || res.destroyed) return false;
    res.write(sseEvent(f.token(typeof text === "string" ? text : text[i])));
  }
  res.end(f.closing(tokens, prompt).map(sseEvent).join("") + SSE_DONE);
  return true;
}
