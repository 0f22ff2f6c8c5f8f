/**
 * The cache key of a request: the complete body in a canonical form (kind, model, messages or
 * prompt, every other field). Whitespace inside text, key order and the fields that do not
 * change the output (`stream`, `stream_options`, `user`, `metadata`, `store`) do not matter. Two requests with the same key get the same verified answer.
 */
import { createHash } from "node:crypto";

export type RequestKind = "chat" | "completions";

export class BadRequestError extends Error {
  constructor(message: string, readonly status = 400, readonly code = "invalid_request") {
    super(message);
    this.name = "BadRequestError";
  }
}

/**
 * Fields that never change what the model writes: left out of the key. Every other field is in
 * it, in canonical form — also one this code does not know (`guided_choice`, a vendor's
 * extension): an unknown field is part of the key, never ignored, so no request can be answered
 * with (or store its answer as) the answer to a different request.
 */
const IGNORED_FIELDS = new Set(["model", "messages", "prompt", "stream", "stream_options", "user", "metadata", "store"]);

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export interface NormalizedRequest {
  kind: RequestKind;
  model: string;
  /** Chat: `[{role, content, name?}]`; completions: the prompt(s). */
  input: Json;
  params: Record<string, Json>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Runs of whitespace become one space; leading and trailing whitespace goes. */
export function normalizeText(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

function textOf(content: unknown, where: string): Json {
  if (typeof content === "string") return normalizeText(content);
  if (content === null || content === undefined) return null;
  if (Array.isArray(content)) {
    // Content parts: plain text parts are joined (a single text part equals a string).
    const parts = content.map((p, i) => {
      if (!isObject(p)) throw new BadRequestError(`${where}[${i}] must be an object`);
      if (p.type === "text" && typeof p.text === "string") return normalizeText(p.text);
      return canonical(p);
    });
    if (parts.every((p) => typeof p === "string")) return normalizeText(parts.join(" "));
    return parts;
  }
  throw new BadRequestError(`${where} must be a string or an array of parts`);
}

/** A JSON value with object keys sorted (recursively) and `undefined` dropped. */
export function canonical(v: unknown): Json {
  if (Array.isArray(v)) return v.map(canonical);
  if (isObject(v)) {
    const out: Record<string, Json> = {};
    for (const k of Object.keys(v).sort()) {
      if (v[k] !== undefined) out[k] = canonical(v[k]);
    }
    return out;
  }
  if (typeof v === "string" || typeof v === "number" || typeof v === "boolean" || v === null) return v;
  return null;
}

/** Checks the body of `/v1/chat/completions` or `/v1/completions` and returns its canonical form. */
export function normalizeRequest(kind: RequestKind, body: unknown): NormalizedRequest {
  if (!isObject(body)) throw new BadRequestError("the request body must be a JSON object");
  if (typeof body.model !== "string" || body.model.length === 0) throw new BadRequestError("`model` is required");
  let input: Json;
  if (kind === "chat") {
    if (!Array.isArray(body.messages) || body.messages.length === 0) throw new BadRequestError("`messages` must be a non-empty array");
    input = body.messages.map((m, i) => {
      if (!isObject(m) || typeof m.role !== "string") throw new BadRequestError(`messages[${i}] needs a string \`role\``);
      const out: Record<string, Json> = { role: m.role, content: textOf(m.content, `messages[${i}].content`) };
      for (const k of Object.keys(m)) if (k !== "role" && k !== "content" && m[k] !== undefined) out[k] = canonical(m[k]);
      return out;
    });
  } else {
    const p = body.prompt;
    if (typeof p === "string") input = normalizeText(p);
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === "string")) input = p.map((x) => normalizeText(x as string));
    else throw new BadRequestError("`prompt` must be a string or an array of strings");
  }
  const params: Record<string, Json> = {};
  for (const k of Object.keys(body)) {
    const v = body[k];
    if (!IGNORED_FIELDS.has(k) && v !== undefined && v !== null) params[k] = canonical(v);
  }
  // One name for the output budget.
  if (params.max_completion_tokens !== undefined && params.max_tokens === undefined) {
    params.max_tokens = params.max_completion_tokens;
  }
  delete params.max_completion_tokens;
  if (params.n === 1) delete params.n;
  return { kind, model: body.model, input, params };
}

/**
 * Hex SHA-256 of the canonical JSON of a normalized request: the cache key. `scope` = a tenant
 * for the answers only that tenant is served (its own replayed results); null for the
 * operator's verified answers, served to every tenant.
 */
export function requestKey(n: NormalizedRequest, scope: string | null = null): string {
  const c = canonical(n);
  return createHash("sha256").update(JSON.stringify(scope === null ? c : { scope, request: c })).digest("hex");
}
