/**
 * What an agent publishes for a rollout's gates (`NodePerf`, the node record's field `perf`): the
 * revision its server reports, its probe window (median latency, probes, failures), how long the
 * server's last model load took, the engine's corrupted-request count since the server started,
 * and the last continuation check. The leader compares nodes on the new revision with nodes on
 * the old one in the same window.
 *
 * - The probe window is per revision: when the server reports another revision the window starts
 *   empty, so an upgraded node is never judged by its old server's probes.
 * - The load time is what this agent saw: from the first "not ready" after serving (or at its own
 *   start) to the next "ready". A server already serving when the agent started has none (null).
 * - The corrupted count is the engine's counter as last read after the server's last start; the
 *   counter is the engine process's own, so it starts again at 0 with every start (null until read).
 *
 * Writing (`PerfPublisher`): a node record is read by the leader every period at fleet scale, and
 * each write is one more command on the shared Redis, so the field is written only when it changed
 * meaningfully (revision, load time, corruption, continuation, a failed probe more or less, the
 * first probe, the median moving by more than 10 % and 2 ms) or every `refreshPeriods` periods
 * (default 3) so `at` stays fresh: the leader takes a sample older than 5 periods for none. It goes into the node's own record (the key with a node
 * identity, else `node:<id>`), as the canary answers do, only after a heartbeat landed; `PEXPIRE … NX`
 * gives the record the heartbeat's expiry should this write ever create it (an expired record must
 * not come back without one), and leaves the heartbeat's expiry alone otherwise.
 */
import type { Redis } from "ioredis";
import type { NodePerf } from "../fleet/rollout/types";
import type { Logger } from "../util/log";
import { Loop } from "../util/loop";
import { measured, quantile } from "../util/stats";

/** A write at least every this many periods, whatever changed: the leader's gates take a sample older than 5 periods for none. */
export const PERF_REFRESH_PERIODS = 3;

/** Probe results and model-check transitions in, a `NodePerf` out. */
export class PerfTracker {
  private window: { ok: boolean; ms: number | null }[] = [];
  private windowRevision: string | null = null;
  private seen = false;
  private ready = false;
  private notReadySince: number | null = null;
  private loadMs: number | null = null;
  private corrupted: number | null = null;
  private continuation: NodePerf["continuation"] = null;

  constructor(private readonly windowSize: number) {}

  /** One model check: ready or not (anything but `ready` is not ready). Returns true when the server just became ready. */
  model(ready: boolean, now: number): boolean {
    const first = !this.seen;
    this.seen = true;
    if (!ready) {
      if (this.ready || first) this.notReadySince ??= now;
      this.ready = false;
      return false;
    }
    if (this.ready) return false;
    this.ready = true;
    if (this.notReadySince !== null) this.loadMs = now - this.notReadySince;
    this.notReadySince = null;
    // A new engine process: its corrupted counter starts again; the old server's last count is not its.
    if (!first) this.corrupted = null;
    return !first;
  }

  /** One probe that ended (ok with its latency, or failed: an error, a timeout, a wrong answer), on the server's `revision`. */
  probe(revision: string, ok: boolean, latencyMs: number | null): void {
    if (revision !== this.windowRevision) {
      this.window = [];
      this.windowRevision = revision;
    }
    this.window.push({ ok, ms: ok ? latencyMs : null });
    if (this.window.length > this.windowSize) this.window.splice(0, this.window.length - this.windowSize);
  }

  /** The engine's corrupted-requests counter as just read (null: not exported, or the read failed). */
  engine(total: number | null): void {
    if (total !== null || this.corrupted === null) this.corrupted = total;
  }

  /** The last continuation check (null: the server restarted, not checked since). */
  setContinuation(c: NodePerf["continuation"]): void {
    this.continuation = c;
  }

  snapshot(revision: string, now: number): NodePerf {
    const w = revision === this.windowRevision ? this.window : [];
    const lat = measured(w.map((p) => p.ms));
    const p50 = quantile(lat, 0.5);
    return {
      at: now,
      revision,
      p50Ms: p50 === null ? null : Math.round(p50 * 10) / 10,
      probes: w.length,
      errors: w.filter((p) => !p.ok).length,
      loadMs: this.loadMs,
      corrupted: this.corrupted,
      continuation: this.continuation,
    };
  }
}

/** Whether `next` is worth a write over `prev` (the last written), `periods` periods after it. */
export function perfWorthWriting(prev: NodePerf | null, next: NodePerf, periods: number, refreshPeriods: number): boolean {
  if (prev === null || periods >= refreshPeriods) return true;
  if (prev.revision !== next.revision || prev.loadMs !== next.loadMs || prev.corrupted !== next.corrupted || prev.continuation !== next.continuation) return true;
  if (prev.errors !== next.errors || (prev.probes === 0) !== (next.probes === 0) || next.probes < prev.probes) return true;
  if ((prev.p50Ms === null) !== (next.p50Ms === null)) return true;
  if (prev.p50Ms !== null && next.p50Ms !== null) {
    const moved = Math.abs(next.p50Ms - prev.p50Ms);
    return moved > 2 && moved > 0.1 * prev.p50Ms;
  }
  return false;
}

/** Where the field goes: the node's own record and the heartbeat's expiry; null while there is none to write (not registered, not enrolled, Redis down). */
export interface PerfTarget {
  redis: Redis;
  key: string;
  ttlMs: number;
}

export interface PerfPublisherOptions {
  snapshot(): NodePerf;
  target(): PerfTarget | null;
  periodMs: number;
  /** A write at least every this many periods. Default 3 (`PERF_REFRESH_PERIODS`). */
  refreshPeriods?: number;
  log: Logger;
}

export class PerfPublisher {
  private readonly loop: Loop;
  private written: NodePerf | null = null;
  private periods = 0;
  private failing = false;
  /** Writes that reached Redis (tests, the write-rate figure). */
  writes = 0;

  constructor(private readonly o: PerfPublisherOptions) {
    this.loop = new Loop(o.periodMs, () => this.tick(), (err) => o.log.error({ err, source: "perf" }, "perf publish failed unexpectedly"));
  }

  start(): void {
    this.loop.start(this.o.periodMs);
  }

  stop(): void {
    this.loop.stop();
  }

  /** One period: writes when worth it; a failed write is tried again next period. */
  async tick(): Promise<void> {
    this.periods++;
    const next = this.o.snapshot();
    if (!perfWorthWriting(this.written, next, this.periods, this.o.refreshPeriods ?? PERF_REFRESH_PERIODS)) return;
    const t = this.o.target();
    if (!t) return;
    try {
      await t.redis.multi().hset(t.key, "perf", JSON.stringify(next)).pexpire(t.key, t.ttlMs, "NX").exec();
      this.written = next;
      this.periods = 0;
      this.writes++;
      if (this.failing) this.o.log.info({ source: "perf" }, "perf published again");
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.o.log.warn({ err: (err as Error).message, source: "perf" }, "perf not published (Redis); trying again next period");
      this.failing = true;
    }
  }
}
