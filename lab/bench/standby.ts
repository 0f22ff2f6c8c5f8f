/**
 * The standby wake-up (issue: the controller acts), measured on the drill's real pieces:
 * the `standby-wake` scenario N times — an active AZ loses every GPU while the standby AZ
 * is at zero. Per run: fault → the leader's wake decision, → the local cloud's wake call,
 * → the first standby node serving; failed requests meanwhile. The baseline is the
 * schedule alone: without the controller the standby stays at zero until the schedule's
 * next scale-up (hours at night), so it is reported as never within the run.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDrill, type DrillReport } from "../drill/command";
import { measured } from "../../agent/src/util/stats";
import { pct } from "./agent-l1";

export async function runStandbyBench(o: { runs: number; log: (l: string) => void }): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "llmha-bench-standby-"));
  try {
    const json = join(dir, "drill.json");
    const code = await runDrill(
      { scenario: "standby-wake", quick: false, check: false, json, out: join(dir, "drill"), nodes: 6, runs: o.runs, help: false },
      { out: () => undefined, err: (s) => o.log(s.trimEnd()) },
    );
    const report = JSON.parse(readFileSync(json, "utf8")) as DrillReport;
    const runs = report.scenarios.flatMap((s) => s.runs_detail);
    const extra = (k: string): (number | null)[] => runs.map((r) => (typeof r.extra[k] === "number" ? (r.extra[k] as number) : null));
    // The shared summary (n, p50, p99, max, never) plus each run's value, for the docs' table.
    const summary = (k: string) => ({ ...pct(extra(k)), values: measured(extra(k)) });
    return {
      drillExitCode: code,
      runs: runs.length,
      target: "wake-up decided ≤ 10 s (docs/design.md, L2)",
      wakeDecisionMs: summary("wakeDecisionMs"),
      wakeCallMs: summary("wakeCallMs"),
      firstStandbyServingMs: summary("firstStandbyMs"),
      failedRequestsUntilStandby: summary("failedUntilStandby"),
      baseline: { what: "the scale-to-zero schedule alone (no controller)", firstStandbyServingMs: null, note: "never within a run: the standby stays at zero until the schedule's next scale-up" },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
