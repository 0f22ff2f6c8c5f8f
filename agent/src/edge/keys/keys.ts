/**
 * Client API keys of the public edge, kept in Redis by hash only (`edge:keys`): a new key
 * is shown once to the operator who made it and never stored in clear. `llm-ha edge-sync`
 * copies the hashes into each L1 proxy's HAProxy map; HAProxy hashes what a client sends
 * and looks it up. Keys are 256 random bits, so an unsalted SHA-256 is as strong as the
 * key itself (what API-key stores commonly do) and HAProxy can compute it per request.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { edgeMapValue, type EdgeKeyEntry } from "../../../../contracts/haproxy-edge";
import { TENANT_RE } from "../../../../contracts/edge";
import type { RedisKeys } from "../../fleet/redis/keys";

/** A key's record in Redis (without the key). */
export interface StoredKey extends EdgeKeyEntry {
  /** SHA-256 hex of the key. */
  hash: string;
  /** Epoch ms. */
  createdAt: number;
  note: string;
  /**
   * Epoch ms after which the key is refused (`llm-ha edge-sync` drops it from the map): set on
   * the old key by a rotation, to the overlap its clients were given to move over. Absent: no expiry.
   */
  expiresAt?: number;
}

/** How long a rotated-out key keeps working by default: a day for its clients to move to the new one. */
export const DEFAULT_ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

/** Whether a key has expired at `now`. */
export function keyExpired(k: Pick<StoredKey, "expiresAt">, now = Date.now()): boolean {
  return k.expiresAt !== undefined && k.expiresAt <= now;
}

export class KeyStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeyStoreError";
  }
}

/** Prefix of every key llm-ha makes: easy to spot in a leaked file or a secret scanner. */
export const KEY_PREFIX = "sk-llmha-";

export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** A new key: `sk-llmha-<id>-<43 characters of 256 random bits>`. */
export function newKey(): { id: string; key: string } {
  const id = randomBytes(5).toString("hex");
  return { id, key: `${KEY_PREFIX}${id}-${randomBytes(32).toString("base64url")}` };
}

/** A record read from Redis, checked; null when it is not a valid one (it is then left out of the map). */
export function parseStoredKey(hash: string, json: string): StoredKey | null {
  try {
    const v = JSON.parse(json) as Partial<StoredKey>;
    const e: StoredKey = {
      hash,
      id: String(v.id),
      tenant: String(v.tenant),
      rps: Number(v.rps),
      concurrency: Number(v.concurrency),
      createdAt: Number(v.createdAt) || 0,
      note: typeof v.note === "string" ? v.note : "",
      ...(typeof v.expiresAt === "number" && Number.isFinite(v.expiresAt) ? { expiresAt: v.expiresAt } : {}),
    };
    edgeMapValue(e);
    return /^[0-9a-f]{64}$/.test(hash) ? e : null;
  } catch {
    return null;
  }
}

export interface KeyLimits {
  rps: number;
  concurrency: number;
}

export const DEFAULT_KEY_LIMITS: Readonly<KeyLimits> = Object.freeze({ rps: 20, concurrency: 16 });

/** The key store over one cluster's Redis. */
export class KeyStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  /** Adds a key for `tenant`; returns the key (to show once) and its record. */
  async add(tenant: string, limits: KeyLimits = DEFAULT_KEY_LIMITS, note = ""): Promise<{ key: string; record: StoredKey }> {
    if (!TENANT_RE.test(tenant)) throw new KeyStoreError(`tenant ${JSON.stringify(tenant)} must be 1–63 lowercase letters, digits or '-', starting with a letter or digit`);
    if (note.length > 200) throw new KeyStoreError("note is longer than 200 characters");
    const { id, key } = newKey();
    const record: StoredKey = { hash: hashKey(key), id, tenant, rps: limits.rps, concurrency: limits.concurrency, createdAt: Date.now(), note };
    try {
      edgeMapValue(record);
    } catch (e) {
      throw new KeyStoreError((e as Error).message);
    }
    const { hash, ...stored } = record;
    await this.redis.multi().hset(this.keys.edgeKeys, hash, JSON.stringify(stored)).incr(this.keys.edgeKeysRev).exec();
    return { key, record };
  }

  /** Every valid record, oldest first. */
  async list(): Promise<StoredKey[]> {
    const all = await this.redis.hgetall(this.keys.edgeKeys);
    return Object.entries(all)
      .map(([h, j]) => parseStoredKey(h, j))
      .filter((k): k is StoredKey => k !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  async find(id: string): Promise<StoredKey | null> {
    return (await this.list()).find((k) => k.id === id) ?? null;
  }

  /** Revokes a key by id; false when there is none. */
  async revoke(id: string): Promise<boolean> {
    const k = await this.find(id);
    if (!k) return false;
    await this.redis.multi().hdel(this.keys.edgeKeys, k.hash).incr(this.keys.edgeKeysRev).exec();
    return true;
  }

  /**
   * A new key for the same tenant and limits; the old one stays valid for `overlapMs` (its
   * clients move over without a failed request), then expires: `llm-ha edge-sync` drops it
   * from the map. An earlier expiry the old key already had is kept.
   */
  async rotate(id: string, overlapMs: number = DEFAULT_ROTATION_OVERLAP_MS): Promise<{ key: string; record: StoredKey; old: StoredKey }> {
    if (!Number.isFinite(overlapMs) || overlapMs < 0) throw new KeyStoreError(`rotation overlap ${overlapMs} ms must be a number of ms ≥ 0`);
    const old = await this.find(id);
    if (!old) throw new KeyStoreError(`no key with id ${JSON.stringify(id)}`);
    const made = await this.add(old.tenant, { rps: old.rps, concurrency: old.concurrency }, old.note ? `rotated from ${old.id}: ${old.note}`.slice(0, 200) : `rotated from ${old.id}`);
    const expiresAt = Math.min(old.expiresAt ?? Infinity, Date.now() + overlapMs);
    const { hash, ...stored } = { ...old, expiresAt };
    await this.redis.multi().hset(this.keys.edgeKeys, hash, JSON.stringify(stored)).incr(this.keys.edgeKeysRev).exec();
    return { ...made, old: { ...old, expiresAt } };
  }

  /** The revision counter (moves on every change). */
  async revision(): Promise<string> {
    return (await this.redis.get(this.keys.edgeKeysRev)) ?? "0";
  }
}
