/**
 * `llm-ha edge-sync`: keeps the client-key map of L1 proxies equal to the key store in
 * Redis. It polls the store's revision counter (one `GET` a period), and when it moves —
 * or every `fullEveryMs` anyway, to repair a proxy that restarted or drifted — it reads the
 * records, writes the map file (what HAProxy loads when it starts) and applies the
 * difference to each running HAProxy through its admin socket (`add map`, `set map`,
 * `del map`): a key added, rotated or revoked takes effect within a period, with no reload
 * and no connection dropped. When Redis is unreachable the proxies keep the last map.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { edgeMapLine, edgeMapValue } from "../../../../contracts/haproxy-edge";
import { socketExchange } from "../../util/net";
import { Loop } from "../../util/loop";
import type { RedisKeys } from "../../fleet/redis/keys";
import { keyExpired, parseStoredKey } from "./keys";

export interface EdgeSyncOptions {
  redis: Redis;
  keys: RedisKeys;
  /**
   * Runtime sockets of the proxies that load `mapPath` (a function when they come and go): the
   * generator's `mapSocket`, at `level user`, which may change maps and nothing more. A socket
   * at a higher level works but is warned about once: it would show HAProxy's environment.
   */
  sockets: readonly string[] | (() => readonly string[]);
  /** The map file, as named in the proxies' configuration. */
  mapPath: string;
  log: Logger;
  /** Poll period. Default 1000 ms. */
  periodMs?: number;
  /** A full comparison with every proxy at least this often. Default 30000 ms. */
  fullEveryMs?: number;
  /** Admin socket time limit per exchange. Default 2000 ms. */
  socketTimeoutMs?: number;
}

export interface EdgeSyncState {
  /** Keys in the map. */
  keys: number;
  /** Store revision last applied to every proxy; null before the first success. */
  revision: string | null;
  /** Epoch ms of the last pass that reached Redis and every proxy. */
  syncedAt: number | null;
  /** Consecutive failed passes. */
  failures: number;
  lastError: string | null;
}

export class EdgeSyncError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EdgeSyncError";
  }
}

/** Commands per admin-socket connection (the runtime API takes `;`-separated commands). */
const BATCH = 200;

/** Parses `show map` output (`0x… <key> <value>` per line) into key → value. */
export function parseShowMap(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^0x[0-9a-f]+ (\S+) (\S+)$/.exec(line.trim());
    if (m) out.set(m[1], m[2]);
  }
  return out;
}

/** The runtime-API commands that turn `current` into `desired`. */
export function mapDiff(mapPath: string, current: ReadonlyMap<string, string>, desired: ReadonlyMap<string, string>): string[] {
  const cmds: string[] = [];
  for (const [k, v] of desired) {
    const have = current.get(k);
    if (have === undefined) cmds.push(`add map ${mapPath} ${k} ${v}`);
    else if (have !== v) cmds.push(`set map ${mapPath} ${k} ${v}`);
  }
  for (const k of current.keys()) if (!desired.has(k)) cmds.push(`del map ${mapPath} ${k}`);
  return cmds;
}

/** The map file's text for a set of entries (sorted: the same store always writes the same file). */
export function mapFileText(desired: ReadonlyMap<string, string>): string {
  const lines = [...desired].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ${v}`);
  return `# llm-ha client keys (sha256 of the key → id:tenant:rps:concurrency); written by llm-ha edge-sync\n${lines.join("\n")}${lines.length ? "\n" : ""}`;
}

/** Writes a file atomically (a proxy starting while it is written sees the old or the new one). */
export function writeAtomic(path: string, text: string): boolean {
  try {
    if (readFileSync(path, "utf8") === text) return false;
  } catch {
    // absent: write it
  }
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, path);
  return true;
}

export class EdgeSync {
  private readonly loop: Loop;
  private lastFull = 0;
  /** Epoch ms when the next key in the map expires (a pass then drops it, with no change in Redis); Infinity when none. */
  private nextExpiry = Infinity;
  private readonly levelChecked = new Set<string>();
  private readonly st: EdgeSyncState = { keys: 0, revision: null, syncedAt: null, failures: 0, lastError: null };

  constructor(private readonly o: EdgeSyncOptions) {
    this.loop = new Loop(o.periodMs ?? 1000, () => this.pass(), (err) => this.failed(err));
  }

  get state(): Readonly<EdgeSyncState> {
    return this.st;
  }

  start(): void {
    this.loop.start(0);
  }

  stop(): void {
    this.loop.stop();
  }

  /** One pass now (tests, `--once`); `force` compares with every proxy even when the revision did not move. */
  async pass(force = false): Promise<void> {
    const stored = await this.o.redis.get(this.o.keys.edgeKeysRev);
    // The store gone after keys were applied (Redis restarted without persistence, a flush):
    // an empty map would refuse every client. The proxies keep what they have until keys are
    // stored again (`llm-ha keys add`: the revision starts over and that set applies).
    if (stored === null && this.st.revision !== null && this.st.revision !== "0") {
      throw new EdgeSyncError(`the client keys are gone from Redis (${this.o.keys.edgeKeysRev} missing): the proxies keep the ${this.st.keys} keys last applied (revision ${this.st.revision}) until keys are stored again`);
    }
    const rev = stored ?? "0";
    const full = force || Date.now() - this.lastFull >= (this.o.fullEveryMs ?? 30_000);
    if (rev === this.st.revision && !full && Date.now() < this.nextExpiry) return;
    const desired = await this.desired();
    writeAtomic(this.o.mapPath, mapFileText(desired));
    const sockets = typeof this.o.sockets === "function" ? this.o.sockets() : this.o.sockets;
    for (const socket of sockets) await this.apply(socket, desired);
    if (rev !== this.st.revision) this.o.log.info({ revision: rev, keys: desired.size }, "edge keys applied");
    this.st.revision = rev;
    this.st.keys = desired.size;
    this.st.syncedAt = Date.now();
    this.st.failures = 0;
    this.st.lastError = null;
    if (full) this.lastFull = Date.now();
  }

  private async desired(): Promise<Map<string, string>> {
    const all = await this.o.redis.hgetall(this.o.keys.edgeKeys);
    const out = new Map<string, string>();
    let bad = 0;
    let expired = 0;
    const now = Date.now();
    this.nextExpiry = Infinity;
    for (const [hash, json] of Object.entries(all)) {
      const k = parseStoredKey(hash, json);
      if (!k) {
        bad++;
        continue;
      }
      // A rotated-out key past its overlap is refused like a revoked one (its record stays, for `llm-ha keys list`).
      if (keyExpired(k, now)) {
        expired++;
        continue;
      }
      if (k.expiresAt !== undefined) this.nextExpiry = Math.min(this.nextExpiry, k.expiresAt);
      edgeMapLine(hash, k);
      out.set(hash, edgeMapValue(k));
    }
    if (bad) this.o.log.warn({ bad }, "edge key records that are not valid were left out of the map");
    if (expired) this.o.log.debug({ expired }, "expired edge keys left out of the map");
    return out;
  }

  private async apply(socket: string, desired: ReadonlyMap<string, string>): Promise<void> {
    const t = this.o.socketTimeoutMs ?? 2000;
    if (!this.levelChecked.has(socket)) {
      // `show env` of a name that is not set: refused below level operator, answered above.
      const probe = await socketExchange({ path: socket }, "show env LLMHA_EDGE_SYNC_LEVEL_PROBE\n", t, `runtime socket ${socket}`);
      this.levelChecked.add(socket);
      if (!/permission denied/i.test(probe)) {
        this.o.log.warn({ socket }, "this HAProxy socket is above level user: it shows the proxy's environment (the servers' API key); give llm-ha edge-sync the generator's mapSocket (level user)");
      }
    }
    const shown = await socketExchange({ path: socket }, `show map ${this.o.mapPath}\n`, t, `admin socket ${socket}`);
    if (/Unknown map identifier/i.test(shown)) throw new EdgeSyncError(`the proxy behind ${socket} has no map ${this.o.mapPath}`);
    const cmds = mapDiff(this.o.mapPath, parseShowMap(shown), desired);
    for (let i = 0; i < cmds.length; i += BATCH) {
      const reply = await socketExchange({ path: socket }, cmds.slice(i, i + BATCH).join(";") + "\n", t, `admin socket ${socket}`);
      const problem = reply.split("\n").find((l) => /^(?!\s*$)(?!Done)/.test(l) && /error|unknown|not found|denied/i.test(l));
      if (problem) throw new EdgeSyncError(`the proxy behind ${socket} refused a map change: ${problem.trim()}`);
    }
  }

  private failed(err: unknown): void {
    this.st.failures++;
    this.st.lastError = (err as Error).message;
    // Only the first failure of a run is a warning: a Redis outage must not flood the log.
    if (this.st.failures === 1) this.o.log.warn({ err: this.st.lastError }, "edge key sync failed; the proxies keep their last map");
  }
}
