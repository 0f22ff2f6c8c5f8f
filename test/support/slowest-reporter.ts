/**
 * Prints the ten slowest test files at the end of every run, so a file that grows slow is seen
 * the day it does, not when the tier's budget is already spent. A file's time is what it held a
 * worker: its imports, its set-up and its tests (vitest's own per-file figure counts the tests
 * only). `npm run test:slowest` runs both tiers (dot reporter) and prints the list over all of them.
 */
import type { Reporter, TestModule } from "vitest/node";

/** How many files the summary names. */
const SHOWN = 10;

/** Seconds a file held its worker: environment, harness, imports, set-up and tests. */
export function heldSeconds(m: TestModule): number {
  const d = m.diagnostic();
  return (d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration) / 1000;
}

export class SlowestReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    if (testModules.length < 2) return;
    const rows = testModules
      .map((m) => ({ file: m.relativeModuleId, project: m.project.name, s: heldSeconds(m) }))
      .sort((a, b) => b.s - a.s)
      .slice(0, SHOWN);
    const total = testModules.reduce((sum, m) => sum + heldSeconds(m), 0);
    const out = [`\n Slowest ${rows.length} of ${testModules.length} files (imports + set-up + tests; ${total.toFixed(0)} s held in all):`];
    for (const r of rows) out.push(`  ${r.s.toFixed(1).padStart(7)} s  ${r.file}${r.project ? `  [${r.project}]` : ""}`);
    process.stdout.write(`${out.join("\n")}\n`);
  }
}
