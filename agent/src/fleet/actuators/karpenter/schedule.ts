/**
 * The standby's scale-to-zero schedule when Karpenter gives it its capacity
 * (`LLMHA_STANDBY_SCHEDULE`, `LLMHA_STANDBY_SCHEDULE_TZ`). Karpenter has no scheduled scaling,
 * so the leader runs the schedule itself: the standby is wanted awake after `scaleUp` fired
 * and parked after `scaleDown` (or `weekendDown`) fired, whichever fired last — the same crons
 * the Auto Scaling scheduled actions run for `asg` (infra/standby-schedule.ts).
 *
 * Unlike those actions, the leader knows why the standby is awake: a park never lands while an
 * incident or the hold wants the standby (the controller's standby decision wins), nor while the
 * tier is above L0 and the standby was up by the schedule — it waits for the tier to come back.
 * A scheduled action on an Auto Scaling group cannot tell; there llm-ha suspends the group's
 * scheduled actions while it holds a wake instead.
 *
 * Pure apart from a cache: `say` is a function of the clock; what it found is kept so a period
 * looks back only over the minutes since the last one (8 days on the first look).
 */
import { lastFiring, parseCron, Zone, type Cron } from "../../../../../contracts/cron";
import type { TierLevel } from "../../controller/state";
import type { StandbyScheduleSpec } from "./settings";

/** The reason a scheduled wake carries (the reconciler reads `trigger` from it). */
export const SCHEDULE_REASON_PREFIX = "standby schedule";

const WEEK_MS = 8 * 86_400_000;

export type ScheduleAction = "scaleDown" | "scaleUp" | "weekendDown";

/** The schedule's say now: the action that fired last and when (null: none within 8 days). */
export interface ScheduleSay {
  up: boolean;
  action: ScheduleAction | null;
  firedAt: number | null;
}

/** What the controller does with it this period. */
export interface ScheduleStep {
  /** Override the standby decision: awake by the schedule. */
  wake: boolean;
  reason: string;
  /** Awake by the schedule this period (the next period's `awakeBySchedule`). */
  awakeBySchedule: boolean;
}

export class StandbyParkSchedule {
  private readonly crons: [ScheduleAction, Cron][];
  private readonly zone: Zone;
  private last: { action: ScheduleAction; firedAt: number } | null = null;
  private checkedAt: number | null = null;

  /** Throws `CronError` / `RangeError` on a bad cron or zone (`loadConfig` checks them at start-up). */
  constructor(spec: StandbyScheduleSpec, timeZone: string) {
    this.crons = [["scaleDown", parseCron(spec.scaleDown)], ["scaleUp", parseCron(spec.scaleUp)]];
    if (spec.weekendDown) this.crons.push(["weekendDown", parseCron(spec.weekendDown)]);
    this.zone = new Zone(timeZone);
  }

  say(now: number): ScheduleSay {
    // A clock that went back (or the first look): search the whole window again.
    if (this.checkedAt === null || now < this.checkedAt) {
      this.last = null;
      this.checkedAt = now - WEEK_MS;
    }
    const look = Math.min(WEEK_MS, now - this.checkedAt);
    for (const [action, cron] of this.crons) {
      const at = lastFiring(cron, this.zone, now, look);
      // Ties (two crons on one minute): a park wins, the cheaper mistake.
      if (at !== null && (!this.last || at > this.last.firedAt || (at === this.last.firedAt && action !== "scaleUp"))) this.last = { action, firedAt: at };
    }
    this.checkedAt = now;
    if (this.last && now - this.last.firedAt > WEEK_MS) this.last = null;
    return { up: this.last?.action === "scaleUp", action: this.last?.action ?? null, firedAt: this.last?.firedAt ?? null };
  }

  /**
   * One controller period: awake by the schedule after `scaleUp`; after a park action, parked —
   * unless the standby is wanted (the decision itself stays awake) or the tier is above L0 with
   * the standby up by the schedule (the park waits).
   */
  step(now: number, e: { wanted: boolean; tier: TierLevel; awakeBySchedule: boolean }): ScheduleStep {
    const s = this.say(now);
    const when = s.firedAt === null ? "" : ` ${new Date(s.firedAt).toISOString()}`;
    if (s.up) return { wake: !e.wanted, reason: `${SCHEDULE_REASON_PREFIX}: up since scaleUp${when}`, awakeBySchedule: true };
    if (e.wanted) return { wake: false, reason: "", awakeBySchedule: false };
    if (e.awakeBySchedule && e.tier !== "L0") return { wake: true, reason: `${SCHEDULE_REASON_PREFIX}: ${s.action ?? "park"}${when} deferred while the tier is ${e.tier}`, awakeBySchedule: true };
    return { wake: false, reason: "", awakeBySchedule: false };
  }
}
