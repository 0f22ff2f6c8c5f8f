/**
 * "Did you mean": the closest known name to a mistyped one, by edit distance. One helper for
 * every place that names a choice — environment variables (`llm-ha agent`), commands and
 * flags of every CLI (agent/src, infra's operator tools, the policy CLI).
 */

/** Levenshtein distance between two strings. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/** The nearest of `known` to `name`, or null when none is within `maxDistance` edits. */
export function closest(name: string, known: readonly string[], maxDistance = 3): string | null {
  let best: { k: string; d: number } | null = null;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d <= maxDistance && (best === null || d < best.d)) best = { k, d };
  }
  return best?.k ?? null;
}

/** ` (did you mean X?)` when a known name is near, else "" — to append to an error message. */
export function didYouMean(name: string, known: readonly string[]): string {
  const near = closest(name, known);
  return near ? ` (did you mean ${near}?)` : "";
}

/**
 * The message of a `node:util` `parseArgs` error, with "did you mean" for an unknown flag.
 * `options` are the option names without dashes, as given to `parseArgs`; `aliases` maps old
 * spellings (`--ca-file`) to the current flag, which is what gets suggested for them.
 */
export function flagErrorMessage(err: unknown, options: readonly string[], aliases: Readonly<Record<string, string>> = {}): string {
  const e = err as { code?: string; message?: string };
  const m = /^Unknown option '([^']+)'/.exec(e.message ?? "");
  if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && m) {
    const near = closest(m[1].replace(/=.*$/, ""), [...options.map((o) => `--${o}`), ...Object.keys(aliases)]);
    return `unknown flag ${m[1]}${near ? ` (did you mean ${aliases[near] ?? near}?)` : ""}`;
  }
  return e.message ?? String(err);
}
