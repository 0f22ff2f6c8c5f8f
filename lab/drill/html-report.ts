/**
 * The drill's report as one HTML page, for a person rather than a script: the verdict table
 * first, then one timeline panel per scenario (the stretch of the run from just before its
 * first fault to the end of its last run), with its targets drawn where each figure had to be
 * by, failed requests marked with their reason, and the standby AZ's sleep in grey. Written
 * next to the JSON (and in the run's folder). Pure: report and timeline in, text out.
 */
import type { ScenarioSummary } from "./report";
import type { RunResult } from "./run-scenario";
import { escapeXml, renderTimelineSvg, type SvgOptions } from "./svg";
import type { Timeline } from "./timeline";

/** Time before a scenario's first fault shown in its panel, so that the calm before is visible. */
const LEAD_MS = 3000;

/** The figures drawn as targets: measured from the fault (the run's `injectAt`). */
const DRAWN: { target: "l1Ms" | "crossMs" | "dnsMs" | "leaderMs"; figure: "l1Ms" | "crossMs" | "dnsMs" | "leaderMs"; label: string }[] = [
  { target: "l1Ms", figure: "l1Ms", label: "L1" },
  { target: "crossMs", figure: "crossMs", label: "cross-zone" },
  { target: "dnsMs", figure: "dnsMs", label: "DNS" },
  { target: "leaderMs", figure: "leaderMs", label: "new leader" },
];

/** Each run's targets as lines at fault + target; red when that run's figure came later or never. */
export function targetLines(s: Pick<ScenarioSummary, "targets">, runs: readonly RunResult[]): NonNullable<SvgOptions["targets"]> {
  const out: NonNullable<SvgOptions["targets"]> = [];
  for (const r of runs) {
    for (const d of DRAWN) {
      const limit = s.targets[d.target];
      if (limit === undefined) continue;
      const seen = r[d.figure];
      out.push({ t: r.injectAt + limit, label: `${d.label} ≤ ${limit / 1000}s${seen === null ? " (never)" : ` (${(seen / 1000).toFixed(2)}s)`}`, ok: seen !== null && seen <= limit });
    }
  }
  return out;
}

export interface HtmlReportInput {
  title: string;
  scenarios: readonly (ScenarioSummary & { runs_detail: readonly RunResult[] })[];
  /** The run's table as the terminal shows it (\`-o wide\`). */
  table: string;
  svg: Omit<SvgOptions, "title" | "window" | "targets">;
}

function verdict(s: ScenarioSummary): { word: string; cls: string } {
  return s.pass === null ? { word: "NOT MEASURED", cls: "nm" } : s.pass ? { word: "ok", cls: "ok" } : { word: "MISS", cls: "miss" };
}

export function renderHtmlReport(tl: Timeline, o: HtmlReportInput): string {
  const panels = o.scenarios.map((s) => {
    const v = verdict(s);
    const runs = s.runs_detail.filter((r) => r.injectAt > 0 || r.endAt > 0);
    const misses = s.misses.map((m) => `<li>${escapeXml(m)}</li>`).join("");
    const picture = runs.length
      ? renderTimelineSvg(tl, {
          ...o.svg,
          title: `${s.name} (${s.tier}): ${s.title}`,
          window: { from: Math.max(0, Math.min(...runs.map((r) => r.injectAt)) - LEAD_MS), to: Math.max(...runs.map((r) => r.endAt || r.healAt || r.injectAt)) },
          targets: targetLines(s, runs),
        })
      : `<p class="none">no run to draw${s.notMeasured ? `: ${escapeXml(s.notMeasured)}` : ""}</p>`;
    return [
      `<section class="scenario" data-scenario="${escapeXml(s.name)}" data-verdict="${v.cls}">`,
      `<h2><span class="verdict ${v.cls}">${v.word}</span> ${escapeXml(s.name)} <small>${escapeXml(s.tier)} · ${s.runs} run(s) · ${s.failed} failed request(s)</small></h2>`,
      misses ? `<ul class="misses">${misses}</ul>` : "",
      `<div class="panel">${picture}</div>`,
      "</section>",
    ].join("\n");
  });
  const ok = o.scenarios.filter((s) => s.pass === true).length;
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeXml(o.title)}</title>`,
    "<style>body{font-family:sans-serif;margin:1.5em;color:#222}h2{font-size:1.1em;margin:1.6em 0 .3em}small{color:#666;font-weight:normal}" +
      ".verdict{display:inline-block;min-width:5em;padding:.1em .4em;border-radius:3px;color:#fff;text-align:center}.ok{background:#2e9e44}.miss{background:#d03030}.nm{background:#888}" +
      ".panel svg{max-width:100%;height:auto;border:1px solid #ddd}pre{font-size:12px;overflow-x:auto;background:#f6f6f6;padding:.6em}.misses{color:#a01818}</style>",
    "</head><body>",
    `<h1>${escapeXml(o.title)}</h1>`,
    `<p class="summary">${ok} of ${o.scenarios.length} scenario(s) on target. Grey: the standby AZ asleep (scaled to zero by design). Blue lines: targets met; red lines: targets missed; red bars: failed requests, labelled with their reason.</p>`,
    `<pre class="table">${escapeXml(o.table)}</pre>`,
    ...panels,
    "</body></html>",
    "",
  ].join("\n");
}
