/**
 * Every leader publication goes through here: it carries the current term's fencing token
 * and is applied by Redis only if that token is still the highest (`fenced-hset-3.lua`).
 * A refused write means a newer leader exists: the lease steps down at once.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "./keys";
import type { LeaderLease } from "./lease";
import { fencedHsetScript, sweepScript, type FencedResult, type SweepResult } from "./scripts";

/**
 * Nodes one sweep call handles at most (expired + forgotten): one Lua call blocks Redis for
 * all its clients, so a zone's worth of deaths is worked off in chunks of a few ms each.
 */
export const SWEEP_CHUNK = 250;

export class NotLeaderError extends Error {
  constructor() {
    super("not the leader: fenced write not sent");
    this.name = "NotLeaderError";
  }
}

export interface FencedWriteOptions {
  /** A transition of this field writes an event. */
  changeField?: string;
  /** Event type (`az`, `tier`, `standby`, `suspect`). */
  eventType?: string;
  mode?: "hset" | "replace";
}

export class FencedWriter {
  /** Writes refused by Redis because a newer token exists. */
  rejected = 0;
  /** Called on every refused write (metrics). */
  onRejected: (() => void) | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly lease: LeaderLease,
    private readonly eventsMaxLen = 10_000,
  ) {}

  private termOrThrow(): { token: number } {
    const term = this.lease.current;
    if (!term) throw new NotLeaderError();
    return term;
  }

  private refused(highest: number): void {
    this.rejected += 1;
    this.onRejected?.();
    this.lease.observeToken(highest);
    this.lease.stepDown("fenced-out");
  }

  /** HSET `target` with the fields (+ token, leader) if our token is still the highest. */
  async hset(target: string, fields: Record<string, string | number>, opts: FencedWriteOptions = {}): Promise<FencedResult> {
    const { token } = this.termOrThrow();
    const r = await fencedHsetScript(this.redis, {
      fenceLast: this.keys.fenceLast,
      target,
      events: this.keys.events,
      token,
      holder: this.lease.holderId,
      changeField: opts.changeField,
      eventType: opts.eventType,
      eventsMaxLen: this.eventsMaxLen,
      mode: opts.mode,
      fields,
    });
    if (!r.accepted) this.refused(r.highestToken);
    return r;
  }

  /** The registry sweep (expired nodes out of the available sets), fenced like any leader write. */
  /** `from`: where the period's previous call stopped (its `lastScore`); default from the oldest. */
  async sweep(a: { silentMs: number; forgetAfterMs: number; limit?: number; from?: string }): Promise<SweepResult> {
    const { token } = this.termOrThrow();
    const r = await sweepScript(this.redis, this.keys, {
      prefix: this.keys.prefix,
      token,
      holder: this.lease.holderId,
      silentMs: a.silentMs,
      forgetAfterMs: a.forgetAfterMs,
      eventsMaxLen: this.eventsMaxLen,
      limit: a.limit ?? SWEEP_CHUNK,
      from: a.from,
    });
    if (!r.accepted) this.refused(r.highestToken);
    return r;
  }
}
