// A game day on a real account starts only when asked by name and inside the stack's window:
// the refusals name what is missing; the window is read in its own time zone.
import { describe, expect, it } from "vitest";
import { inWindow, windowProblem, type GamedayWindow } from "../../contracts/gameday";
import { refusal } from "../../lab/gameday/command";

const W: GamedayWindow = { days: ["Tue", "Wed", "Thu"], from: "10:00", to: "16:00", timeZone: "Europe/Berlin" };
// Tuesday 2026-12-08, 11:30 in Berlin (UTC+1 in winter).
const INSIDE = new Date("2026-12-08T10:30:00Z");

describe("game-day refusals", () => {
  const base = { stack: "prod", file: "Pulumi.prod.yaml", project: "llm-ha", window: W, now: INSIDE };
  it("without --confirm, or confirming another stack, nothing starts", () => {
    expect(refusal({ ...base })).toBe("a game day injects real faults into prod: pass --confirm prod to start one");
    expect(refusal({ ...base, confirm: "staging" })).toBe("--confirm staging does not name the stack prod");
  });
  it("without a window, or outside it, nothing starts; inside it, it may", () => {
    expect(refusal({ ...base, confirm: "prod", window: undefined })).toMatch(/^llm-ha:gameday\.window is not set in Pulumi\.prod\.yaml: set when game days may start/);
    expect(refusal({ ...base, confirm: "prod", now: new Date("2026-12-08T15:30:00Z") })).toMatch(/^outside llm-ha:gameday\.window \(Tue, Wed, Thu 10:00–16:00 Europe\/Berlin\); it is 2026-12-08T15:30:00\.000Z/);
    expect(refusal({ ...base, confirm: "prod" })).toBeNull();
  });
  it("the window is read in its own time zone, its end excluded", () => {
    expect(inWindow(W, new Date("2026-12-08T09:00:00Z"))).toBe(true); // 10:00 Berlin
    expect(inWindow(W, new Date("2026-12-08T08:59:00Z"))).toBe(false);
    expect(inWindow(W, new Date("2026-12-08T15:00:00Z"))).toBe(false); // 16:00 Berlin
    expect(inWindow(W, new Date("2026-12-07T10:30:00Z"))).toBe(false); // a Monday
    expect(inWindow({ ...W, timeZone: "America/New_York", days: ["Mon"] }, new Date("2026-12-08T03:30:00Z"))).toBe(false); // Monday 22:30 there
  });
  it("a malformed window names its fault", () => {
    expect(windowProblem({ ...W, days: [] })).toMatch(/days must be a non-empty list/);
    expect(windowProblem({ ...W, from: "9:00" })).toMatch(/HH:MM/);
    expect(windowProblem(W)).toBeNull();
  });
});
