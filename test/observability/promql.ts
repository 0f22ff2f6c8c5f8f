/**
 * Test helpers around PromQL and Prometheus text: the metric names an expression reads,
 * the names a `/metrics` page exports, and `promtool` itself.
 */
import { spawnSync } from "node:child_process";

const KEYWORDS = new Set([
  "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "atan2",
  "inf", "nan", "le",
]);

/**
 * Metric names an expression selects. Strings, label matchers, ranges and grouping
 * clauses are stripped first; what is left that is not a function call, a keyword or a
 * number is a metric name.
 */
export function metricNames(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  s = s.replace(/\{[^}]*\}/g, " ").replace(/\[[^\]]*\]/g, " ");
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const names = new Set<string>();
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = m[0];
    const before = s[m.index - 1];
    if (before !== undefined && /[0-9.]/.test(before)) continue; // 1e3, 5m
    if (KEYWORDS.has(word.toLowerCase())) continue;
    if (/^\s*\(/.test(s.slice(m.index + word.length))) continue; // a function
    names.add(word);
  }
  return [...names].sort();
}

export interface ExportedPage {
  /** Family name → type, from the `# TYPE` lines (a family is declared even before its first labelled sample). */
  families: Map<string, string>;
  /** Sample names (`…_bucket`, `…_sum` and `…_count` for histograms). */
  series: Set<string>;
}

export function exportedFamilies(text: string): ExportedPage {
  const families = new Map<string, string>();
  const series = new Set<string>();
  for (const line of text.split("\n")) {
    const t = /^# TYPE (\S+) (\S+)/.exec(line);
    if (t) families.set(t[1], t[2]);
    else if (line && !line.startsWith("#")) series.add(line.split(/[{\s]/)[0]);
  }
  return { families, series };
}

/** True when `name`, as a query uses it, is exported: a declared family, a sample, or `_bucket|_sum|_count` of a histogram/summary family. */
export function isExported(name: string, page: ExportedPage): boolean {
  if (page.series.has(name)) return true;
  const type = page.families.get(name);
  if (type !== undefined) return type !== "histogram" && type !== "summary";
  const part = /^(.+)_(bucket|sum|count)$/.exec(name);
  if (part === null) return false;
  const base = page.families.get(part[1]);
  return base === "histogram" || (base === "summary" && part[2] !== "bucket");
}

/** Series Prometheus makes itself rather than scraping them. */
export const SYNTHETIC = new Set(["up", "ALERTS", "ALERTS_FOR_STATE"]);

export const PROMTOOL = process.env.LLMHA_PROMTOOL ?? "promtool";

/** True when promtool runs here (`apt-get install prometheus`). */
export function havePromtool(): boolean {
  const r = spawnSync(PROMTOOL, ["--version"], { stdio: "ignore", timeout: 10_000 });
  return !r.error && r.status === 0;
}

export function promtool(args: string[], cwd?: string): { code: number; out: string } {
  const r = spawnSync(PROMTOOL, args, { cwd, encoding: "utf8", timeout: 120_000 });
  return { code: r.status ?? -1, out: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}
