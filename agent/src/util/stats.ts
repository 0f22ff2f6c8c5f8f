/**
 * Nearest-rank percentiles: the one definition every figure llm-ha reports uses (the
 * drill, the benches, `/status`, the load score), so numbers from different places compare.
 */

/** The p-quantile (0 < p ≤ 1) of ascending `sorted` by nearest rank; null when empty. */
export function quantile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

/** The measured values (nulls — "never happened" — left out), ascending. */
export function measured(values: readonly (number | null)[]): number[] {
  return values.filter((v): v is number => v !== null).sort((a, b) => a - b);
}
