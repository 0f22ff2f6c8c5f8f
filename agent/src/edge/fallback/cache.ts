/**
 * The verified-answer cache in Redis: answers an operator vouched for (`llm-ha cache
 * import`), served to every tenant, and — only for a tenant that opted in — the fleet's answers
 * to that tenant's own replayed requests, served to that tenant alone (the tenant is part of the
 * key). Keyed by the complete normalized request.
 * Bounded like an LRU (max entries and max bytes; the least recently served goes first) and
 * every entry has a TTL.
 *
 * | key (under `llmha:<cluster>:fallback:cache:`) | type | holds |
 * |---|---|---|
 * | `e:<sha256>` | string | the entry (JSON), `PX` = its TTL |
 * | `lru`        | zset   | sha256 → epoch µs (Redis `TIME`) of the last hit or write |
 * | `size`       | hash   | sha256 → bytes of the entry |
 * | `bytes`      | string | sum of `size` |
 */
import type { Redis } from "ioredis";
import { callFunction } from "../../fleet/redis/functions";
import { fallbackLibrary } from "../../fleet/redis/fallback-functions";
import { normalizeRequest, requestKey, type NormalizedRequest, type RequestKind } from "./normalize";

export interface CacheEntry {
  key: string;
  kind: RequestKind;
  model: string;
  /** The normalized request (what `list` shows). */
  request: NormalizedRequest;
  /** The answer text: a chat message's content or a completion's text. */
  answer: string;
  finishReason: string;
  /** `import` (an operator) or `replay` (the fleet answered a queued request). */
  source: "import" | "replay";
  /** The tenant only this entry is served to (a replayed result it opted to cache); absent: every tenant (operator-imported). */
  scope?: string;
  createdAt: number;
  ttlS: number;
}

export interface CacheLimits {
  maxEntries: number;
  maxBytes: number;
  /** TTL of an entry that names none. */
  defaultTtlS: number;
}

export const DEFAULT_CACHE_LIMITS: Readonly<CacheLimits> = Object.freeze({ maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, defaultTtlS: 7 * 24 * 3600 });




/** The cache's functions (agent/src/fleet/redis/fallback-functions.ts), called with `FCALL`. */
class CacheFunctions {
  constructor(private readonly redis: Redis) {}
  private call(name: string, args: (string | number)[]): Promise<number> {
    return callFunction(this.redis, fallbackLibrary(), name, [], args).then(Number);
  }
  put(...args: (string | number)[]): Promise<number> {
    return this.call("cachePut", args);
  }
  rm(...args: string[]): Promise<number> {
    return this.call("cacheRm", args);
  }
  touch(lru: string, h: string): Promise<number> {
    return this.call("cacheTouch", [lru, h]);
  }
}

export class CacheImportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CacheImportError";
  }
}

/** The cache over one ioredis client (the fallback's own). */
export class VerifiedCache {
  readonly prefix: string;
  private readonly r: Redis;
  private readonly fns: CacheFunctions;

  /**
   * `reader` (the fallback, whose Redis role may not write the byte count): a hit still counts
   * as a use for the LRU, but an expired entry's bookkeeping is left to the writers (the next
   * `put` evicts it as the least recently used); `writer` (the operator's `llm-ha cache`) drops it.
   */
  constructor(redis: Redis, cluster: string, readonly limits: CacheLimits = DEFAULT_CACHE_LIMITS, private readonly access: "writer" | "reader" = "writer") {
    this.prefix = `llmha:${cluster}:fallback:cache:`;
    this.r = redis;
    this.fns = new CacheFunctions(redis);
  }

  /** The entry for a normalized request in a scope (a tenant, or null: the operator's), or null; a hit counts as a use for the LRU. */
  async get(n: NormalizedRequest, scope: string | null = null): Promise<CacheEntry | null> {
    const h = requestKey(n, scope);
    const raw = await this.r.get(`${this.prefix}e:${h}`);
    if (raw === null) {
      // Expired: drop its bookkeeping so it stops counting toward the bounds.
      if (this.access === "writer" && (await this.r.zscore(`${this.prefix}lru`, h)) !== null) await this.fns.rm(this.prefix, h);
      return null;
    }
    await this.fns.touch(`${this.prefix}lru`, h);
    return JSON.parse(raw) as CacheEntry;
  }

  /** Stores an answer; returns its key and how many entries were evicted to make room. */
  async put(n: NormalizedRequest, answer: string, opts: { source: CacheEntry["source"]; ttlS?: number; finishReason?: string; scope?: string }): Promise<{ key: string; evicted: number }> {
    const key = requestKey(n, opts.scope ?? null);
    const ttlS = opts.ttlS ?? this.limits.defaultTtlS;
    if (!Number.isFinite(ttlS) || ttlS <= 0) throw new CacheImportError(`ttl ${ttlS} must be a positive number of seconds`);
    const entry: CacheEntry = {
      key, kind: n.kind, model: n.model, request: n, answer, finishReason: opts.finishReason ?? "stop",
      source: opts.source, createdAt: Date.now(), ttlS, ...(opts.scope !== undefined ? { scope: opts.scope } : {}),
    };
    const value = JSON.stringify(entry);
    if (Buffer.byteLength(value) > this.limits.maxBytes) throw new CacheImportError(`entry of ${Buffer.byteLength(value)} B is over the cache's ${this.limits.maxBytes} B`);
    const evicted = await this.fns.put(this.prefix, key, value, Math.round(ttlS * 1000), 0, this.limits.maxEntries, this.limits.maxBytes);
    return { key, evicted };
  }

  /** Removes entries by full key or unique prefix (≥ 8 hex digits); returns the keys removed. */
  async rm(keys: string[]): Promise<string[]> {
    const all = await this.r.zrange(`${this.prefix}lru`, "0", "-1");
    const hit: string[] = [];
    for (const k of keys) {
      const m = all.filter((h) => h === k || (k.length >= 8 && h.startsWith(k)));
      if (m.length === 1) hit.push(m[0]);
    }
    if (hit.length) await this.fns.rm(this.prefix, ...hit);
    return hit;
  }

  /** Entries, most recently used first, with the TTL left. Expired ones are cleaned up. */
  async list(limit = 1000): Promise<Array<CacheEntry & { lastUsedAt: number; ttlLeftS: number; bytes: number }>> {
    const ids = await this.r.zrevrange(`${this.prefix}lru`, 0, limit - 1, "WITHSCORES");
    const out: Array<CacheEntry & { lastUsedAt: number; ttlLeftS: number; bytes: number }> = [];
    const gone: string[] = [];
    for (let i = 0; i < ids.length; i += 2) {
      const h = ids[i];
      const p = this.r.pipeline();
      p.get(`${this.prefix}e:${h}`);
      p.pttl(`${this.prefix}e:${h}`);
      const [[, raw], [, pttl]] = (await p.exec()) as [[Error | null, string | null], [Error | null, number]];
      if (raw === null) {
        gone.push(h);
        continue;
      }
      const e = JSON.parse(raw) as CacheEntry;
      out.push({ ...e, lastUsedAt: Math.floor(Number(ids[i + 1]) / 1000), ttlLeftS: Math.max(0, Math.round(pttl / 1000)), bytes: Buffer.byteLength(raw) });
    }
    if (gone.length) await this.fns.rm(this.prefix, ...gone);
    return out;
  }

  /** Entry count and bytes held (what the bounds apply to). */
  async stats(): Promise<{ entries: number; bytes: number }> {
    const [entries, bytes] = await Promise.all([this.r.zcard(`${this.prefix}lru`), this.r.get(`${this.prefix}bytes`)]);
    return { entries, bytes: Number(bytes ?? 0) };
  }

  /**
   * Imports JSON Lines: one `{"request": {...OpenAI body...}, "answer": "text", "ttlSeconds"?: N}`
   * per line (or `"response"`: an OpenAI response whose first choice is the answer).
   * `"kind"` is `chat` (default when the request has `messages`) or `completions`.
   * Stops at the first bad line, naming it; nothing after it is imported.
   */
  async importJsonl(text: string): Promise<{ imported: number; evicted: number; keys: string[] }> {
    const parsed: Array<{ n: NormalizedRequest; answer: string; ttlS?: number; finish?: string }> = [];
    const lines = text.split("\n");
    lines.forEach((line, i) => {
      if (line.trim() === "" || line.trimStart().startsWith("//")) return;
      const where = `line ${i + 1}`;
      let o: unknown;
      try {
        o = JSON.parse(line);
      } catch (err) {
        throw new CacheImportError(`${where}: not JSON (${(err as Error).message})`);
      }
      parsed.push(parseImportLine(o, where));
    });
    // All lines are checked before the first write.
    let evicted = 0;
    const keys: string[] = [];
    for (const p of parsed) {
      const r = await this.put(p.n, p.answer, { source: "import", ttlS: p.ttlS, finishReason: p.finish });
      evicted += r.evicted;
      keys.push(r.key);
    }
    return { imported: parsed.length, evicted, keys };
  }
}

function parseImportLine(o: unknown, where: string): { n: NormalizedRequest; answer: string; ttlS?: number; finish?: string } {
  if (typeof o !== "object" || o === null || Array.isArray(o)) throw new CacheImportError(`${where}: must be a JSON object`);
  const line = o as Record<string, unknown>;
  const req = line.request as Record<string, unknown> | undefined;
  if (typeof req !== "object" || req === null) throw new CacheImportError(`${where}: \`request\` (an OpenAI request body) is required`);
  const kind: RequestKind = line.kind === "completions" || (line.kind === undefined && req.prompt !== undefined && req.messages === undefined) ? "completions" : "chat";
  let n: NormalizedRequest;
  try {
    n = normalizeRequest(kind, req);
  } catch (err) {
    throw new CacheImportError(`${where}: ${(err as Error).message}`);
  }
  let answer: unknown = line.answer;
  let finish: string | undefined;
  if (answer === undefined && typeof line.response === "object" && line.response !== null) {
    const choice = ((line.response as { choices?: unknown[] }).choices ?? [])[0] as { message?: { content?: unknown }; text?: unknown; finish_reason?: unknown } | undefined;
    answer = kind === "chat" ? choice?.message?.content : choice?.text;
    if (typeof choice?.finish_reason === "string") finish = choice.finish_reason;
  }
  if (typeof answer !== "string") throw new CacheImportError(`${where}: \`answer\` (a string) or \`response\` with a first choice is required`);
  const ttl = line.ttlSeconds ?? line.ttl_s;
  if (ttl !== undefined && (typeof ttl !== "number" || !(ttl > 0))) throw new CacheImportError(`${where}: \`ttlSeconds\` must be a positive number`);
  return { n, answer, ttlS: ttl as number | undefined, finish };
}
