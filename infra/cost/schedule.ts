import { type Cron, cronMatches, parseCron, Zone } from "../../contracts/cron";
import type { ScheduleConfig } from "../config";

const MINUTE = 60_000;
/** How far back to look for the action that set the standby size the month starts with. */
const LOOKBACK_DAYS = 366;

export class MonthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MonthError";
  }
}

/** A calendar month in UTC, as AWS bills it. */
export interface Month {
  /** `YYYY-MM`. */
  name: string;
  /** First millisecond (UTC). */
  start: number;
  /** First millisecond of the next month (UTC). */
  end: number;
  /** Hours in the month: days × 24. */
  hours: number;
}

/** Parses `YYYY-MM`; without an argument, the current UTC month. */
export function monthOf(name?: string, now = new Date()): Month {
  const text = name ?? `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, "0")}`;
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(text);
  if (!m) throw new MonthError(`--month ${JSON.stringify(text)}: expected YYYY-MM, e.g. 2026-02`);
  const [y, mo] = [Number(m[1]), Number(m[2])];
  const start = Date.UTC(y, mo - 1, 1);
  const end = Date.UTC(y, mo, 1);
  return { name: text, start, end, hours: (end - start) / 3_600_000 };
}

/** What the standby schedule does to its groups over one month. */
export interface StandbyHours {
  /** Minutes the standby groups sit at their desired size. */
  minutesUp: number;
  /** Minutes they sit at zero. */
  minutesDown: number;
  /** Whether the month starts with the groups up (the last action before it was a scale-up, or none ever fired). */
  startsUp: boolean;
  /** Scale-down and scale-up actions that change the size within the month. */
  scaleDowns: number;
  scaleUps: number;
}

interface Action {
  key: string;
  cron: Cron;
  up: boolean;
}

/**
 * The actions infra/standby-schedule.ts creates: `scaleDown` and `weekendDown` set the
 * standby groups to 0, `scaleUp` back to `desiredPerAz`. The crons were validated by
 * `resolveConfig`, whose error names the key, before they get here.
 */
function actions(s: ScheduleConfig): Action[] {
  const list: Action[] = [
    { key: "scaleDown", cron: parseCron(s.scaleDown), up: false },
    { key: "scaleUp", cron: parseCron(s.scaleUp), up: true },
  ];
  if (s.weekendDown !== undefined) list.push({ key: "weekendDown", cron: parseCron(s.weekendDown), up: false });
  return list;
}

/**
 * Replays the standby schedule minute by minute over `month` in the schedule's time zone.
 * An action fires at the start of its minute and holds until the next one; when a scale-up
 * and a scale-down fire in the same minute, the scale-up wins (the side that keeps capacity).
 * The size the month starts with comes from the last action in the year before it.
 */
export function standbyHours(schedule: ScheduleConfig, month: Month): StandbyHours {
  return replay(schedule, month);
}

/** Practice wakes over one month: how often the cron fires, and how often the standby is at zero then (a practice runs) or up (skipped). */
export interface PracticeRuns {
  firings: number;
  /** Firings while the schedule has the standby at zero: each wakes it for up to its budget. */
  runs: number;
  /** Firings while the standby is up: the leader skips them. */
  skipped: number;
}

/** Replays the standby schedule over `month` and counts the practice cron's firings (in its own zone) by the standby's size then. */
export function practiceRuns(schedule: ScheduleConfig, practice: { cron: string; timeZone: string }, month: Month): PracticeRuns {
  const cron = parseCron(practice.cron);
  const zone = new Zone(practice.timeZone);
  const out: PracticeRuns = { firings: 0, runs: 0, skipped: 0 };
  replay(schedule, month, (t, up) => {
    if (!cronMatches(cron, zone.wall(t))) return;
    out.firings++;
    if (up) out.skipped++;
    else out.runs++;
  });
  return out;
}

/** The minute-by-minute replay behind `standbyHours`; `onMinute` sees each minute of the month with the size after that minute's actions. */
function replay(schedule: ScheduleConfig, month: Month, onMinute?: (t: number, up: boolean) => void): StandbyHours {
  const acts = actions(schedule);
  const zone = new Zone(schedule.timeZone);
  const fired = (t: number): boolean | undefined => {
    const w = zone.wall(t);
    let result: boolean | undefined;
    for (const a of acts) if (cronMatches(a.cron, w)) result = result === true || a.up;
    return result;
  };

  let up = true;
  for (let t = month.start - MINUTE; t >= month.start - LOOKBACK_DAYS * 1440 * MINUTE; t -= MINUTE) {
    const f = fired(t);
    if (f !== undefined) {
      up = f;
      break;
    }
  }
  const startsUp = up;
  let minutesUp = 0;
  let scaleDowns = 0;
  let scaleUps = 0;
  for (let t = month.start; t < month.end; t += MINUTE) {
    const f = fired(t);
    if (f !== undefined && f !== up) {
      up = f;
      if (up) scaleUps++;
      else scaleDowns++;
    }
    if (up) minutesUp++;
    onMinute?.(t, up);
  }
  return { minutesUp, minutesDown: month.hours * 60 - minutesUp, startsUp, scaleDowns, scaleUps };
}
