/**
 * HTTP plumbing of the fake inference server, independent of the kind it imitates: the `Reply`
 * a handler returns and how it is sent, request body reading, and opening and closing a listener
 * the way a starting or crashing process would.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { FakeInferenceSettingsError } from "./settings";

const MAX_BODY_BYTES = 1 << 20;

/** An answer still to be sent: handlers return one instead of writing, so each kind stays a pure mapping. */
export interface Reply {
  status: number;
  body?: string;
  type?: string;
}

export const json = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), type: "application/json" });
export const empty = (status: number): Reply => ({ status });

/** A 200 whose body is not JSON at all: the start of an answer cut off mid-object. */
export function garbageJson(): Reply {
  return { status: 200, body: '{"object":"list","data":[{"id":', type: "application/json" };
}

export function send(res: ServerResponse, r: Reply): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = { "content-length": Buffer.byteLength(r.body ?? "") };
  if (r.type) headers["content-type"] = r.type;
  res.writeHead(r.status, headers);
  res.end(r.body ?? "");
}

export async function readBody(req: IncomingMessage): Promise<string> {
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

export function listen(server: Server, port: number, host = "127.0.0.1"): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Stops accepting and drops every open connection at once, as a dying process would. */
export function shut(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** vLLM's check: scheme `Bearer` (any case), then the rest of the header equal to the key, compared in constant time. */
export function bearerMatches(header: string | undefined, key: string): boolean {
  if (!header) return false;
  const space = header.indexOf(" ");
  if (space < 0 || header.slice(0, space).toLowerCase() !== "bearer") return false;
  const digest = (v: string): Buffer => createHash("sha256").update(v, "utf8").digest();
  return timingSafeEqual(digest(header.slice(space + 1)), digest(key));
}
