import { describe, expect, it } from "vitest";
import { cronMatches, cronProblem, lastFiring, parseCron, Zone } from "../../contracts/cron";
import { isCron } from "../../infra/config";
import { monthOf, standbyHours } from "../../infra/cost/schedule";

const at = (minute: number, hour: number, day: number, month: number, weekday: number) => ({ minute, hour, day, month, weekday });

describe("cron expressions", () => {
  it("reads lists, ranges, steps and names", () => {
    const c = parseCron("*/20 8-10,22 * JAN,jul mon-FRI");
    expect([...c.minutes]).toEqual([0, 20, 40]);
    expect([...c.hours]).toEqual([8, 9, 10, 22]);
    expect([...c.months]).toEqual([1, 7]);
    expect([...c.weekdays]).toEqual([1, 2, 3, 4, 5]);
    expect([...parseCron("0 0 * * 5-7").weekdays].sort()).toEqual([0, 5, 6]);
    expect([...parseCron("5/20 * * * *").minutes]).toEqual([5, 25, 45]);
  });

  it("matches a day when either restricted day field does, and both when one is *", () => {
    const either = parseCron("0 12 1 * MON");
    expect(cronMatches(either, at(0, 12, 1, 6, 3))).toBe(true); // the 1st, a Wednesday
    expect(cronMatches(either, at(0, 12, 8, 6, 1))).toBe(true); // a Monday, not the 1st
    expect(cronMatches(either, at(0, 12, 9, 6, 2))).toBe(false);
    const weekdays = parseCron("0 20 * * 1-5");
    expect(cronMatches(weekdays, at(0, 20, 6, 2, 5))).toBe(true);
    expect(cronMatches(weekdays, at(0, 20, 7, 2, 6))).toBe(false);
    expect(cronMatches(parseCron("0 20 ? * SAT"), at(0, 20, 7, 2, 6))).toBe(true);
  });

  it("says which field is wrong", () => {
    expect(cronProblem("0 25 * * *")).toBe("hour 25 is out of range 0-23");
    expect(cronProblem("0 20 * *")).toBe("needs 5 fields (minute hour day-of-month month day-of-week), got 4");
    expect(cronProblem("0 7 * * FOO")).toMatch(/^day of week: unknown value "FOO"/);
    expect(cronProblem("0 7 * * 5-1")).toBe("day of week: range 5-1 runs backwards");
    expect(cronProblem("? 7 * * *")).toBe('minute: "?" is allowed in the day fields only');
    expect(cronProblem("*/0 7 * * *")).toBe("minute: step must be at least 1");
    expect(cronProblem("0 20 * * 1-5")).toBeUndefined();
  });

  it("refuses what croner reads but Auto Scaling does not take, naming the field", () => {
    expect(cronProblem("0 0 20 * * 1-5")).toBe("needs 5 fields (minute hour day-of-month month day-of-week), got 6");
    expect(cronProblem("@daily")).toBe("needs 5 fields (minute hour day-of-month month day-of-week), got 1");
    expect(cronProblem("0 0 L * *")).toBe('day of month: unknown value "L"');
    expect(cronProblem("0 0 15W * *")).toBe('day of month: unknown value "15W"');
    expect(cronProblem("0 0 * * 5L")).toMatch(/^day of week: unknown value "5L"/);
    expect(cronProblem("0 0 * * FRI#2")).toBe('day of week: cannot read "FRI#2"');
    expect(cronProblem("0 0 * * +MON")).toBe('day of week: cannot read "+MON"');
    expect(cronProblem("0 ? * * *")).toBe('hour: "?" is allowed in the day fields only');
  });

  it("keeps cron's reading where croner differs: weekday 7 and long steps", () => {
    // croner reads `-SUN` as 7 and would make SUN-SUN every day; `7/1` reaches only Sunday.
    expect([...parseCron("0 0 * * SUN-SUN").weekdays]).toEqual([0]);
    expect([...parseCron("0 0 * * 7/1").weekdays]).toEqual([0]);
    expect([...parseCron("0 0 * * 5-7").weekdays]).toEqual([0, 5, 6]);
    // croner refuses a step longer than the field; cron matches the start value alone.
    expect([...parseCron("*/61 * * * *").minutes]).toEqual([0]);
    expect([...parseCron("0 0 */40 * *").days]).toEqual([1]);
    expect(cronProblem("0 7 * * SAT-SUN")).toBe("day of week: range SAT-SUN runs backwards");
  });

  it("fires on wall-clock minutes across daylight-saving changes, as llm-ha cost counts them", () => {
    const c = parseCron("30 2 * * *");
    const berlin = new Zone("Europe/Berlin");
    // 29 March 2026 has no 02:30 in Berlin: the last firing by 04:00 CEST is the day before.
    expect(lastFiring(c, berlin, Date.parse("2026-03-29T02:00:00Z"))).toBe(Date.parse("2026-03-28T01:30:00Z"));
    // 25 October 2026 has 02:30 twice: by 03:00 CET the last firing is the second one.
    expect(lastFiring(c, berlin, Date.parse("2026-10-25T02:00:00Z"))).toBe(Date.parse("2026-10-25T01:30:00Z"));
    expect(lastFiring(c, berlin, Date.parse("2026-10-25T01:00:00Z"))).toBe(Date.parse("2026-10-25T00:30:00Z"));
    expect(lastFiring(c, berlin, Date.parse("2026-10-25T01:00:00Z"), 20 * 60_000)).toBeNull();
  });

  it("is the parser the stack validation uses", () => {
    for (const ok of ["0 20 * * 1-5", "*/15 * * * *", "30 6 * * MON-FRI", "0 0 1,15 * *", "0 12 ? * 6"]) expect(isCron(ok), ok).toBe(true);
    for (const bad of ["", "0 20 * *", "60 * * * *", "0 24 * * *", "every night", "0 20 * * 1-5 2025", "0 7 * * FOO"]) expect(isCron(bad), bad).toBe(false);
  });
});

describe("standby schedule replay", () => {
  it("weekdays 20:00 → 0, 08:00 → back, Saturday down: 2026-02 counted by hand", () => {
    // February 2026 runs Sunday 1st to Saturday 28th: 20 weekdays, each up 08:00–20:00.
    // It starts down: the last action before it was Saturday 31 January's weekend scale-down.
    const month = monthOf("2026-02");
    expect(month.hours).toBe(28 * 24);
    for (const timeZone of ["UTC", "Europe/Berlin"]) {
      const h = standbyHours({ timeZone, scaleDown: "0 20 * * 1-5", scaleUp: "0 8 * * 1-5", weekendDown: "0 0 * * 6" }, month);
      expect(h, timeZone).toEqual({ minutesUp: 20 * 12 * 60, minutesDown: (672 - 240) * 60, startsUp: false, scaleDowns: 20, scaleUps: 20 });
    }
  });

  it("prod's weekend sleep in 2026-02: Friday 22:00 to Monday 05:00 UTC", () => {
    // Down from the 1st 00:00 to Monday 2nd 05:00 (29 h), three full weekends of 55 h,
    // and Friday 27th 22:00 to the month's end (26 h).
    const h = standbyHours({ timeZone: "UTC", scaleDown: "0 22 * * 5", scaleUp: "0 5 * * 1" }, monthOf("2026-02"));
    expect(h.minutesDown / 60).toBe(29 + 3 * 55 + 26);
    expect(h.startsUp).toBe(false);
  });

  it("counts elapsed hours across daylight-saving changes in the schedule's zone", () => {
    // Sundays 01:00 → 0, 04:00 → back, Berlin. 29 March 2026 skips 02:00–03:00 (2 h down
    // instead of 3); 25 October 2026 repeats 02:00–03:00 (4 h instead of 3).
    const s = { timeZone: "Europe/Berlin", scaleDown: "0 1 * * 0", scaleUp: "0 4 * * 0" };
    expect(standbyHours(s, monthOf("2026-03")).minutesDown / 60).toBe(4 * 3 + 2);
    expect(standbyHours(s, monthOf("2026-10")).minutesDown / 60).toBe(3 * 3 + 4);
  });

  it("bills the UTC month: an evening in New York that ends after midnight UTC is cut at the month's end", () => {
    // Monday 30 November 2026, up 06:00–21:00 EST = 11:00–02:00 UTC: 13 h fall in November.
    const h = standbyHours({ timeZone: "America/New_York", scaleDown: "0 21 * * 1-5", scaleUp: "0 6 * * 1-5" }, monthOf("2026-11"));
    expect(h.minutesUp / 60).toBe(20 * 15 + 13);
  });

  it("starts up when no action ever fired before the month, and an up wins a tie", () => {
    const never = standbyHours({ timeZone: "UTC", scaleDown: "0 0 30 2 *", scaleUp: "0 0 30 2 *" }, monthOf("2026-02"));
    expect(never).toMatchObject({ minutesDown: 0, startsUp: true, scaleDowns: 0, scaleUps: 0 });
    const tie = standbyHours({ timeZone: "UTC", scaleDown: "0 * * * *", scaleUp: "0 12 * * *" }, monthOf("2026-02"));
    // Down every hour on the hour, up at noon: up 12:00–13:00 each day.
    expect(tie.minutesUp / 60).toBe(28);
  });

  it("refuses a month that is not YYYY-MM", () => {
    expect(() => monthOf("2026-13")).toThrow(/--month "2026-13": expected YYYY-MM/);
    expect(monthOf(undefined, new Date(Date.UTC(2026, 10, 29, 23, 59))).name).toBe("2026-11");
  });
});
