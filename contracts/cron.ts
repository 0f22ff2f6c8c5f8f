/**
 * The 5-field cron expressions EC2 Auto Scaling takes as a scheduled action's `recurrence`:
 * `minute hour day-of-month month day-of-week`. Each field is a comma list of `*`, `n` or
 * `a-b`, each optionally `/step`; months and weekdays may be named (`JAN`, `MON-FRI`); `?`
 * stands for `*` in the two day fields; weekday 0 and 7 are both Sunday. When both day fields
 * are restricted, a day matches if either matches (as in Vixie cron and crontab.guru).
 *
 * One parser serves the stack validation (`isCron`) and `llm-ha cost`, which replays the
 * standby schedule minute by minute, so both agree on what a recurrence means.
 */

const MINUTE_MS = 60_000;

export class CronError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CronError";
  }
}

/** A parsed expression: the values each field matches. */
export interface Cron {
  readonly source: string;
  readonly minutes: ReadonlySet<number>;
  readonly hours: ReadonlySet<number>;
  readonly days: ReadonlySet<number>;
  readonly months: ReadonlySet<number>;
  /** 0 = Sunday … 6 = Saturday. */
  readonly weekdays: ReadonlySet<number>;
  /** Day-of-month field is `*` or `?`: the day is chosen by the weekday field alone. */
  readonly anyDay: boolean;
  /** Day-of-week field is `*` or `?`: the day is chosen by the day-of-month field alone. */
  readonly anyWeekday: boolean;
}

/** A wall-clock minute in the schedule's time zone. */
export interface WallTime {
  minute: number;
  hour: number;
  /** Day of the month, 1–31. */
  day: number;
  /** 1–12. */
  month: number;
  /** 0 = Sunday … 6 = Saturday. */
  weekday: number;
}

interface Field {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  /** `?` is accepted (as `*`) in the day fields only. */
  day?: boolean;
}

const FIELDS: readonly Field[] = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31, day: true },
  { name: "month", min: 1, max: 12, names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"] },
  { name: "day of week", min: 0, max: 7, names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], day: true },
];

const ITEM = /^(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:\/([0-9]+))?$/;

function value(tok: string, f: Field): number {
  let n: number;
  if (/^[0-9]+$/.test(tok)) n = Number(tok);
  else {
    const i = f.names?.indexOf(tok.toUpperCase()) ?? -1;
    if (i < 0) throw new CronError(`${f.name}: unknown value "${tok}"${f.names ? ` (names: ${f.names[0]}…${f.names[f.names.length - 1]})` : ""}`);
    n = i + (f.name === "month" ? 1 : 0);
  }
  if (n < f.min || n > f.max) throw new CronError(`${f.name} ${n} is out of range ${f.min}-${f.max}`);
  return n;
}

function parseField(text: string, f: Field): { values: Set<number>; any: boolean } {
  const values = new Set<number>();
  // Weekday 7 is Sunday again; `*` covers 0–6 so nothing is counted twice.
  const top = f.name === "day of week" ? 6 : f.max;
  for (const item of text.split(",")) {
    const m = ITEM.exec(item);
    if (!m) throw new CronError(`${f.name}: cannot read "${item}"`);
    const [, range, stepText] = m;
    const step = stepText === undefined ? 1 : Number(stepText);
    if (step < 1) throw new CronError(`${f.name}: step must be at least 1`);
    let lo: number;
    let hi: number;
    if (range === "*" || range === "?") {
      if (range === "?" && !f.day) throw new CronError(`${f.name}: "?" is allowed in the day fields only`);
      [lo, hi] = [f.min, top];
    } else if (range.includes("-")) {
      const [a, b] = range.split("-");
      [lo, hi] = [value(a, f), value(b, f)];
      if (lo > hi) throw new CronError(`${f.name}: range ${range} runs backwards`);
    } else {
      lo = value(range, f);
      // `5/15` means from 5 to the end of the field, every 15.
      hi = stepText === undefined ? lo : top;
    }
    for (let v = lo; v <= hi; v += step) values.add(f.name === "day of week" && v === 7 ? 0 : v);
  }
  return { values, any: text === "*" || text === "?" };
}

/** Parses `expr`; throws a `CronError` that says which field is wrong and why. */
export function parseCron(expr: string): Cron {
  const parts = expr.trim().split(/\s+/).filter((s) => s !== "");
  if (parts.length !== 5) throw new CronError(`needs 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`);
  const [minutes, hours, days, months, weekdays] = parts.map((p, i) => parseField(p, FIELDS[i]));
  return {
    source: expr,
    minutes: minutes.values,
    hours: hours.values,
    days: days.values,
    months: months.values,
    weekdays: weekdays.values,
    anyDay: days.any,
    anyWeekday: weekdays.any,
  };
}

/** Why `expr` is not a cron expression Auto Scaling takes, or undefined when it is one. */
export function cronProblem(expr: string): string | undefined {
  try {
    parseCron(expr);
    return undefined;
  } catch (err) {
    if (err instanceof CronError) return err.message;
    throw err;
  }
}

/** True when `cron` fires at wall-clock minute `t`. */
export function cronMatches(cron: Cron, t: WallTime): boolean {
  if (!cron.minutes.has(t.minute) || !cron.hours.has(t.hour) || !cron.months.has(t.month)) return false;
  const dom = cron.days.has(t.day);
  const dow = cron.weekdays.has(t.weekday);
  return cron.anyDay || cron.anyWeekday ? dom && dow : dom || dow;
}

/** Wall-clock time in one IANA zone, with the UTC offset cached per quarter hour (zones change offset only on those). */
export class Zone {
  private readonly fmt: Intl.DateTimeFormat;
  private readonly offsets = new Map<number, number>();

  constructor(timeZone: string) {
    this.fmt = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
    });
  }

  private offset(t: number): number {
    const block = Math.floor(t / (15 * MINUTE_MS));
    let off = this.offsets.get(block);
    if (off === undefined) {
      const at = block * 15 * MINUTE_MS;
      const parts = Object.fromEntries(this.fmt.formatToParts(new Date(at)).map((p) => [p.type, p.value]));
      off = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute)) - at;
      this.offsets.set(block, off);
    }
    return off;
  }

  wall(t: number): WallTime {
    const d = new Date(t + this.offset(t));
    return { minute: d.getUTCMinutes(), hour: d.getUTCHours(), day: d.getUTCDate(), month: d.getUTCMonth() + 1, weekday: d.getUTCDay() };
  }
}

/**
 * The last minute at or before `now` (epoch ms) at which `cron` fired in `zone`, looking
 * back at most `lookbackMs` (default 8 days: every weekly schedule fires within it); null
 * when it did not fire in that window.
 */
export function lastFiring(cron: Cron, zone: Zone, now: number, lookbackMs = 8 * 1440 * MINUTE_MS): number | null {
  const from = Math.floor(now / MINUTE_MS) * MINUTE_MS;
  for (let t = from; t >= now - lookbackMs; t -= MINUTE_MS) if (cronMatches(cron, zone.wall(t))) return t;
  return null;
}
