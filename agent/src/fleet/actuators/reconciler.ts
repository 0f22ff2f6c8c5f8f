/**
 * From the controller's desired state to the world: after every published period the
 * leader hands its evaluation here, and the reconciler drives the actuator toward it —
 * wake the standby AZ when `standby.wake` turns true, hand it back to its schedule when it
 * turns false (the hold is the controller's), start, renew and cancel the zonal shift.
 *
 * - Never blocks the controller's tick: calls run in the background, at most one per slot
 *   (`standby`, `shift`) in flight.
 * - Desired state, re-asserted: a wake and a shift are asked again every `reassertMs` (the
 *   actuator answers `already`, or repairs a schedule that scaled the group in meanwhile,
 *   and a shift's expiry is pushed out). A release or a cancel is asked until it succeeds.
 * - A failed call is retried from the next period on, with exponential backoff.
 * - Every call carries the term's token through `FencedActuator`; a new term starts from
 *   what the last one recorded in the `actuation` hash; a lost term (or a `refused-stale`)
 *   stops the actions of that term at once.
 * - A wake is followed: until a standby node is healthy, the wake is asked
 *   again every `wakeFollowMs`, and each call reads the launches and wakes the next fallback
 *   step when the last one failed (one fenced, recorded call per step). When every step
 *   failed, `standbyUnavailable()` gives the reason the controller puts in the tier.
 * - A wake whose woken step is in service but never healthy falls back (wake-follow.ts
 *   `unhealthy`; the leader's healthy standby capacity goes with each wake call, and the
 *   groups judged failed are kept for the incident), and a wake released with no healthy
 *   standby node makes the next one wait (wake-backoff.ts): no wake/release loop onto bad GPUs.
 * - Wake time: from the decision (the first period wanting the standby awake while it had no
 *   healthy capacity) to the first period with a healthy standby node, in
 *   `llmha_standby_wake_seconds`.
 */
import type { FleetMetrics } from "../controller/metrics";
import type { Evaluation } from "../controller/state";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import type { Redis } from "ioredis";
import type { Registry } from "prom-client";
import type { ActionResult, Actuator, StateActionName as ActionName, WakeReport } from "./types";
import { unavailableReason, wakeReportFields } from "./wake-follow";
import { afterRelease, backoffLine, emptyWakeIncident, incidentFields, incidentFrom, withHealthy, withUnhealthy, type WakeIncident } from "./wake-backoff";
import { PRACTICE_REASON_PREFIX } from "./practice";
import { SCHEDULE_REASON_PREFIX } from "./karpenter/schedule";

// The wake's series live beside it (one class per concern); re-exported for the callers of this module.
export { WAKE_SECONDS_METRIC, WakeMetrics } from "./wake-metrics";
import { WakeMetrics } from "./wake-metrics";

// The settings live beside it (re-exported for the callers of this module).
export { DEFAULT_RECONCILER_SETTINGS, ReconcilerSettingsError, resolveReconcilerSettings, type ReconcilerSettings } from "./reconciler-settings";
import { resolveReconcilerSettings, type ReconcilerSettings } from "./reconciler-settings";

export const SLOTS = ["standby", "shift"] as const;
export type Slot = (typeof SLOTS)[number];

/** One wanted call. */
interface Want {
  action: ActionName;
  az: string;
  reason: string;
  /** `standby.wake`: the standby's healthy GPUs in the evaluation that asked it. */
  healthy?: number;
}

export interface SlotState {
  /** The last call that reached its desired state (`applied`, `already`, `dry-run`), or the one recorded by the previous term. */
  done: { action: ActionName; az: string; at: number } | null;
  /** The call running now. */
  inFlight: Want | null;
  /** Consecutive failures of the wanted call. */
  failures: number;
  /** Epoch ms before which a failed call is not retried. */
  retryAt: number;
  last: (ActionResult & { at: number; token: number }) | null;
  /** Epoch ms at which a followed wake is asked again (null: not following). */
  followAt?: number | null;
}

export interface ReconcilerOptions {
  actuator: Actuator;
  redis: Redis;
  keys: RedisKeys;
  writer: FencedWriter;
  /** The token of the term this process leads now, or null. */
  currentToken(): number | null;
  log: Logger;
  metrics?: FleetMetrics;
  settings?: Partial<ReconcilerSettings>;
  now?: () => number;
  /** Registry for the wake series (`llmha_standby_wake_seconds`…). Default none. */
  registry?: Registry;
}

const SUCCESS = new Set(["applied", "already", "dry-run"]);

const emptySlot = (): SlotState => ({ done: null, inFlight: null, failures: 0, retryAt: 0, last: null });

export class Reconciler {
  readonly settings: Readonly<ReconcilerSettings>;
  private readonly o: ReconcilerOptions;
  private readonly log: Logger;
  private readonly now: () => number;
  private token: number | null = null;
  /** The term's memory is read from Redis before its first call. */
  private seeded: Promise<void> | null = null;
  private halted = false;
  private slots: Record<Slot, SlotState> = { standby: emptySlot(), shift: emptySlot() };
  private readonly running = new Set<Promise<void>>();
  private readonly shiftShown = new Set<string>();
  private readonly wakeMetrics?: WakeMetrics;
  /** The last followed wake's report (null when none or released). */
  private wake: WakeReport | null = null;
  /** The wake being timed: decided at (epoch ms), and whether a standby node served yet. */
  private wakeClock: { decidedAt: number; served: boolean; trigger: "incident" | "practice" | "schedule" } | null = null;
  /** Decision time the previous term recorded for a wake not yet served. */
  private seededDecidedAt: number | null = null;
  /** The last wake time measured (ms), for status and tests. */
  lastWakeMs: number | null = null;
  /** What this wake leaves for the next: groups failed `unhealthy`, a healthy node seen, the back-off (`actuation` hash). */
  private incident: WakeIncident = emptyWakeIncident();

  constructor(o: ReconcilerOptions) {
    this.o = o;
    this.settings = resolveReconcilerSettings(o.settings);
    this.log = o.log.child({ component: "reconciler", actuator: o.actuator.kind });
    this.now = o.now ?? Date.now;
    if (o.registry) this.wakeMetrics = new WakeMetrics(o.registry);
  }

  /** Why the standby cannot be woken (every step of the fallback order failed), null otherwise: the controller shows it in the tier. */
  standbyUnavailable(): string | null {
    return this.token !== null && this.wake?.phase === "unavailable" ? unavailableReason(this.wake) : null;
  }

  /** `backoff until …, because …` while a new wake waits (the last ended with no healthy standby node), else null. */
  standbyBackoff(): string | null {
    return this.token !== null ? backoffLine(this.incident, this.now()) : null;
  }

  /** The wake's memory (failed groups, back-off), for tests. */
  wakeIncident(): Readonly<WakeIncident> {
    return this.incident;
  }

  /** The last followed wake's report, for status and tests. */
  wakeReport(): WakeReport | null {
    return this.wake;
  }

  /** What this term knows of each slot (for status and tests). */
  state(): { token: number | null; halted: boolean; slots: Readonly<Record<Slot, SlotState>> } {
    return { token: this.token, halted: this.halted, slots: this.slots };
  }

  /** After each published controller period. Returns at once; calls run in the background. */
  onEvaluation(e: Evaluation, token: number): void {
    if (token !== this.token) this.beginTerm(token);
    if (this.halted || this.o.currentToken() !== token) return;
    const seeded = this.seeded!;
    const p = seeded.then(() => {
      this.noteHealthy(e, token);
      this.timeWake(e, token);
      this.drive(e, token);
    });
    this.track(p);
  }

  /** The term ended (lease lost or released): nothing more is asked with its token. */
  endTerm(): void {
    if (this.token === null) return;
    this.log.info({ token: this.token }, "term ended: actions stopped");
    this.token = null;
    this.seeded = null;
    this.slots = { standby: emptySlot(), shift: emptySlot() };
    this.wake = null;
    this.wakeClock = null;
    this.incident = emptyWakeIncident();
    this.wakeMetrics?.unavailable.set({ kind: this.o.actuator.kind }, 0);
    // A process that does not lead holds no shift (the next leader reports its own).
    for (const az of this.shiftShown) this.o.metrics?.zonalShift.set({ az }, 0);
  }

  /** Waits for the calls in flight (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  private track(p: Promise<void>): void {
    const q = p.catch((err: unknown) => this.log.warn({ err: (err as Error).message }, "reconcile failed"));
    this.running.add(q);
    void q.finally(() => this.running.delete(q));
  }

  /** A healthy standby node while it is awake on our wake: the wake works, the back-off is reset (recorded once). */
  private noteHealthy(e: Evaluation, token: number): void {
    if (e.standbyHealthy <= 0 || this.slots.standby.done?.action !== "standby.wake") return;
    const next = withHealthy(this.incident);
    if (next === this.incident) return;
    this.incident = next;
    void this.record(incidentFields(next), token);
  }

  /** Wake time: from the first period wanting the standby awake with no healthy standby capacity to the first with some. */
  private timeWake(e: Evaluation, token: number): void {
    if (!e.standby.az || !e.standby.wake) {
      if (this.wakeClock && !this.wakeClock.served) void this.record({ "standby.decidedAt": "" }, token);
      this.wakeClock = null;
      this.seededDecidedAt = null;
      return;
    }
    const now = this.now();
    if (!this.wakeClock) {
      if (e.standbyHealthy > 0) return; // already awake: nothing to time
      if (this.standbyBackoff() !== null && this.slots.standby.done?.action !== "standby.wake") return; // not woken: backing off
      this.wakeClock = { decidedAt: this.seededDecidedAt ?? now, served: false, trigger: e.standby.reason.startsWith(PRACTICE_REASON_PREFIX) ? "practice" : e.standby.reason.startsWith(SCHEDULE_REASON_PREFIX) ? "schedule" : "incident" };
      this.seededDecidedAt = null;
      void this.record({ "standby.decidedAt": this.wakeClock.decidedAt }, token);
      return;
    }
    if (this.wakeClock.served || e.standbyHealthy <= 0) return;
    this.wakeClock.served = true;
    const ms = now - this.wakeClock.decidedAt;
    this.lastWakeMs = ms;
    const path = (this.wake?.step ?? 0) > 0 ? "fallback" : "first-choice";
    this.wakeMetrics?.wakeSeconds.observe({ kind: this.o.actuator.kind, path, trigger: this.wakeClock.trigger }, ms / 1000);
    this.log.info({ wakeMs: ms, path, step: this.wake?.step ?? 0 }, "first standby node serving");
    void this.record({ "standby.servedMs": ms, "standby.servedAt": now, "standby.decidedAt": "" }, token);
  }

  private async record(fields: Record<string, string | number>, token: number): Promise<void> {
    if (this.o.currentToken() !== token) return;
    try {
      await this.o.writer.hset(this.o.keys.actuation, fields);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "could not record the wake time in the actuation hash");
    }
  }

  private beginTerm(token: number): void {
    this.token = token;
    this.halted = false;
    this.slots = { standby: emptySlot(), shift: emptySlot() };
    this.seeded = this.seed(token).catch((err: unknown) => {
      this.log.warn({ err: (err as Error).message }, "could not read the last term's actions; starting from none");
    });
  }

  /** What the previous term left in the `actuation` hash: a group it woke, a zone it shifted. */
  private async seed(token: number): Promise<void> {
    const h = await this.o.redis.hgetall(this.o.keys.actuation);
    if (this.token !== token) return;
    // A wake the last term decided and did not see served keeps its decision time.
    const decided = Number(h["standby.decidedAt"] ?? "");
    this.seededDecidedAt = Number.isFinite(decided) && decided > 0 ? decided : null;
    this.incident = incidentFrom(h);
    for (const slot of SLOTS) {
      const action = h[`${slot}.action`] as ActionName | undefined;
      const az = h[`${slot}.az`];
      if (!action || !az) continue;
      // A failed release or cancel still leaves the group awake / the zone shifted: record the opposite as done.
      const ok = SUCCESS.has(h[`${slot}.outcome`] ?? "");
      const done: ActionName = ok ? action : action === "standby.release" ? "standby.wake" : action === "shift.cancel" ? "shift.start" : action;
      // `at: 0`: the wanted state is asserted again at once by the new term.
      this.slots[slot].done = { action: done, az, at: 0 };
    }
  }

  private wants(e: Evaluation): Record<Slot, Want | null> {
    const sb = this.slots.standby.done;
    let standby: Want | null = null;
    if (e.standby.az && e.standby.wake) {
      // A new wake (not a re-assertion) waits out the back-off a wake with no healthy node left.
      const backoff = sb?.action === "standby.wake" ? null : backoffLine(this.incident, this.now());
      standby = backoff ? null : { action: "standby.wake", az: e.standby.az, reason: e.standby.reason, healthy: e.standbyHealthy };
    }
    else if (sb?.action === "standby.wake") standby = { action: "standby.release", az: sb.az, reason: e.standby.az ? e.standby.reason : "no standby AZ" };
    const sh = this.slots.shift.done;
    const shifted = sh?.action === "shift.start" ? sh.az : null;
    let shift: Want | null = null;
    if (shifted && shifted !== e.shift.az) shift = { action: "shift.cancel", az: shifted, reason: e.shift.reason };
    else if (e.shift.az) shift = { action: "shift.start", az: e.shift.az, reason: e.shift.reason };
    return { standby, shift };
  }

  private due(slot: SlotState, want: Want, now: number): boolean {
    if (slot.inFlight) return false;
    if (slot.failures > 0 && now < slot.retryAt) return false;
    const d = slot.done;
    if (!d || d.action !== want.action || d.az !== want.az) return true;
    if (want.action === "standby.wake" && slot.followAt != null && now >= slot.followAt) return true;
    const reassert = want.action === "standby.wake" || want.action === "shift.start";
    return reassert && now - d.at >= this.settings.reassertMs;
  }

  private drive(e: Evaluation, token: number): void {
    if (this.halted || this.token !== token || this.o.currentToken() !== token) return;
    const wants = this.wants(e);
    const now = this.now();
    for (const name of SLOTS) {
      const want = wants[name];
      const slot = this.slots[name];
      if (want && this.due(slot, want, now)) this.track(this.call(name, want, token));
    }
  }

  private async call(name: Slot, want: Want, token: number): Promise<void> {
    const slot = this.slots[name];
    slot.inFlight = want;
    const a = this.o.actuator;
    const ctx = { token, reason: want.reason };
    let r: ActionResult;
    try {
      switch (want.action) {
        case "standby.wake":
          r = await a.wakeStandby(want.az, { ...ctx, wakeHealth: { healthy: want.healthy ?? null, failed: this.incident.failed } });
          break;
        case "standby.release":
          r = await a.releaseStandby(want.az, ctx);
          break;
        case "shift.start":
          r = await a.startZonalShift(want.az, { ...ctx, expiresInMs: this.settings.shiftExpiryMs });
          break;
        case "shift.cancel":
          r = await a.cancelZonalShift(want.az, ctx);
          break;
      }
    } finally {
      slot.inFlight = null;
    }
    // A term that ended while the call ran keeps nothing of it (the next term re-reads the world).
    if (this.token !== token) return;
    const at = this.now();
    slot.last = { ...r, at, token };
    const phaseBefore = this.wake?.phase ?? null;
    const incidentBefore = this.incident;
    if (want.action === "standby.wake" && r.wake) {
      this.wake = r.wake;
      if (r.wake.unhealthy?.length) {
        this.incident = withUnhealthy(this.incident, r.wake.unhealthy);
        this.log.warn({ unhealthy: r.wake.unhealthy }, "standby step in service with no healthy node within the bound: failed for this incident");
      }
      // Followed until a standby node is healthy: an instance in service may never be (`unhealthy`).
      slot.followAt = r.wake.phase === "serving" && (want.healthy ?? 0) > 0 ? null : at + this.settings.wakeFollowMs;
      const kind = this.o.actuator.kind;
      if (r.wake.phase === "fallback" && r.outcome === "applied") this.wakeMetrics?.fallbacks.inc({ kind, class: r.wake.failure?.class ?? "unknown" });
      this.wakeMetrics?.unavailable.set({ kind }, r.wake.phase === "unavailable" ? 1 : 0);
      if (r.wake.phase !== phaseBefore) this.log[r.wake.phase === "unavailable" ? "warn" : "info"]({ phase: r.wake.phase, step: r.wake.step, groups: r.wake.groups, failure: r.wake.failure }, "standby wake");
    }
    if (want.action === "standby.release" && SUCCESS.has(r.outcome)) {
      this.incident = afterRelease(this.incident, this.settings, at, this.wake?.phase === "unavailable" ? this.wake.failure : undefined);
      if (this.incident.backoffUntil > at) this.log.warn({ backoffMs: this.incident.backoffMs, reason: this.incident.backoffReason }, "standby released with no healthy node: the next wake backs off");
      this.wake = null;
      slot.followAt = null;
      this.wakeMetrics?.unavailable.set({ kind: this.o.actuator.kind }, 0);
    }
    if (SUCCESS.has(r.outcome)) {
      slot.done = { action: want.action, az: want.az, at };
      slot.failures = 0;
      if (want.action === "shift.start") {
        this.shiftShown.add(want.az);
        this.o.metrics?.zonalShift.set({ az: want.az }, 1);
      }
      if (want.action === "shift.cancel") this.o.metrics?.zonalShift.set({ az: want.az }, 0);
    } else if (r.outcome === "refused-stale") {
      this.halted = true;
      this.log.warn({ token, action: want.action, az: want.az, detail: r.detail }, "fencing token refused: this term acts no more");
      return;
    } else {
      slot.failures += 1;
      slot.retryAt = at + Math.min(this.settings.retryMaxMs, this.settings.retryBaseMs * 2 ** (slot.failures - 1));
    }
    if (this.incident !== incidentBefore) await this.record(incidentFields(this.incident), token);
    // `already` re-assertions are not news, except a shift's renewal (its expiry moved) and a followed wake's new phase.
    if (r.outcome !== "already" || want.action === "shift.start" || (r.wake && r.wake.phase !== phaseBefore)) await this.publish(name, want, r, at, token);
  }

  /** The last action per slot in the `actuation` hash, for `llm-ha status` and the next term. */
  private async publish(name: Slot, want: Want, r: ActionResult, at: number, token: number): Promise<void> {
    if (this.o.currentToken() !== token) return;
    const fields: Record<string, string | number> = {
      actuator: this.o.actuator.kind,
      [`${name}.action`]: want.action,
      [`${name}.az`]: want.az,
      [`${name}.outcome`]: r.outcome,
      [`${name}.detail`]: r.detail.slice(0, 500),
      [`${name}.reason`]: want.reason.slice(0, 200),
      [`${name}.at`]: at,
      [`${name}.token`]: token,
      updatedAt: at,
    };
    if (want.action === "shift.start" && SUCCESS.has(r.outcome)) fields["shift.expiresAt"] = at + this.settings.shiftExpiryMs;
    if (r.wake) Object.assign(fields, wakeReportFields(r.wake));
    try {
      await this.o.writer.hset(this.o.keys.actuation, fields);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "could not record the action in the actuation hash");
    }
  }
}
