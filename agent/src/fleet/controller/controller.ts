/**
 * The leader's duties (L2–L4): while the lease is held, every period it sweeps expired
 * nodes out of the available sets, reads the registry, evaluates (pure, `state.ts`) and
 * publishes AZ states, the tier, the suspect checks, the standby and zonal-shift desired
 * state — each a fenced write. A refused write means a newer leader exists: the lease steps
 * down and this loop ends with the term's signal. After each published period `onPublished`
 * hands the evaluation to the reconciler, which acts on it in the background.
 */
import type { Redis } from "ioredis";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { LeaderLease } from "../redis/lease";
import { readSnapshot, type RegistrySnapshot } from "../redis/registry";
import type { Inventory } from "../inventory/inventory";
import { InventoryTracker } from "../inventory/tracker";
import type { EnrolmentDesk } from "../identity/desk";
import { publishModelSameness } from "./models";
import type { CanaryTolerance } from "../../node/canary/answers";
import { publishExpectations } from "../../node/canary/store";
import type { Logger } from "../../util/log";
import type { FleetMetrics } from "./metrics";
import { readPublished } from "./published";
import { emptyPracticeMemory, type PracticeMemory, type PracticeSchedule } from "../actuators/practice";
import type { StandbyParkSchedule } from "../actuators/karpenter/schedule";
import {
  emptyControllerMemory,
  evaluate,
  resolveControllerSettings,
  type ControllerMemory,
  type ControllerSettings,
  type Evaluation,
} from "./state";
import type { RepairAdvisor } from "../repair/advise";
import type { RolloutRunner } from "../rollout/runner";
import { standbyFields } from "./standby";
import { EarlyLook } from "./early";
import { logTransitions, SkippedRecords } from "./transitions";

/** Sweep calls one controller period makes at most (× `SWEEP_CHUNK` nodes). */
const MAX_SWEEP_CALLS = 20;

/** What the leader needs to learn canary expectations: the tolerance, and how old a node's answers may be. */
export interface CanaryLearning {
  tolerance: CanaryTolerance;
  maxAgeMs: number;
}

export interface ControllerOptions {
  redis: Redis;
  keys: RedisKeys;
  lease: LeaderLease;
  writer: FencedWriter;
  settings?: Partial<ControllerSettings>;
  log: Logger;
  metrics?: FleetMetrics;
  /** Registry heartbeat TTL: nodes silent longer are checked for expiry by the sweep. */
  heartbeatTtlMs?: number;
  /** Called after every published period with the term's token; must not block (the reconciler). */
  onPublished?: (evaluation: Evaluation, token: number) => void;
  /**
   * Epoch ms of the last Redis trouble this process saw outside the controller (its own
   * heartbeat failing, the connection lost), null when none: with the controller's own
   * failed periods it starts the silence grace (`silenceGraceMs`).
   */
  redisTroubleAt?: () => number | null;
  /** Correctness canaries on: every 2nd period the expectations are learned and published. */
  canary?: CanaryLearning;
  /** The reconciler's word that the standby cannot be woken (every fallback step failed), null when it can: shown in the tier. */
  standbyUnavailable?: () => string | null;
  /** The reconciler's word that a new wake waits (`backoff until …, because …`), null when not: shown in the tier and the standby hash. */
  standbyBackoff?: () => string | null;
  /** Practice wakes of the standby on a schedule (`LLMHA_PRACTICE_WAKE`); none when absent. */
  practice?: PracticeSchedule;
  /** The standby's park/wake crons the leader runs itself (`LLMHA_STANDBY_SCHEDULE`, Karpenter); none when absent. */
  standbySchedule?: StandbyParkSchedule;
  /**
   * Which GPU nodes exist and where (`LLMHA_INVENTORY`): with one, the nodes, their AZs and
   * GPU counts come from it and agents' own indexes (`members`, `azs`) are not trusted;
   * without one (the bench, older set-ups), from what agents write.
   */
  inventory?: Inventory;
  /** Node identities (with an inventory): enrolments judged each period, records read under capability keys only. */
  identities?: EnrolmentDesk;
  repair?: RepairAdvisor; // the repair ladder (`LLMHA_REPAIR_MODE=advise`): its plan published each period, fenced
  /** The model or engine rollout (rollout/runner.ts): stepped each period, its hash fenced. */
  rollout?: RolloutRunner;
  /**
   * The early look (early.ts): a node event that may make an AZ worse evaluates at once, at most
   * once per `minGapMs` (default a quarter period, at most 100 ms); `false` waits for the period.
   */
  early?: { minGapMs?: number } | false;
}

export class Controller {
  readonly settings: Readonly<ControllerSettings>;
  private readonly o: ControllerOptions;
  private readonly log: Logger;
  private lastModelOutliers = "";
  private readonly skipped = new SkippedRecords();
  private readonly inventory: InventoryTracker | null;
  private closed = false;
  /** Set while the term's start (the published state) is not read yet: the time past which it starts fresh. */
  private seedDue: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private memory: ControllerMemory = emptyControllerMemory();
  private practice: PracticeMemory = emptyPracticeMemory();
  /** The standby was awake by its schedule last period (a park then waits while the tier is above L0). */
  private scheduleAwake = false;
  private last: Evaluation | null = null;
  private lastAggregationMs: number | null = null;
  private ticks = 0;
  /** Evaluations that ran between periods (the early look); they never count as periods. */
  private earlyTicks = 0;
  /** Every evaluation, periodic or early, runs after the one before it has ended. */
  private chain: Promise<unknown> = Promise.resolve();
  private lastStart = 0;
  private early: EarlyLook | null = null;
  /** Epoch ms of this controller's last failed period (a Redis error), null when none. */
  private failedAt: number | null = null;
  private readonly onAcquired = (token: number): void => {
    const term = this.o.lease.current;
    if (term && term.token === token) void this.runTerm(term.signal);
  };

  constructor(o: ControllerOptions) {
    this.o = o;
    this.settings = resolveControllerSettings(o.settings);
    this.log = o.log.child({ component: "controller" });
    this.inventory = o.inventory ? new InventoryTracker(o.inventory, o.redis, o.keys, this.log, undefined, o.identities ?? null) : null;
  }

  /** The last evaluation this process published (null when it never led). */
  get lastEvaluation(): Evaluation | null {
    return this.last;
  }
  get lastAggregationTimeMs(): number | null {
    return this.lastAggregationMs;
  }
  /** Periodic evaluations published: what `recoverPeriods`, the 2nd and the 10th period count. */
  get tickCount(): number {
    return this.ticks;
  }
  /** Early evaluations published (a node's report worsened between periods). */
  get earlyTickCount(): number {
    return this.earlyTicks;
  }

  start(): void {
    this.o.lease.on("acquired", this.onAcquired);
    const term = this.o.lease.current;
    if (term) void this.runTerm(term.signal);
  }

  stop(): void {
    this.closed = true;
    this.o.lease.off("acquired", this.onAcquired);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.endEarlyLook();
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  private endEarlyLook(): void {
    this.early?.stop();
    this.early = null;
  }

  /**
   * A new term starts from what the last leader published. A read that fails (a Redis endpoint
   * still settling after a failover) is tried again before each period, and nothing is decided
   * meanwhile: a term started from nothing publishes an AZ with no healthy node seen yet as DOWN
   * (seen: both active AZs DOWN for a few seconds after a promotion). Only a state that stays
   * unreadable past the silence grace is given up on: the term then starts fresh.
   */
  private async seedTerm(now: number): Promise<void> {
    try {
      await this.inventory?.seed();
      await this.seedMemory();
      this.seedDue = null;
    } catch (err) {
      if (this.seedDue !== null && now >= this.seedDue) {
        this.log.warn({ err: (err as Error).message }, "could not read the published state; starting fresh");
        this.memory = emptyControllerMemory();
        this.seedDue = null;
        return;
      }
      throw err;
    }
  }

  private async runTerm(signal: AbortSignal): Promise<void> {
    this.seedDue = Date.now() + this.settings.silenceGraceMs;
    await this.seedTerm(Date.now()).catch((err: Error) => this.log.warn({ err: err.message }, "could not read the published state yet: tried again before the first decision"));
    const loop = (): void => {
      if (this.closed || signal.aborted) return;
      const started = performance.now();
      this.serial(() => this.tick())
        .catch((err: unknown) => {
          this.failedAt = Date.now();
          if (!signal.aborted) this.log.warn({ err: (err as Error).message }, "controller period failed");
        })
        .finally(() => {
          if (this.closed || signal.aborted) return;
          const wait = Math.max(0, this.settings.intervalMs - (performance.now() - started));
          this.timer = setTimeout(loop, wait);
        });
    };
    signal.addEventListener("abort", () => {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.endEarlyLook();
    }, { once: true });
    if (this.o.early !== false && !this.closed && !signal.aborted) {
      // Between periods: only after the evaluation under way, at most once per gap (early.ts).
      this.early = new EarlyLook(this.o.redis, this.o.keys.events, this.o.early?.minGapMs ?? Math.min(100, Math.floor(this.settings.intervalMs / 4)), () => this.lastStart, this.log, () => {
        if (this.closed || signal.aborted) return;
        this.serial(() => this.tick(Date.now(), true)).catch((err: unknown) => {
          if (!signal.aborted) this.log.warn({ err: (err as Error).message }, "early evaluation failed");
        });
      });
      this.early.start();
    }
    loop();
  }

  /** A new leader continues from what the previous one published, so hysteresis does not restart. */
  private async seedMemory(): Promise<void> {
    const { redis, keys } = this.o;
    // With an inventory the AZs are its (an agent can delete or fill `azs`); without, what agents wrote.
    const azs = this.inventory ? this.inventory.knownAzs() : await redis.smembers(keys.azs);
    const published = await readPublished(redis, keys, azs);
    this.memory = published.memory;
    this.practice = published.practice;
  }

  /**
   * Why missing heartbeats are not to be acted on now, or null: Redis trouble (ours or the
   * process's) within `silenceGraceMs` explains node hashes that expired meanwhile.
   */
  silenceExplained(now = Date.now()): string | null {
    const at = Math.max(this.failedAt ?? 0, this.o.redisTroubleAt?.() ?? 0);
    if (at === 0 || now - at >= this.settings.silenceGraceMs) return null;
    return `Redis trouble ${Math.round((now - at) / 1000)} s ago`;
  }

  /**
   * One period: sweep, read, evaluate, publish (all fenced). `early`: an evaluation between
   * periods (the early look): states only get worse, and what counts or steps per period (recovery
   * hysteresis, model sameness, canaries, repair, rollout) waits for the period.
   */
  async tick(now = Date.now(), early = false): Promise<Evaluation | null> {
    const { redis, keys, writer, metrics } = this.o;
    const term = this.o.lease.current;
    if (!term) return null;
    this.lastStart = now;
    if (this.seedDue !== null) await this.seedTerm(now);
    const explained = this.silenceExplained(now);
    // The sweep marks expired nodes and takes them out of the sets: not while their silence is Redis's.
    // With node identities the sweep (which looks at `node:<id>`) does not run: the inventory read takes dead nodes out.
    if (explained === null && !this.inventory?.identities) {
      // In chunks (`SWEEP_CHUNK` nodes a call), other clients served in between; what a
      // period leaves (a zone of thousands dying at once) waits for the next one.
      // Each call goes on where the last one stopped: live nodes silent a while but not expired
      // stay in the index, and from the oldest every call looked at the same ones again (20
      // calls a period, 100 ms at 5,000 nodes, whenever 250 were a second late).
      let expired = 0;
      let from = "-inf";
      for (let call = 0; call < MAX_SWEEP_CALLS; call++) {
        const sweep = await writer.sweep({
          silentMs: Math.min(this.settings.intervalMs, this.o.heartbeatTtlMs ?? this.settings.intervalMs),
          forgetAfterMs: this.settings.forgetAfterMs,
          from,
        });
        if (!sweep.accepted) return null;
        expired += sweep.expired;
        if (!sweep.more) break;
        // Ties at the last score are looked at again (inclusive), unless nothing moved (then past it).
        if (sweep.lastScore !== null) from = sweep.lastScore === from ? `(${sweep.lastScore}` : sweep.lastScore;
      }
      if (expired) this.log.info({ expired }, "expired nodes swept from the available sets");
    }
    const t0 = performance.now();
    const snap = this.inventory ? await this.inventory.snapshot(writer, now) : await readSnapshot(redis, keys);
    this.skipped.report(snap, this.o.metrics, this.log);
    const { evaluation, memory } = evaluate(snap, this.memory, this.settings, now, { silenceExplained: explained, standbyUnavailable: this.o.standbyUnavailable?.() ?? null, standbyBackoff: this.o.standbyBackoff?.() ?? null, early });
    const aggMs = performance.now() - t0;
    this.lastAggregationMs = aggMs;
    metrics?.controllerTick.observe(aggMs / 1000);

    const writes: Promise<{ accepted: boolean }>[] = [];
    // Practice wake: overrides the published standby decision while it runs; the tier is not touched.
    let practice = this.practice;
    if (this.o.practice && evaluation.standby.az) {
      // An operator's request matters only when no practice runs (a running one ignores it): no read meanwhile.
      const requested = this.practice.startedAt === null ? Number(await redis.get(keys.practiceRequest).catch(() => null)) || null : null;
      const step = this.o.practice.step(this.practice, {
        tier: evaluation.tier.level, standbyWanted: evaluation.standby.wake, standbyHealthy: evaluation.standbyHealthy, unavailable: this.o.standbyUnavailable?.() ?? this.o.standbyBackoff?.() ?? null, requestedAt: requested,
      }, now);
      practice = step.memory;
      if (step.wake) evaluation.standby = { ...evaluation.standby, wake: true, reason: step.reason };
      if (step.record || step.memory.startedAt !== this.practice.startedAt) {
        const r = step.record;
        const fields: Record<string, string | number> = { firedAt: step.memory.firedAt, startedAt: step.memory.startedAt ?? "", updatedAt: now };
        if (r) Object.assign(fields, { last: `${r.outcome}@${r.at}`, lastAt: r.at, lastOutcome: r.outcome, lastWakeMs: r.wakeMs ?? "", lastReason: r.reason.slice(0, 300) });
        writes.push(writer.hset(`${keys.prefix}practice`, fields, { changeField: r ? "last" : "startedAt", eventType: "practice" }));
        if (r) this.o.practice.recorded(r);
        if (r) this.log[r.outcome === "failed" ? "warn" : "info"]({ outcome: r.outcome, wakeMs: r.wakeMs, reason: r.reason }, "practice wake");
        else this.log.info({ az: evaluation.standby.az, reason: step.reason }, "practice wake started");
      }
    }
    // The standby's schedule, run by the leader (Karpenter has none): awake after scaleUp; a park never overrides a wanted standby.
    let scheduleAwake = this.scheduleAwake;
    if (this.o.standbySchedule && evaluation.standby.az) {
      const st = this.o.standbySchedule.step(now, { wanted: evaluation.standby.wake, tier: evaluation.tier.level, awakeBySchedule: this.scheduleAwake });
      scheduleAwake = st.awakeBySchedule;
      if (st.wake) evaluation.standby = { ...evaluation.standby, wake: true, reason: st.reason };
    }
    for (const a of evaluation.azs) {
      const m = memory.az.get(a.az);
      writes.push(
        writer.hset(keys.azState(a.az), {
          state: a.state, healthyCapacity: a.healthyCapacity, totalCapacity: a.totalCapacity,
          nodes: a.nodes, nodesIn: a.nodesIn, since: m?.since ?? now, firstSeen: m?.firstSeen ?? now, everOk: m?.everOk ? 1 : 0, updatedAt: now,
        }, { changeField: "state", eventType: "az" }),
      );
    }
    writes.push(writer.hset(keys.tier, { level: evaluation.tier.level, reason: evaluation.tier.reason, standbyUnavailable: evaluation.standby.unavailable ?? "", updatedAt: now }, { changeField: "level", eventType: "tier" }));
    writes.push(
      writer.hset(keys.suspect, {
        codes: evaluation.suspect.join(","),
        counts: JSON.stringify(evaluation.suspectCounts),
        updatedAt: now,
      }, { changeField: "codes", eventType: "suspect", mode: "replace" }),
    );
    if (evaluation.standby.az) {
      writes.push(writer.hset(keys.standbyWake, standbyFields(evaluation, memory.standby.lastTriggerAt, now), { changeField: "wake", eventType: "standby" }));
    }
    if (this.settings.zonalShift) {
      writes.push(
        writer.hset(keys.actuation, {
          shiftAz: evaluation.shift.az ?? "", shiftSince: memory.shift.since ?? 0, shiftReason: evaluation.shift.reason, updatedAt: now,
        }, { changeField: "shiftAz", eventType: "shift" }),
      );
    }
    // Same model everywhere: every 10th period, what each live node says it serves.
    if (!early && this.ticks % 10 === 0) writes.push(this.publishModelSameness(snap, now));
    // Correctness canaries: the expected answers per model, from the fleet's majority or an operator's record.
    // With an inventory only its nodes vote (answers under other ids are pruned and counted as forged).
    if (!early && this.o.canary && this.ticks % 2 === 0) writes.push(this.publishCanaryExpectations(this.o.canary, now));
    if (!early && this.o.repair) writes.push(this.o.repair.round({ snap, azs: evaluation.azs, now, inventory: this.inventory }));
    if (!early && this.o.rollout) writes.push(this.o.rollout.round({ snap, azs: evaluation.azs, tier: evaluation.tier, now, inventory: this.inventory }));
    const results = await Promise.all(writes);
    if (results.some((r) => !r.accepted)) return null;

    logTransitions(this.log, this.last, evaluation, this.settings.zonalShift);
    this.memory = memory;
    this.practice = practice;
    this.scheduleAwake = scheduleAwake;
    this.last = evaluation;
    if (early) this.earlyTicks += 1;
    else this.ticks += 1;
    if (metrics) {
      for (const a of evaluation.azs) metrics.setAz(a.az, a.state, a.healthyCapacity, a.totalCapacity);
      metrics.setTier(evaluation.tier.level);
      metrics.setSuspect(evaluation.suspect);
      metrics.standbyWake.set(evaluation.standby.wake ? 1 : 0);
      metrics.standbyHealthy.set(evaluation.standbyHealthy);
    }
    this.o.onPublished?.(evaluation, term.token);
    return evaluation;
  }

  /** Same model everywhere (models.ts): the outlier key is kept to log only changes. */
  private async publishModelSameness(snap: RegistrySnapshot, now: number): Promise<{ accepted: boolean }> {
    const { redis, keys, writer, metrics } = this.o;
    const r = await publishModelSameness({ redis, keys, writer, log: this.log, metrics, recordKey: this.inventory ? (id) => this.inventory!.recordKey(id) : undefined }, snap, now, this.lastModelOutliers);
    this.lastModelOutliers = r.outlierKey;
    return r;
  }

  private async publishCanaryExpectations(canary: CanaryLearning, now: number): Promise<{ accepted: boolean }> {
    const { redis, keys, writer, metrics } = this.o;
    const voters = this.inventory?.voters() ?? undefined;
    const r = await publishExpectations(redis, keys, writer, canary.tolerance, now, canary.maxAgeMs, voters);
    if (r.outsiders.length) {
      metrics?.distrusted.inc({ what: "forged" }, r.outsiders.length);
      this.log.warn({ ids: r.outsiders.slice(0, 20), count: r.outsiders.length }, "canary answers under ids the inventory does not list were pruned, no vote: a node credential is being used to forge voters");
    }
    return r;
  }
}
