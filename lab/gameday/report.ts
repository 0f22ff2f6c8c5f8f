/**
 * The game day's report in the drill's schema: the same summary per scenario (`summarize`), the
 * same table and HTML page, with the drill's targets for the scenario where a game day can
 * measure them (the rest named as lab-only), the experiment's own record, and — from `--local`
 * — the drill's own run of the scenario just before, side by side.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderHtmlReport } from "../drill/html-report";
import { renderTable, summarize, fmtS, type ScenarioSummary } from "../drill/report";
import type { RunResult } from "../drill/run-scenario";
import type { ScenarioSpec } from "../drill/scenarios";
import { gamedayTargets } from "./judge";
import type { GamedayRun } from "./runner";

export interface GamedayReport {
  command: string;
  startedAt: string;
  /** `local`: the drill's world and local cloud; `aws`: the stack's account. */
  source: "local" | "aws";
  pass: boolean;
  experiment: { id: string; templateId: string; template: string; status: string; reason: string; runId: string; stoppedEarly: boolean };
  /** The drill's targets for the scenario that only the lab can measure. */
  labOnlyTargets: string[];
  traffic: { sent: Record<string, number>; failed: Record<string, number> };
  /** The game day's verdict, then (from --local) the drill's own run's, in the drill's report shape. */
  scenarios: (ScenarioSummary & { runs_detail: RunResult[] })[];
  /** Figure by figure, game day beside the drill (from --local). */
  comparison: { figure: string; gameday: number | null; drill: number | null }[];
  outDir: string;
}

const COMPARED: [string, (r: RunResult) => number | null][] = [
  ["detected (out of the answer or state worse)", (r) => r.detectMs],
  ["out of the public answer (DNS)", (r) => r.dnsMs],
  ["new leader", (r) => r.leaderMs],
  ["Redis answering from the promoted replica", (r) => (typeof r.extra.redisWritableMs === "number" ? r.extra.redisWritableMs : null)],
  ["back after the heal (recovery)", (r) => r.recoveryMs],
  ["failed requests, plain client", (r) => r.failed],
  ["failed requests, SDK client", (r) => r.failedSdk],
];

export function writeGamedayReport(o: { source: "local" | "aws"; spec: ScenarioSpec; run: GamedayRun; drill: RunResult | null; outDir: string; json?: string; startedAt: Date; command: string; azs: string[] }): { report: GamedayReport; text: string; pass: boolean } {
  const { targets, labOnly } = gamedayTargets(o.spec.targets);
  const gdSpec: ScenarioSpec = { ...o.spec, name: `${o.spec.name} (game day)`, targets };
  const summaries: GamedayReport["scenarios"] = [{ ...summarize(gdSpec, [o.run.result]), runs_detail: [o.run.result] }];
  if (o.run.stoppedEarly) summaries[0].misses.push(`experiment ${o.run.experiment.status}: ${o.run.experiment.reason}`);
  if (o.drill) summaries.push({ ...summarize({ ...o.spec, name: `${o.spec.name} (drill, just before)` }, [o.drill]), runs_detail: [o.drill] });
  const comparison = o.drill ? COMPARED.map(([figure, f]) => ({ figure, gameday: f(o.run.result), drill: f(o.drill!) })) : [];
  const failed: Record<string, number> = {};
  for (const f of o.run.tl.failures) failed[f.client] = (failed[f.client] ?? 0) + 1;
  const pass = summaries[0].pass === true && !o.run.stoppedEarly;
  const report: GamedayReport = {
    command: o.command,
    startedAt: o.startedAt.toISOString(),
    source: o.source,
    pass,
    experiment: { id: o.run.experiment.id, templateId: o.run.templateId, template: o.run.templateDescription, status: o.run.experiment.status, reason: o.run.experiment.reason, runId: o.run.runId, stoppedEarly: o.run.stoppedEarly },
    labOnlyTargets: labOnly,
    traffic: { sent: o.run.tl.sent, failed },
    scenarios: summaries,
    comparison,
    outDir: o.outDir,
  };
  const title = `llm-ha game day ${report.startedAt} — ${o.spec.name} (${o.source === "local" ? "the drill's world, local FIS" : "AWS FIS"})`;
  const table = renderTable(summaries);
  const html = renderHtmlReport(o.run.tl, { title, scenarios: summaries.slice(0, 1), table, svg: { nodes: [], azs: o.azs.map((a) => ({ name: a, address: a, standby: false })) } });
  writeFileSync(join(o.outDir, "report.html"), html);
  writeFileSync(join(o.outDir, "report.json"), JSON.stringify(report, null, 2) + "\n");
  if (o.json) {
    writeFileSync(o.json, JSON.stringify(report, null, 2) + "\n");
    writeFileSync(`${o.json.replace(/\.json$/i, "")}.html`, html);
  }
  const fmt = (label: string, v: number | null): string => (v === null ? "never" : label.startsWith("failed") ? String(v) : fmtS(v));
  const lines = [
    table,
    `experiment ${report.experiment.id} (template ${report.experiment.templateId}): ${report.experiment.status}${report.experiment.reason ? ` — ${report.experiment.reason}` : ""}`,
    `requests: ${Object.entries(report.traffic.sent).map(([c, n]) => `${c} ${failed[c] ?? 0} failed of ${n}`).join("; ")}`,
    ...summaries.flatMap((s) => s.misses.map((m) => `  ${s.name}: ${m}`)),
    ...(o.run.result.extra.figures ? [`game day: ${String(o.run.result.extra.figures)}`] : []),
    ...(typeof o.run.result.extra.alerts === "string" ? [`alerts fired during the run: ${o.run.result.extra.alerts}`] : []),
    ...(labOnly.length ? [`lab-only targets (not judged here): ${labOnly.join(", ")}`] : []),
    ...(comparison.length ? ["", "figure                                      game day   drill", ...comparison.map((c) => `${c.figure.padEnd(44)}${fmt(c.figure, c.gameday).padStart(8)}${fmt(c.figure, c.drill).padStart(9)}`)] : []),
    `report: ${join(o.outDir, "report.html")}${o.json ? `; json: ${o.json}` : `; json: ${join(o.outDir, "report.json")}`}`,
    "",
  ];
  return { report, text: lines.join("\n"), pass };
}
