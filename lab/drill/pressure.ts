/**
 * How busy the machine was during a run: the kernel's CPU pressure (PSI, `/proc/pressure/cpu`
 * "some": the share of wall time at least one runnable task waited for a CPU) and the drill's
 * own event-loop delay. A timing target missed while the machine was saturated says more about
 * the machine than about llm-ha; the report names it (the drill must hold its targets on a
 * loaded machine, or name the overload as the cause of a miss).
 */
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

/**
 * CPU pressure at or above which a miss is reported as possibly the machine's. A six-node drill
 * alone keeps some task waiting 85–90 % of the time on 2 cores (measured: `burst` ×10); with a
 * second drill beside it, 94–98 %. Or the drill's own event loop late by `OVERLOAD_LOOP_DELAY_MS`.
 */
export const OVERLOAD_PRESSURE_PCT = 95;
export const OVERLOAD_LOOP_DELAY_MS = 500;

/** The cumulative "some" stall time in µs, null where the kernel has no PSI. */
function psiSomeTotalUs(): number | null {
  try {
    const m = /^some .*total=(\d+)/m.exec(readFileSync("/proc/pressure/cpu", "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export interface MachinePressure {
  /** Share of the run's wall time some task waited for a CPU, %; null without PSI. */
  cpuPressurePct: number | null;
  /** The drill process's worst event-loop delay in the run, ms. */
  loopDelayMaxMs: number;
}

/** Starts measuring; `stop()` gives the figures over the span. */
export function measurePressure(): { stop(): MachinePressure } {
  const t0 = performance.now();
  const psi0 = psiSomeTotalUs();
  const h = monitorEventLoopDelay({ resolution: 20 });
  h.enable();
  return {
    stop() {
      h.disable();
      const psi1 = psiSomeTotalUs();
      const wallUs = (performance.now() - t0) * 1000;
      const pct = psi0 === null || psi1 === null || wallUs <= 0 ? null : Math.min(100, Math.round((1000 * (psi1 - psi0)) / wallUs) / 10);
      return { cpuPressurePct: pct, loopDelayMaxMs: Math.round(h.max / 1e6) };
    },
  };
}

/** The line a summary adds to its misses when runs ran on a saturated machine; null when none did. */
export function overloadNote(runs: ReadonlyArray<{ extra: Record<string, unknown> }>): string | null {
  const num = (v: unknown): number | null => (typeof v === "number" ? v : null);
  const loaded = runs.filter((r) => (num(r.extra.cpuPressurePct) ?? 0) >= OVERLOAD_PRESSURE_PCT || (num(r.extra.loopDelayMaxMs) ?? 0) >= OVERLOAD_LOOP_DELAY_MS);
  if (loaded.length === 0) return null;
  const max = (k: string): string => {
    const v = loaded.map((r) => num(r.extra[k])).filter((x): x is number => x !== null);
    return v.length ? String(Math.max(...v)) : "?";
  };
  return `machine overloaded in ${loaded.length} of ${runs.length} run(s): CPU pressure up to ${max("cpuPressurePct")}% of the time (a task waiting for a CPU), the drill's own event loop late by up to ${max("loopDelayMaxMs")} ms — a miss here may be the machine's; rerun on a quiet one`;
}
