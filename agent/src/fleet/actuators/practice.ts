/**
 * Practice wakes: scale-to-zero of the standby AZ is only safe if waking it works
 * on the day it is needed, so on a schedule (a cron in a time zone, default weekly at a quiet
 * hour) — or when an operator asks (`llm-ha practice`) — the leader wakes the standby at zero, waits for the first standby node serving,
 * records the wake time and the outcome, and releases it. Skipped when the tier is above L0
 * or the standby is already awake (an incident, or the schedule's day hours).
 *
 * Pure: `practiceStep` is a function of (memory, what the controller saw this period,
 * settings, clock). The controller overrides the published standby decision while a
 * practice runs (the tier is not touched: a practice is not an incident), the reconciler
 * wakes and releases as for any decision and times the wake (`trigger="practice"`), and the
 * controller writes each outcome to the `practice` hash and the `events` stream.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { lastFiring, parseCron, Zone, type Cron } from "../../../../contracts/cron";
import type { TierLevel } from "../controller/state";

/** The reason a practice's standby decision carries (the reconciler reads `trigger` from it). */
export const PRACTICE_REASON_PREFIX = "practice wake";

export interface PracticeSettings {
  /** 5-field cron (`LLMHA_PRACTICE_WAKE`), e.g. `0 4 * * 2` (Tuesdays 04:00); null: only on request (`llm-ha practice`). */
  cron: string | null;
  /** IANA zone of the cron (`LLMHA_PRACTICE_WAKE_TZ`). Default UTC. */
  timeZone: string;
  /** A practice with no standby node serving this long has failed, and is released (`LLMHA_PRACTICE_WAKE_BUDGET_MS`). */
  budgetMs: number;
}

export const DEFAULT_PRACTICE_BUDGET_MS = 1_200_000;

export interface PracticeRecord {
  /** Epoch ms: when the practice started (or was skipped). */
  at: number;
  outcome: "served" | "failed" | "skipped" | "interrupted";
  /** Decision to first standby node serving (served only). */
  wakeMs: number | null;
  reason: string;
}

export interface PracticeMemory {
  /** Epoch ms up to which firings were looked at (null: this term has not looked yet). */
  checkedAt: number | null;
  /** The last firing acted on (started or skipped), epoch ms. */
  firedAt: number;
  /** The practice running now: its start, null when none. */
  startedAt: number | null;
}

export function emptyPracticeMemory(firedAt = 0): PracticeMemory {
  return { checkedAt: null, firedAt, startedAt: null };
}

/** What the controller saw this period. */
export interface PracticeInput {
  tier: TierLevel;
  /** The incident decision wants the standby awake. */
  standbyWanted: boolean;
  /** Healthy GPUs of the standby AZ. */
  standbyHealthy: number;
  /** The actuator's word that the standby cannot be woken (every fallback step failed), null when it can. */
  unavailable: string | null;
  /** An operator's request for a practice now (`llm-ha practice`: epoch ms), null when none. */
  requestedAt?: number | null;
}

export interface PracticeStep {
  memory: PracticeMemory;
  /** Override the standby decision: wake for the practice. */
  wake: boolean;
  reason: string;
  /** Set when a practice ended or was skipped this period. */
  record?: PracticeRecord;
}

/** How far back a term that has not looked yet searches for a firing (a leader handover). */
const FIRST_LOOK_MS = 60_000;
/** Longest window one period looks at (a controller stalled longer catches up only this much). */
const MAX_LOOK_MS = 600_000;

export class PracticeSchedule {
  readonly cron: Cron | null;
  readonly zone: Zone;

  private readonly outcomes?: Counter<"outcome">;
  private readonly lastWake?: Gauge;
  private readonly lastAt?: Gauge<"outcome">;

  /** Throws `CronError` / `RangeError` on a bad cron or zone (`loadConfig` checks them at start-up). */
  constructor(
    readonly s: PracticeSettings,
    registry?: Registry,
  ) {
    this.cron = s.cron === null ? null : parseCron(s.cron);
    this.zone = new Zone(s.timeZone);
    if (registry) {
      const registers = [registry];
      this.outcomes = new Counter({ name: "llmha_practice_wakes_total", help: "Practice wakes of the standby by outcome (served, failed, skipped, interrupted)", labelNames: ["outcome"], registers });
      for (const outcome of ["served", "failed", "skipped", "interrupted"]) this.outcomes.inc({ outcome }, 0);
      this.lastWake = new Gauge({ name: "llmha_practice_last_wake_seconds", help: "Wake time of the last practice that served (decision to first standby node serving)", registers });
      this.lastAt = new Gauge({ name: "llmha_practice_last_timestamp_seconds", help: "When the last practice wake started or was skipped, by its outcome", labelNames: ["outcome"], registers });
    }
  }

  /** Counts an outcome the controller recorded (metrics; the alert reads `failed`). */
  recorded(r: PracticeRecord): void {
    this.outcomes?.inc({ outcome: r.outcome });
    this.lastAt?.set({ outcome: r.outcome }, r.at / 1000);
    if (r.outcome === "served" && r.wakeMs !== null) this.lastWake?.set(r.wakeMs / 1000);
  }

  /** One controller period. */
  step(prev: PracticeMemory, e: PracticeInput, now: number): PracticeStep {
    const checkedAt = prev.checkedAt ?? now - FIRST_LOOK_MS;
    const look = Math.min(MAX_LOOK_MS, Math.max(0, now - checkedAt));
    const scheduled = this.cron ? lastFiring(this.cron, this.zone, now, look) : null;
    // An operator's request counts as a firing at its time (once: `firedAt` then covers it); one from the future waits.
    const requested = e.requestedAt != null && e.requestedAt <= now ? e.requestedAt : null;
    const fired = scheduled === null ? requested : requested === null ? scheduled : Math.max(scheduled, requested);
    const memory: PracticeMemory = { ...prev, checkedAt: now };
    if (prev.startedAt !== null) {
      const ran = now - prev.startedAt;
      const end = (outcome: PracticeRecord["outcome"], reason: string): PracticeStep => ({
        memory: { ...memory, startedAt: null },
        wake: false,
        reason,
        record: { at: prev.startedAt!, outcome, wakeMs: outcome === "served" ? ran : null, reason },
      });
      if (e.standbyWanted) return end("interrupted", "an incident wants the standby: practice ended, the incident keeps it awake");
      if (e.standbyHealthy > 0) return end("served", `first standby node serving ${(ran / 1000).toFixed(1)} s after the practice wake`);
      if (e.unavailable) return end("failed", e.unavailable);
      if (ran >= this.s.budgetMs) return end("failed", `no standby node serving ${Math.round(ran / 1000)} s after the practice wake (budget ${Math.round(this.s.budgetMs / 1000)} s)`);
      return { memory, wake: true, reason: `${PRACTICE_REASON_PREFIX} (started ${new Date(prev.startedAt).toISOString()})` };
    }
    if (fired === null || fired <= prev.firedAt) return { memory, wake: false, reason: "" };
    const skip = (reason: string): PracticeStep => ({ memory: { ...memory, firedAt: fired }, wake: false, reason, record: { at: now, outcome: "skipped", wakeMs: null, reason } });
    if (e.tier !== "L0") return skip(`skipped: tier ${e.tier}`);
    if (e.standbyWanted || e.standbyHealthy > 0) return skip("skipped: the standby is already awake");
    return { memory: { ...memory, firedAt: fired, startedAt: now }, wake: true, reason: `${PRACTICE_REASON_PREFIX} (due ${new Date(fired).toISOString()})` };
  }
}
