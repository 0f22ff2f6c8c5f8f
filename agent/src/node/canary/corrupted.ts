/**
 * Engine-reported corruption as a canary trigger, a pure function of (watch, one read, clock).
 * vLLM counts the requests whose logits went NaN (`vllm:corrupted_requests`); the agent reads it
 * with the engine's other metrics. The counter above its value at the last canary round means the
 * engine itself saw bad numerics since: the canary re-checks at once instead of a period later.
 *
 * - The baseline is the count at the last canary round, or the first count read (a count the
 *   engine had before the agent started is no news).
 * - A count below the last one read is a restarted engine (the counter starts again at 0): it
 *   becomes the baseline, and is not a rise.
 * - One forced round per rise: while one is asked for and has not run, further rises ask for
 *   nothing more; once it ran, its count is the baseline.
 * - Forced rounds are at least `floorMs` apart, so a counter that climbs on every read cannot
 *   turn the canary into a load generator: a rise inside the floor is checked once the floor is
 *   over (or by the regular round, whichever comes first).
 * The rise never takes the node out of rotation on its own: NaN in one request is that request's
 * failure; the canary round's answers decide whether the node is corrupt.
 */

export interface CorruptedWatch {
  /** The engine's count when the last canary round ran (or first read); null before any count. */
  readonly baseline: number | null;
  /** The count as last read; null when the last read had none. */
  readonly last: number | null;
  /** When the last forced round was asked for (epoch ms); null before any. */
  readonly forcedAt: number | null;
  /** A forced round asked for and not yet run. */
  readonly pending: boolean;
}

/** A forced round to run: how many corrupted requests the engine reported since the baseline, and its count. */
export interface CorruptedRise {
  readonly rise: number;
  readonly total: number;
}

export const INITIAL_CORRUPTED_WATCH: CorruptedWatch = { baseline: null, last: null, forcedAt: null, pending: false };

/** One read of the engine's counter (null: not exported, or the read failed). */
export function corruptedRead(w: CorruptedWatch, total: number | null, now: number, floorMs: number): { watch: CorruptedWatch; force: CorruptedRise | null } {
  if (total === null) return { watch: { ...w, last: null }, force: null };
  let baseline = w.baseline;
  if (baseline === null || total < baseline || (w.last !== null && total < w.last)) baseline = total;
  const watch: CorruptedWatch = { ...w, baseline, last: total };
  if (total <= baseline || w.pending) return { watch, force: null };
  if (w.forcedAt !== null && now - w.forcedAt < floorMs) return { watch, force: null };
  return { watch: { ...watch, forcedAt: now, pending: true }, force: { rise: total - baseline, total } };
}

/** A canary round ran: what the engine had counted by then is checked. */
export function corruptedRoundRan(w: CorruptedWatch): CorruptedWatch {
  return { ...w, baseline: w.last ?? w.baseline, pending: false };
}

/** The reason a forced round gives in its log line and event. */
export function corruptedTrigger(r: CorruptedRise): string {
  return `engine reported ${r.rise} corrupted request${r.rise === 1 ? "" : "s"} since the last canary round (vllm:corrupted_requests ${r.total})`;
}
