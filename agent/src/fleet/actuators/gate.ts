/**
 * The one door every actuator call goes through (the implementations never check tokens):
 *
 * 1. the caller's fencing token must still be this process's term *and* not below the
 *    highest token Redis has accepted (`fence:last`) — otherwise `refused-stale`, and the
 *    implementation is not reached (no cloud call is made);
 * 2. the call runs; a thrown error becomes `failed` (the controller retries next period);
 * 3. the call and its result go to the `events` stream (`type=action`) and to metrics.
 */
import type { Redis } from "ioredis";
import { Counter, Histogram, type Registry } from "prom-client";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import { ACTIONS, OUTCOMES, type ActionContext, type ActionName, type ActionResult, type Actuator, type ForeignAction, type ShiftContext } from "./types";

export class ActuatorMetrics {
  readonly calls: Counter<"action" | "outcome" | "kind">;
  readonly duration: Histogram<"action" | "kind">;

  constructor(registry: Registry, kind: string) {
    const registers = [registry];
    this.calls = new Counter({
      name: "llmha_actuator_actions_total",
      help: "Controller actions (wake/release standby, start/cancel zonal shift, size a reserved GPU group) by outcome",
      labelNames: ["action", "outcome", "kind"],
      registers,
    });
    this.duration = new Histogram({
      name: "llmha_actuator_action_seconds",
      help: "Wall time of a controller action, provider retries included",
      labelNames: ["action", "kind"],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    for (const action of ACTIONS) for (const outcome of OUTCOMES) this.calls.inc({ action, outcome, kind }, 0);
  }
}

export interface TokenCheck {
  /** The token of the term this process holds now, or null when it does not lead. */
  currentToken(): number | null;
}

export interface FencedActuatorOptions {
  redis: Redis;
  keys: RedisKeys;
  lease: TokenCheck;
  log: Logger;
  metrics?: ActuatorMetrics;
  eventsMaxLen?: number;
  /** Holder id written with each event. */
  holder?: string;
}

/**
 * Null when `token` may act now; else why not: not this process's term, a higher term already
 * recorded in `fence:last`, or `fence:last` unreadable (then nothing acts). Every fenced gate
 * (the standby and shift actuator, the repair actuator) asks this before its call.
 */
export async function fencedStaleReason(o: { redis: Redis; keys: RedisKeys; lease: TokenCheck; holder?: string }, token: number): Promise<string | null> {
  const current = o.lease.currentToken();
  if (current !== token) return `token ${token} is not this process's term (${current ?? "not leader"})`;
  try {
    const [raw, lastHolder] = await o.redis.hmget(o.keys.fenceLast, "token", "holder");
    const highest = raw === null ? 0 : Number(raw);
    if (!Number.isFinite(highest)) return `fence:last token in Redis is not a number (${JSON.stringify(raw)})`;
    return fenceRefusal(token, o.holder ?? "", highest, lastHolder);
  } catch (err) {
    return `cannot read the fencing token from Redis: ${(err as Error).message}`;
  }
}

export class FencedActuator implements Actuator {
  readonly kind: string;
  private readonly log: Logger;

  constructor(
    private readonly inner: Actuator,
    private readonly o: FencedActuatorOptions,
  ) {
    this.kind = inner.kind;
    this.log = o.log.child({ component: "actuator", actuator: inner.kind });
  }

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.run("standby.wake", az, ctx, () => this.inner.wakeStandby(az, ctx));
  }
  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.run("standby.release", az, ctx, () => this.inner.releaseStandby(az, ctx));
  }
  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.run("shift.start", az, ctx, () => this.inner.startZonalShift(az, ctx));
  }
  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.run("shift.cancel", az, ctx, () => this.inner.cancelZonalShift(az, ctx));
  }
  /** One fencing check for the whole round, then each group's result recorded as its own action. */
  async sizeReserved(ctx: ActionContext): Promise<ActionResult[]> {
    if (!this.inner.sizeReserved) return [];
    const started = performance.now();
    const stale = await this.staleReason(ctx.token);
    let results: ActionResult[];
    if (stale) results = [{ action: "capacity.size", az: "", outcome: "refused-stale", calls: 0, detail: stale, durationMs: performance.now() - started }];
    else {
      try {
        results = await this.inner.sizeReserved(ctx);
      } catch (err) {
        results = [{ action: "capacity.size", az: "", outcome: "failed", calls: 0, detail: (err as Error).message, durationMs: performance.now() - started }];
      }
    }
    for (const r of results) await this.observe(r.action, r.az, ctx, r);
    return results;
  }
  async close(): Promise<void> {
    await this.inner.close?.();
  }
  /** Reads only, so no token is checked; the caller publishes what it finds only while it leads (foreign.ts). */
  async audit(): Promise<ForeignAction[]> {
    return this.inner.audit ? this.inner.audit() : [];
  }

  /** Null when `token` may act; else why not. */
  async staleReason(token: number): Promise<string | null> {
    return fencedStaleReason(this.o, token);
  }

  private async run(action: ActionName, az: string, ctx: ActionContext, call: () => Promise<ActionResult>): Promise<ActionResult> {
    const started = performance.now();
    let result: ActionResult;
    const stale = await this.staleReason(ctx.token);
    if (stale) {
      result = { action, az, outcome: "refused-stale", calls: 0, detail: stale, durationMs: performance.now() - started };
    } else {
      try {
        result = await call();
      } catch (err) {
        result = { action, az, outcome: "failed", calls: 0, detail: (err as Error).message, durationMs: performance.now() - started };
      }
    }
    await this.observe(action, az, ctx, result);
    return result;
  }

  /** Metrics, the log line and the event of one result. */
  private async observe(action: ActionName, az: string, ctx: ActionContext, result: ActionResult): Promise<void> {
    this.o.metrics?.calls.inc({ action, outcome: result.outcome, kind: this.kind });
    this.o.metrics?.duration.observe({ action, kind: this.kind }, result.durationMs / 1000);
    const level = result.outcome === "failed" || result.outcome === "refused-stale" ? "warn" : result.outcome === "already" ? "debug" : "info";
    this.log[level]({ action, az, token: ctx.token, outcome: result.outcome, calls: result.calls, detail: result.detail, reason: ctx.reason }, "actuator");
    await this.record(action, az, ctx, result);
  }

  private async record(action: ActionName, az: string, ctx: ActionContext, r: ActionResult): Promise<void> {
    if (r.outcome === "already") return; // desired state re-asserted every period: only changes and failures are events
    try {
      await this.o.redis.xadd(
        this.o.keys.events, "MAXLEN", "~", String(this.o.eventsMaxLen ?? 10_000), "*",
        "type", "action", "action", action, "az", az, "actuator", this.kind, "outcome", r.outcome,
        "calls", String(r.calls), "detail", r.detail, "reason", ctx.reason, "token", String(ctx.token),
        "leader", this.o.holder ?? "", "durationMs", r.durationMs.toFixed(1), "at", String(Date.now()),
      );
    } catch (err) {
      this.log.warn({ err: (err as Error).message, action, az }, "could not record the action in the events stream");
    }
  }
}

/**
 * The fencing rule of `fence.inc.lua`, for the checks made outside Redis (the actuator gate):
 * null when `token` from `holder` may act, else why not. A lower token is refused; an equal
 * token is refused unless it comes from the holder that recorded it (after Redis lost data
 * two holders could otherwise act with one token).
 */
export function fenceRefusal(token: number, holder: string, highest: number, highestHolder: string | null): string | null {
  if (token < highest) return `token ${token} is below the highest accepted token ${highest}`;
  if (token === highest && highestHolder !== holder) {
    return `token ${token} was recorded for another holder (${highestHolder === null || highestHolder === "" ? "none" : highestHolder})`;
  }
  return null;
}
