/**
 * Warning facts: what foretells a hard GPU fault while the node still serves. The leader's repair
 * ladder may drain such a node at a low-load moment (a predictive `drain`, then a reboot, which
 * applies pending row remaps and resets the GPUs) before the fault becomes hard.
 *
 * - Corrected ECC errors (`ecc.errors.corrected.volatile.total`, summed over the node's GPUs): the
 *   count now and its rise over the last 24 h. NVML keeps row remaps "due to correctable errors"
 *   apart from those due to uncorrectable ones: a count that keeps rising is memory wearing out,
 *   and once the spare rows are used up the next fault is a row-remap failure (the node is then
 *   replaced, not repaired). The volatile counter restarts at 0 when the driver reloads (a
 *   reboot): a drop starts the window again.
 * - Slowdown episodes: a GPU entering a thermal or hardware slowdown (`clocks_event_reasons.
 *   hw_slowdown`, `hw_thermal_slowdown`, `sw_thermal_slowdown` going Active) within the last hour,
 *   the most of any one GPU. The power-brake slowdown is left out: the rack's power system asserts
 *   it, not the GPU's health.
 *
 * Published in coarse steps (1, 2, 5, 10, 20, 50, …) so a count that creeps does not change the
 * record every period (the record changes only when a step is crossed); episodes are few and kept
 * exact (at most 99).
 */
import type { GpuObservation, Sample } from "./signals";

export interface GpuWarnings {
  /** Corrected ECC errors now (volatile, all GPUs), floored to a coarse step. */
  ecc: number;
  /** Their rise over the last 24 h (`ECC_WINDOW_MS`), floored to a coarse step. */
  eccRise: number;
  /** Thermal / hardware slowdown episodes of the worst GPU within the last hour (`SLOWDOWN_WINDOW_MS`). */
  slow: number;
}

export const ECC_WINDOW_MS = 86_400_000;
export const SLOWDOWN_WINDOW_MS = 3_600_000;
/** One ECC sample kept per 5 minutes: 289 at most over 24 h. */
const ECC_SAMPLE_MS = 300_000;
const MAX_EPISODES = 100;
const WARN_MAX = 1_000_000_000;
/** The slowdown reasons that count (see above). */
const SLOWDOWN_REASONS: ReadonlySet<string> = new Set(["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown"]);

/** Floors a count to 0, 1, 2, 5, 10, 20, 50, 100, … (the record changes only when a step is crossed). */
export function coarse(n: number): number {
  if (!Number.isFinite(n) || n < 1) return 0;
  const capped = Math.min(n, WARN_MAX);
  const decade = 10 ** Math.floor(Math.log10(capped));
  const lead = capped / decade;
  return (lead >= 5 ? 5 : lead >= 2 ? 2 : 1) * decade;
}

/** Keeps the node's warning facts from successive nvidia-smi results (bounded memory). */
export class GpuWarningTracker {
  private seq = -1;
  private samples: { at: number; total: number }[] = [];
  private total: number | null = null;
  private slowed = new Set<string>();
  private episodes = new Map<string, number[]>();

  /** Feeds one gpu source result; a result already seen (same `seq`) or not `ok` changes nothing. */
  observe(sample: Sample<GpuObservation> | undefined, now: number): void {
    if (!sample || sample.seq === this.seq) return;
    this.seq = sample.seq;
    const v = sample.value;
    if (v.kind !== "ok") return;
    const counts = v.gpus.map((g) => g.eccCorrectedVolatile).filter((x): x is number => typeof x === "number" && x >= 0);
    if (counts.length) {
      const total = counts.reduce((a, b) => a + b, 0);
      if (this.total !== null && total < this.total) this.samples = []; // the driver reloaded: the volatile count restarted
      this.total = total;
      const last = this.samples[this.samples.length - 1];
      if (!last || now - last.at >= ECC_SAMPLE_MS) this.samples.push({ at: now, total });
      while (this.samples.length > 1 && now - this.samples[0].at > ECC_WINDOW_MS) this.samples.shift();
    }
    const slowedNow = new Set<string>();
    for (const g of v.gpus) {
      if (!g.slowdowns.some((r) => SLOWDOWN_REASONS.has(r))) continue;
      const key = g.uuid ?? `#${g.index}`;
      slowedNow.add(key);
      if (!this.slowed.has(key)) this.episodes.set(key, [...(this.episodes.get(key) ?? []), now].slice(-MAX_EPISODES));
    }
    this.slowed = slowedNow;
    for (const [key, list] of this.episodes) {
      const kept = list.filter((at) => now - at <= SLOWDOWN_WINDOW_MS);
      if (kept.length) this.episodes.set(key, kept);
      else this.episodes.delete(key);
    }
  }

  /** The facts now; null when there is nothing to warn of. */
  current(now: number): GpuWarnings | null {
    const oldest = this.samples[0];
    const rise = this.total !== null && oldest ? Math.max(0, this.total - oldest.total) : 0;
    let slow = 0;
    for (const list of this.episodes.values()) slow = Math.max(slow, list.filter((at) => now - at <= SLOWDOWN_WINDOW_MS).length);
    const w: GpuWarnings = { ecc: coarse(this.total ?? 0), eccRise: coarse(rise), slow: Math.min(slow, 99) };
    return w.ecc === 0 && w.eccRise === 0 && w.slow === 0 ? null : w;
  }
}

/** Reads warning facts back; anything else reads as none (null). */
export function parseGpuWarnings(v: unknown): GpuWarnings | null {
  if (typeof v !== "object" || v === null) return null;
  const o = v as Record<string, unknown>;
  const n = (x: unknown): number => (typeof x === "number" && Number.isInteger(x) && x >= 0 ? Math.min(x, WARN_MAX) : 0);
  const w = { ecc: n(o.ecc), eccRise: n(o.eccRise), slow: Math.min(n(o.slow), 99) };
  return w.ecc === 0 && w.eccRise === 0 && w.slow === 0 ? null : w;
}
