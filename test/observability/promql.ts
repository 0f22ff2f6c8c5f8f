/**
 * Test helpers around PromQL and Prometheus text: the metric names an expression reads,
 * the names a `/metrics` page exports, and `promtool` itself.
 */
import { spawnSync } from "node:child_process";

export { metricNames } from "../../infra/observability/promql";

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
