import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { measurePressure, overloadNote, OVERLOAD_LOOP_DELAY_MS, OVERLOAD_PRESSURE_PCT } from "../../lab/drill/pressure";
import { summarize } from "../../lab/drill/report";
import { blank } from "../../lab/drill/scenarios/runner";
import { SCENARIOS } from "../../lab/drill/scenarios";

describe("the drill's machine-pressure figures (lab/drill/pressure.ts)", () => {
  it("measures the drill's own event-loop delay, and the kernel's CPU pressure where it has PSI", async () => {
    const m = measurePressure();
    await new Promise((r) => setTimeout(r, 50));
    const until = performance.now() + 300;
    while (performance.now() < until) {
      // block the event loop: the delay must show
    }
    await new Promise((r) => setTimeout(r, 50));
    const p = m.stop();
    expect(p.loopDelayMaxMs).toBeGreaterThanOrEqual(250);
    if (existsSync("/proc/pressure/cpu")) {
      expect(p.cpuPressurePct).not.toBeNull();
      expect(p.cpuPressurePct!).toBeGreaterThanOrEqual(0);
      expect(p.cpuPressurePct!).toBeLessThanOrEqual(100);
    } else expect(p.cpuPressurePct).toBeNull();
  });

  it("names the overload beside a miss, and only when a run was saturated", () => {
    const run = (pct: number | null, delay: number): ReturnType<typeof blank> => {
      const r = blank("crash", 1);
      r.extra.cpuPressurePct = pct;
      r.extra.loopDelayMaxMs = delay;
      return r;
    };
    expect(overloadNote([run(10, 30), run(null, 20), run(OVERLOAD_PRESSURE_PCT - 5, OVERLOAD_LOOP_DELAY_MS - 100)])).toBeNull();
    const note = overloadNote([run(10, 30), run(OVERLOAD_PRESSURE_PCT + 3, 900)]);
    expect(note).toMatch(new RegExp(`overloaded in 1 of 2 run\\(s\\).*${OVERLOAD_PRESSURE_PCT + 3}%.*900 ms`));
    // A late event loop alone says it too.
    expect(overloadNote([run(null, OVERLOAD_LOOP_DELAY_MS + 1)])).toMatch(/overloaded in 1 of 1/);
    // In a summary: a missed target gets the note (the verdict stays a miss); a pass gets none.
    const spec = SCENARIOS.find((s) => s.name === "crash")!;
    const missed = run(99, 700);
    missed.l1Ms = 60_000;
    missed.detectMs = 100;
    const s = summarize(spec, [missed]);
    expect(s.pass).toBe(false);
    expect(s.misses.at(-1)).toMatch(/machine overloaded/);
  });
});
