/**
 * The 5-field cron expressions EC2 Auto Scaling takes as a scheduled action's `recurrence`:
 * `minute hour day-of-month month day-of-week`. Each field is a comma list of `*`, `n` or
 * `a-b`, each optionally `/step`; months and weekdays may be named (`JAN`, `MON-FRI`); `?`
 * stands for `*` in the two day fields; weekday 0 and 7 are both Sunday. When both day fields
 * are restricted, a day matches if either matches (as in Vixie cron and crontab.guru).
 *
 * croner's `CronPattern` expands the fields and says which day field is `*` or `?` (its
 * `starDOM`/`starDOW`, which `cronMatches` reads for the OR rule, croner's own default). Those
 * arrays and flags are public in croner's types, not in its README; the cron tests pin them.
 * croner reads more than Auto Scaling takes (seconds and years, `L`, `W`, `#`, `@daily`, `?`
 * in any field), and its errors do not say which field is wrong, so `checkField` first holds
 * each field to Auto Scaling's grammar, with a message that names the field.
 *
 * Matching stays a lookup of the wall-clock minute in the expanded fields. croner's own
 * `match(date)` converts the instant to its zone on every call: replaying 2026-02 for prod
 * minute by minute took 1.23 s with it against 0.12 s here, and a schedule that never fires
 * (a year of look-back) 15.1 s against 0.78 s. Its `previousRuns` would be fast, but it moves a
 * fixed-time job out of a spring-forward gap and runs it once in a repeated hour, while
 * `llm-ha cost` counts the wall-clock minutes that match; `lastFiring` walks the same minutes
 * so the agent and the cost report agree on when an action fired.
 *
 * One parser serves the stack validation (`isCron`), `llm-ha cost`, and the agent's hand-back.
 */
import { CronPattern } from "croner";

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
  /** How many slots croner keeps for the field: it refuses a longer step. */
  size: number;
  names?: readonly string[];
  /** `?` is accepted (as `*`) in the day fields only. */
  day?: boolean;
}

const FIELDS: readonly Field[] = [
  { name: "minute", min: 0, max: 59, size: 60 },
  { name: "hour", min: 0, max: 23, size: 24 },
  { name: "day of month", min: 1, max: 31, size: 31, day: true },
  { name: "month", min: 1, max: 12, size: 12, names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"] },
  { name: "day of week", min: 0, max: 7, size: 7, names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], day: true },
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

/**
 * Holds one field to Auto Scaling's grammar and returns it as croner should read it: names
 * become numbers (croner reads `-SUN` as 7, so `SUN-SUN` would be every day), a step longer
 * than the field, which croner refuses, is cut to the field's size, and `n/step` that reaches
 * no further value is `n` (each matches only its start value).
 */
function checkField(text: string, f: Field): string {
  return text
    .split(",")
    .map((item) => {
      const m = ITEM.exec(item);
      if (!m) throw new CronError(`${f.name}: cannot read "${item}"`);
      const [, range, stepText] = m;
      const step = stepText === undefined ? undefined : Number(stepText);
      if (step !== undefined && step < 1) throw new CronError(`${f.name}: step must be at least 1`);
      let out: string;
      if (range === "*" || range === "?") {
        if (range === "?" && !f.day) throw new CronError(`${f.name}: "?" is allowed in the day fields only`);
        out = range;
      } else if (range.includes("-")) {
        const [a, b] = range.split("-");
        const [lo, hi] = [value(a, f), value(b, f)];
        if (lo > hi) throw new CronError(`${f.name}: range ${range} runs backwards`);
        out = `${lo}-${hi}`;
      } else {
        const n = value(range, f);
        // `n/step` runs from n to the field's end; croner reads weekday `7/1` as no day at all.
        if (step !== undefined && n + step > f.max) return String(n);
        out = String(n);
      }
      return step === undefined ? out : `${out}/${Math.min(step, f.size)}`;
    })
    .join(",");
}

/** The values a croner field array holds (index + offset where the slot is set). */
function valuesOf(slots: readonly number[], offset: number): Set<number> {
  const out = new Set<number>();
  slots.forEach((on, i) => {
    if (on) out.add(i + offset);
  });
  return out;
}

/** Parses `expr`; throws a `CronError` that says which field is wrong and why. */
export function parseCron(expr: string): Cron {
  const parts = expr.trim().split(/\s+/).filter((s) => s !== "");
  if (parts.length !== 5) throw new CronError(`needs 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`);
  const checked = parts.map((p, i) => checkField(p, FIELDS[i])).join(" ");
  let p: CronPattern;
  try {
    // `5/15` (from 5 to the end of the field, every 15) is a "sloppy range" to croner.
    p = new CronPattern(checked, undefined, { mode: "5-part", sloppyRanges: true });
  } catch (err) {
    // The check above should leave nothing croner refuses; if it does, it is still a bad cron.
    if (err instanceof Error) throw new CronError(`${expr}: ${err.message.replace(/^CronPattern: /, "")}`);
    throw err;
  }
  return {
    source: expr,
    minutes: valuesOf(p.minute, 0),
    hours: valuesOf(p.hour, 0),
    days: valuesOf(p.day, 1),
    months: valuesOf(p.month, 1),
    // croner folds weekday 7 into 0 itself.
    weekdays: valuesOf(p.dayOfWeek.slice(0, 7), 0),
    anyDay: p.starDOM,
    anyWeekday: p.starDOW,
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

/**
 * Wall-clock time in one IANA zone, with the UTC offset cached per quarter hour (zones change
 * offset only on those). croner reads zones through the same `Intl.DateTimeFormat`, once per
 * call; the cache is what keeps a month's replay at one conversion per 15 minutes.
 */
export class Zone {
  private readonly fmt: Intl.DateTimeFormat;
  private readonly offsets = new Map<number, number>();

  /** Throws a RangeError for a zone the runtime's time zone data does not know. */
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
