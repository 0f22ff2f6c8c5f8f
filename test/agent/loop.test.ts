import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Loop } from "../../agent/src/util/loop";

describe("Loop", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reads a period given as a function after each run", async () => {
    let period = 100;
    const runs: number[] = [];
    const l = new Loop(() => period, async () => void runs.push(performance.now()), () => undefined);
    l.start();
    await vi.advanceTimersByTimeAsync(250);
    period = 1000;
    await vi.advanceTimersByTimeAsync(2100);
    l.stop();
    const gaps = runs.slice(1).map((t, i) => Math.round(t - runs[i]));
    // 100 ms apart until the period changed (the run at 300 was armed before), 1000 ms from the run after.
    expect(gaps).toEqual([100, 100, 100, 1000, 1000]);
  });

  it("aligned loops started apart run on the same grid points, so the process wakes once for them", async () => {
    const at: Record<string, number[]> = { a: [], b: [], c: [] };
    const loop = (name: string, period: number): Loop => new Loop(period, async () => void at[name].push(performance.now()), () => undefined, true);
    const a = loop("a", 1000);
    a.start();
    await vi.advanceTimersByTimeAsync(137);
    const b = loop("b", 1000);
    b.start();
    await vi.advanceTimersByTimeAsync(411);
    const c = loop("c", 200);
    c.start();
    await vi.advanceTimersByTimeAsync(5000);
    for (const l of [a, b, c]) l.stop();
    // After its first run, each runs on multiples of its period; the 200 ms loop's include the 1 s loops'.
    for (const name of ["a", "b"]) expect(at[name].slice(2).map((t) => t % 1000)).toEqual(at[name].slice(2).map(() => 0));
    expect(at.c.slice(2).map((t) => t % 200)).toEqual(at.c.slice(2).map(() => 0));
    const together = at.a.slice(2).filter((t) => at.b.includes(t) && at.c.includes(t));
    expect(together.length).toBeGreaterThanOrEqual(3);
  });

  it("aligned loops due at one grid point share one timer: one wake for all of them", async () => {
    // Each loop's own timer for the same point woke the process once per loop: Node sets a timer's
    // expiry from a clock cached per turn of its event loop, so timers armed in different turns for
    // the same point fell a millisecond apart.
    const runs = { a: 0, b: 0, c: 0 };
    const loop = (name: keyof typeof runs, period: number): Loop => new Loop(period, async () => void runs[name]++, () => undefined, true);
    const loops = [loop("a", 1000), loop("b", 1000), loop("c", 200)];
    for (const l of loops) l.start();
    await vi.advanceTimersByTimeAsync(2000);
    const timers = vi.spyOn(globalThis, "setTimeout");
    const before = { ...runs };
    await vi.advanceTimersByTimeAsync(5000);
    for (const l of loops) l.stop();
    expect([runs.a - before.a, runs.b - before.b, runs.c - before.c]).toEqual([5, 5, 25]);
    // 25 grid points of 200 ms in 5 s, the 1 s loops' among them: 25 timers, not 35.
    expect(timers.mock.calls.length).toBe(25);
  });

  it("a stopped loop leaves its grid point; the others due there still run", async () => {
    const runs = { a: 0, b: 0 };
    const a = new Loop(1000, async () => void runs.a++, () => undefined, true);
    const b = new Loop(1000, async () => void runs.b++, () => undefined, true);
    a.start();
    b.start();
    await vi.advanceTimersByTimeAsync(1500);
    a.stop();
    await vi.advanceTimersByTimeAsync(3000);
    b.stop();
    await vi.advanceTimersByTimeAsync(3000);
    expect(runs).toEqual({ a: 2, b: 5 });
  });

  it("an unaligned loop keeps a steady period from each run's start", async () => {
    const runs: number[] = [];
    const l = new Loop(300, async () => void runs.push(performance.now()), () => undefined);
    await vi.advanceTimersByTimeAsync(55);
    l.start();
    await vi.advanceTimersByTimeAsync(1000);
    l.stop();
    expect(runs.map((t) => Math.round(t))).toEqual([55, 355, 655, 955]);
  });
});
