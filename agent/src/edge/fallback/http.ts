/**
 * The HTTP plumbing of `llm-ha fallback`'s API: OpenAI-style errors, the request body read
 * within bounds (a refused body still gets its status, complete), JSON depth, the tenant.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { TENANT_HEADER, TENANT_RE } from "../../../../contracts/edge";
import { ANONYMOUS_TENANT } from "./results";

export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly code: string, readonly headers: Record<string, string> = {}) {
    super(message);
    this.name = "HttpError";
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function errorBody(message: string, code: string, type = "invalid_request_error"): unknown {
  return { error: { message, type, code, param: null } };
}

/** How much of a refused body is read and thrown away after the answer, at most. */
export interface DrainBounds {
  bytes: number;
  ms: number;
}

export const DEFAULT_DRAIN: Readonly<DrainBounds> = Object.freeze({ bytes: 64 * 1024 * 1024, ms: 15_000 });

/** The body was over the limit: answered 413 by `answerAndDrain`, the rest still to read. */
export class BodyTooLargeError extends HttpError {
  constructor(message: string) {
    super(413, message, "body_too_large");
    this.name = "BodyTooLargeError";
  }
}

/**
 * Reads the body up to `limit` bytes. Over it, rejects with `BodyTooLargeError` and leaves the
 * stream flowing (nothing is destroyed here: closing a socket the client still writes to makes
 * the kernel answer its data with a reset, and the client never reads the 413).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) return Promise.reject(new BodyTooLargeError(`request body of ${declared} B is over the limit of ${limit} B`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    const onData = (c: Buffer): void => {
      n += c.length;
      if (n > limit) {
        req.off("data", onData).off("end", onEnd).off("error", onError);
        chunks.length = 0;
        reject(new BodyTooLargeError(`request body is over the limit of ${limit} B`));
        return;
      }
      chunks.push(c);
    };
    const onEnd = (): void => resolve(Buffer.concat(chunks));
    const onError = (err: Error): void => reject(err);
    req.on("data", onData).on("end", onEnd).on("error", onError);
  });
}

/**
 * Sends a refusal whole at once (headers, body, `connection: close`), then reads and discards
 * what the client still sends, within `bounds`, and only then finishes the response: the
 * connection closes after the client's last byte, so every client (curl, `node:http`, the
 * SDK) reads the status. Past the bounds the socket is cut (the answer went out long before).
 */
export function answerAndDrain(req: IncomingMessage, res: ServerResponse, status: number, body: unknown, headers: Record<string, string>, bounds: DrainBounds = DEFAULT_DRAIN): void {
  const text = JSON.stringify(body);
  if (!res.headersSent) res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text), connection: "close" });
  res.write(text);
  let seen = 0;
  const done = (cut: boolean): void => {
    clearTimeout(timer);
    req.off("data", onData).off("end", onEnd).off("close", onEnd);
    if (!res.writableEnded) res.end();
    if (cut) req.socket.destroy();
  };
  const onData = (c: Buffer): void => {
    seen += c.length;
    if (seen > bounds.bytes) done(true);
  };
  const onEnd = (): void => done(false);
  const timer = setTimeout(() => done(true), bounds.ms);
  if (req.readableEnded) return done(false);
  req.on("data", onData).on("end", onEnd).on("close", onEnd);
  req.resume();
}

/** True when the JSON text nests arrays/objects deeper than `max` (checked before parsing: deep input costs stack). */
export function jsonTooDeep(raw: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * The tenant a request belongs to: what the L1 proxy set in `x-llmha-tenant` (it authenticates
 * the client and removes any such header a client sends; the fallback listens on loopback
 * behind it). Without the header (no edge in front) every request is the anonymous tenant's.
 */
export function tenantOf(req: IncomingMessage): string {
  const v = req.headers[TENANT_HEADER];
  if (v === undefined) return ANONYMOUS_TENANT;
  if (typeof v !== "string" || !TENANT_RE.test(v)) throw new HttpError(400, `${TENANT_HEADER} is not a tenant id`, "invalid_tenant");
  return v;
}
