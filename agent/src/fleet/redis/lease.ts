/**
 * Leader lease with fencing tokens (docs/design.md, Redis keys). A small API in the manner of
 * node-redlock: settings as `Partial<LeaseSettings>` over frozen defaults, named errors,
 * one `AbortSignal` per term that aborts when the lease is lost.
 *
 * - Acquire: one Lua script does `SET NX PX`, `INCR fence`, and records the token as the
 *   highest accepted, so an old holder's fenced write is refused from that moment on.
 * - Renew / release: Lua compare of our value.
 * - Self-fence: the validity deadline is measured on the monotonic clock from the moment
 *   the acquire/renew request was *sent*; at `ttl − margin` without a renewal the holder
 *   stops acting at once and contends again.
 * - Client-side checks (`isLeader`, the signal) are defence in depth only; safety comes from
 *   the fenced writes in Redis (`fenced-hset-3.lua`, `sweep-5.lua`).
 */
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import type { Logger } from "../../util/log";
import type { RedisKeys } from "./keys";
import { functionsOptionsOf, useFunctions } from "./functions";
import { acquireScript, releaseScript, renewScript } from "./scripts";
import { followEndpoint } from "./follow";

export interface LeaseSettings {
  /** Lease time to live. Default 20000 ms (`LLMHA_LEASE_TTL_MS`). */
  ttlMs: number;
  /** Renew period while holding, about a third of the TTL. Default 7000 ms (`LLMHA_LEASE_RENEW_MS`). */
  renewMs: number;
  /** How often a non-holder tries to acquire. Default 5000 ms (`LLMHA_LEASE_CONTEND_MS`). */
  contendMs: number;
  /** Stop acting this long before the TTL runs out on our clock (clock drift, GC). Default 2000 ms. */
  marginMs: number;
  /**
   * After acquiring, `WAIT 1` this long for a replica when one is connected. Default 500 ms.
   * It runs on the lease's own connection (the one the acquisition was written on: `WAIT`
   * counts that connection's writes), so a slow replica never holds up a heartbeat or an
   * `/az/health` read. A 0 is logged and counted (`unreplicated`): the term still acts, since
   * tokens are floored by the server clock and cannot go backwards across a failover.
   */
  replicaWaitMs: number;
}

export const DEFAULT_LEASE_SETTINGS: Readonly<LeaseSettings> = Object.freeze({
  ttlMs: 20_000,
  renewMs: 7_000,
  contendMs: 5_000,
  marginMs: 2_000,
  replicaWaitMs: 500,
});

export class LeaseSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LeaseSettingsError";
  }
}

/** The reason a term's `AbortSignal` carries. */
export class LeaseLostError extends Error {
  constructor(readonly reason: LostReason) {
    super(`leader lease lost: ${reason}`);
    this.name = "LeaseLostError";
  }
}

/**
 * - `self-fence`: could not renew before TTL − margin (Redis unreachable, process paused).
 * - `not-ours`: the renew script found the key gone or someone else's (expired, Redis restarted).
 * - `fenced-out`: a fenced write was refused: a newer token exists.
 * - `released`: graceful `release()`.
 */
export type LostReason = "self-fence" | "not-ours" | "fenced-out" | "released";

export interface LeaseEvents {
  acquired: [token: number];
  /** The acquisition left out insane fence values (`<key>=<value>,…`) and healed the fence. */
  poisoned: [detail: string];
  lost: [reason: LostReason];
  /** A renewal Redis accepted, with its round trip (ms): what the bench counts. */
  renewed: [rttMs: number];
}

export interface LeaseTerm {
  readonly token: number;
  /** Aborts (with a `LeaseLostError`) the moment this term ends. */
  readonly signal: AbortSignal;
}

export interface LeaderLeaseOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Unique per process, e.g. `<nodeId>/<pid>`. */
  holderId: string;
  settings?: Partial<LeaseSettings>;
  log: Logger;
}

export function resolveLeaseSettings(s: Partial<LeaseSettings> = {}): Readonly<LeaseSettings> {
  const r = Object.freeze({ ...DEFAULT_LEASE_SETTINGS, ...s });
  for (const [k, v] of Object.entries(r)) {
    if (!Number.isFinite(v) || v < 0) throw new LeaseSettingsError(`lease ${k} must be a number ≥ 0, got ${v}`);
  }
  if (r.ttlMs <= 0 || r.renewMs <= 0 || r.contendMs <= 0) {
    throw new LeaseSettingsError("lease ttlMs, renewMs and contendMs must be > 0");
  }
  if (r.marginMs >= r.ttlMs) throw new LeaseSettingsError(`lease marginMs (${r.marginMs}) must be below ttlMs (${r.ttlMs})`);
  if (r.renewMs >= r.ttlMs - r.marginMs) {
    throw new LeaseSettingsError(
      `lease renewMs (${r.renewMs}) must be below ttlMs − marginMs (${r.ttlMs - r.marginMs}), or the holder fences itself before renewing`,
    );
  }
  return r;
}

/** Parses the lease value `<holderId>:<token>`. */
export function parseLeaseValue(v: string): { holder: string; token: number } | null {
  const i = v.lastIndexOf(":");
  if (i <= 0) return null;
  const token = Number(v.slice(i + 1));
  return Number.isInteger(token) ? { holder: v.slice(0, i), token } : null;
}

export class LeaderLease extends EventEmitter<LeaseEvents> {
  readonly settings: Readonly<LeaseSettings>;
  readonly holderId: string;
  private readonly redis: Redis;
  private readonly keys: RedisKeys;
  private readonly log: Logger;
  private closed = false;
  private abandoned = false;
  private started = false;
  private timer: NodeJS.Timeout | null = null;
  private fenceTimer: NodeJS.Timeout | null = null;
  private term: { token: number; value: string; ctrl: AbortController; deadline: number } | null = null;
  private highest = 0;
  private acquisitions = 0;
  private lastHolder: string | null = null;
  private own: Redis | null = null;
  private unreplicatedCount = 0;

  constructor(opts: LeaderLeaseOptions) {
    super();
    this.settings = resolveLeaseSettings(opts.settings);
    this.redis = opts.redis;
    this.keys = opts.keys;
    this.holderId = opts.holderId;
    this.log = opts.log.child({ component: "lease", holder: opts.holderId });
  }

  /** True while we hold the lease and our monotonic deadline has not passed. */
  get isLeader(): boolean {
    return this.term !== null && performance.now() < this.term.deadline;
  }

  get token(): number | null {
    return this.term?.token ?? null;
  }

  /** The current term (token + signal), or null when not leader. */
  get current(): LeaseTerm | null {
    if (!this.term || !this.isLeader) return null;
    return { token: this.term.token, signal: this.term.ctrl.signal };
  }

  /** Highest fencing token this process has seen (its own or another holder's). */
  get highestToken(): number {
    return this.highest;
  }

  /** Acquisitions no replica acknowledged within `replicaWaitMs` (while one was connected). */
  get unreplicated(): number {
    return this.unreplicatedCount;
  }

  /**
   * The lease's own connection (acquire + `WAIT`), made on first use from the shared one:
   * same endpoint, TLS and auth, and the shared one's way with functions (a loader loads too).
   */
  private ownConnection(): Redis {
    if (!this.own) {
      this.own = this.redis.duplicate({ connectionName: `${this.redis.options.connectionName ?? "llmha"}-lease` });
      this.own.on("error", () => undefined); // the shared client logs Redis trouble; this one is retried by contend
      useFunctions(this.own, functionsOptionsOf(this.redis));
      // It writes only when the lease is free: no READONLY would ever move it after a failover.
      followEndpoint(this.own, { everyMs: 1000 });
    }
    return this.own;
  }

  private closeOwn(): void {
    this.own?.disconnect(false);
    this.own = null;
  }

  /** How many times this process acquired the lease. */
  get acquisitionCount(): number {
    return this.acquisitions;
  }

  /** The holder id last seen in the lease key (ours while leader). */
  get leaderId(): string | null {
    return this.isLeader ? this.holderId : this.lastHolder;
  }

  /** Starts contending (the first attempt is immediate). */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.schedule(0, () => this.contend());
  }

  /** Records a token seen elsewhere (e.g. a refused write's highest token). */
  observeToken(token: number): void {
    // A token read back from Redis is not trusted: a forged `inf` or far-future one would
    // become this contender's floor and every token after it.
    if (!Number.isSafeInteger(token) || token > Date.now() + 86_400_000) return;
    if (token > this.highest) this.highest = token;
  }

  /** Stops acting now (e.g. a fenced write was refused) and contends again. */
  stepDown(reason: LostReason): void {
    if (this.term) this.lose(reason);
  }

  /** Graceful shutdown: stop acting, delete the key if it is still ours, stop contending. */
  async release(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clearTimers();
    this.closeOwn();
    const term = this.term;
    if (!term) return;
    this.lose("released");
    try {
      const ok = await releaseScript(this.redis, this.keys.leader, term.value);
      this.log.info({ token: term.token, released: ok }, ok ? "lease released" : "lease already gone at release");
    } catch (err) {
      this.log.warn({ err: (err as Error).message, token: term.token }, "lease release failed; it expires by TTL");
    }
  }

  /** Stops every timer without touching Redis (a crash, for tests and the bench). */
  abandon(): void {
    this.closed = true;
    this.abandoned = true;
    this.clearTimers();
    this.closeOwn();
    if (this.term) {
      this.term.ctrl.abort(new LeaseLostError("self-fence"));
      this.term = null;
    }
  }

  private clearTimers(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.fenceTimer) clearTimeout(this.fenceTimer);
    this.timer = null;
    this.fenceTimer = null;
  }

  private schedule(ms: number, fn: () => Promise<void>): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      fn().catch((err: unknown) => {
        // never throw out of a timer: log, and keep the loop alive
        this.log.error({ err: (err as Error).message }, "lease loop error");
        if (!this.term) this.schedule(this.settings.contendMs, () => this.contend());
      });
    }, ms);
  }

  private contendDelay(): number {
    // Jitter below the period, so a standby still takes over within one contend period.
    return Math.round(this.settings.contendMs * (0.8 + 0.2 * Math.random()));
  }

  private async contend(): Promise<void> {
    if (this.closed || this.term) return;
    const sentAt = performance.now();
    let r;
    try {
      r = await acquireScript(this.ownConnection(), this.keys, this.holderId, this.settings.ttlMs, this.highest);
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, "lease contend failed");
      this.schedule(this.contendDelay(), () => this.contend());
      return;
    }
    if (this.closed && !r.acquired) return;
    if (!r.acquired) {
      const seen = parseLeaseValue(r.holder);
      if (seen) {
        this.observeToken(seen.token);
        this.lastHolder = seen.holder;
      }
      this.schedule(this.contendDelay(), () => this.contend());
      return;
    }
    this.observeToken(r.token);
    if (r.poisoned) {
      this.log.error({ poisoned: r.poisoned, token: r.token }, "fence values in Redis were not sane tokens (forged or corrupted): left out, the fence healed with a fresh token");
      this.emit("poisoned", r.poisoned);
    }
    const deadline = sentAt + this.settings.ttlMs - this.settings.marginMs;
    const value = `${this.holderId}:${r.token}`;
    if (!this.closed) await this.waitForReplica();
    if (this.closed) {
      // released while the acquisition was in flight: hand it back, or a standby waits out the TTL
      if (!this.abandoned) await releaseScript(this.redis, this.keys.leader, value).catch(() => false);
      return;
    }
    if (performance.now() >= deadline) {
      this.log.warn({ token: r.token }, "lease acquired too late to act on; contending again");
      this.schedule(this.contendDelay(), () => this.contend());
      return;
    }
    this.term = { token: r.token, value, ctrl: new AbortController(), deadline };
    this.acquisitions += 1;
    this.lastHolder = this.holderId;
    this.armFence();
    this.schedule(this.settings.renewMs, () => this.renew());
    this.log.info({ token: r.token }, "lease acquired");
    this.emit("acquired", r.token);
  }

  private async waitForReplica(): Promise<void> {
    const own = this.own;
    if (!own) return;
    try {
      const info = await own.info("replication");
      const m = /connected_slaves:(\d+)/.exec(info);
      if (!m || Number(m[1]) === 0) return;
      const acked = Number(await own.call("WAIT", 1, this.settings.replicaWaitMs));
      if (acked < 1) {
        this.unreplicatedCount += 1;
        this.log.warn({ waitMs: this.settings.replicaWaitMs }, "no replica acknowledged the lease within the wait; acting anyway (tokens are floored by the server clock)");
      }
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, "replica check failed");
    }
  }

  private armFence(): void {
    if (this.fenceTimer) clearTimeout(this.fenceTimer);
    const term = this.term;
    if (!term) return;
    this.fenceTimer = setTimeout(() => {
      this.fenceTimer = null;
      if (this.term === term && performance.now() >= term.deadline) this.lose("self-fence");
      else if (this.term === term) this.armFence();
    }, Math.max(0, term.deadline - performance.now()));
  }

  private async renew(): Promise<void> {
    const term = this.term;
    if (this.closed || !term) return;
    const sentAt = performance.now();
    let ok: boolean;
    try {
      ok = await renewScript(this.redis, this.keys.leader, term.value, this.settings.ttlMs);
    } catch (err) {
      if (this.term !== term) return;
      const left = term.deadline - performance.now();
      this.log.warn({ err: (err as Error).message, msLeft: Math.round(left) }, "lease renew failed; retrying");
      // Retry soon; the fence timer ends the term if we never get through.
      this.schedule(Math.max(50, Math.min(500, left / 3)), () => this.renew());
      return;
    }
    if (this.term !== term) return;
    if (!ok) {
      this.lose("not-ours");
      return;
    }
    term.deadline = sentAt + this.settings.ttlMs - this.settings.marginMs;
    this.armFence();
    this.schedule(this.settings.renewMs, () => this.renew());
    this.emit("renewed", performance.now() - sentAt);
  }

  private lose(reason: LostReason): void {
    const term = this.term;
    if (!term) return;
    this.term = null;
    // Not ours any more, and who holds it is unknown until the next read: never name ourselves.
    this.lastHolder = null;
    if (this.fenceTimer) clearTimeout(this.fenceTimer);
    this.fenceTimer = null;
    term.ctrl.abort(new LeaseLostError(reason));
    this.log.warn({ token: term.token, reason }, "lease lost: stopped acting");
    this.emit("lost", reason);
    if (!this.closed) this.schedule(this.contendDelay(), () => this.contend());
  }
}
