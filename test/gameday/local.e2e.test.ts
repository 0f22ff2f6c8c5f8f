/**
 * `llm-ha gameday --local` end to end: the drill's world on real engines, the local cloud
 * answering FIS, the runner finding the template by its tags, starting it through the AWS SDK,
 * and writing the report in the drill's schema; nothing it started is left running.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run";
import { testTempDir } from "../support/temp-dir";
import type { GamedayReport } from "../../lab/gameday/report";
import { pidAlive } from "../../lab/cli-process";


describe("llm-ha gameday --local", () => {
  // The targets are the drill's (--check's verdict on a quiet machine); beside other suites the
  // test keeps generous bounds: twice the DNS and leader targets.
  it("runs az-power-interruption through the local FIS and reports it in the drill's schema", async () => {
    // The report and the run's logs: removed on a pass, kept on a failure for a person to read.
    const dir = testTempDir("llmha-gameday-test-", { keepOnFailure: true });
    const json = join(dir, "report.json");
    const { code, out, err } = await runCli(["gameday", "--local", "--no-drill", "--hold", "6", "--json", json, "--out", join(dir, "out")]);
    expect([0, 1], `${out}\n${err}`).toContain(code);
    const report = JSON.parse(readFileSync(json, "utf8")) as GamedayReport;
    expect(report.source).toBe("local");
    expect(report.experiment).toMatchObject({ status: "completed", templateId: "EXTlocalazpowerinterruption", stoppedEarly: false });
    expect(err).toMatch(/finding the FIS template of az-power-interruption in drill/);
    const [gd] = report.scenarios;
    expect(gd.name).toBe("az-power-interruption (game day)");
    expect(gd.runs_detail[0].injectAt).toBeGreaterThan(0);
    expect(gd.dns.max!).toBeLessThanOrEqual(2 * 5000);
    expect(gd.leader.max!).toBeLessThanOrEqual(2 * 3500);
    expect(gd.staleWrites).toBe(0);
    expect(report.labOnlyTargets).toContain("queueFailed");
    expect(report.traffic.sent["llm-ha"]).toBeGreaterThan(100);
    expect(readFileSync(join(dir, "report.html"), "utf8")).toMatch(/az-power-interruption \(game day\)/);
    const pids = JSON.parse(readFileSync(join(dir, "out", "pids.json"), "utf8")) as number[];
    expect(pids.length).toBeGreaterThanOrEqual(6 * 2);
    expect(pids.filter(pidAlive)).toEqual([]);
  }, 420_000); // about 2–3 min on 2 cores; more when other suites run beside it
});
