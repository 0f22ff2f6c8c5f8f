/**
 * `llm-ha cost` as a user runs it (argv, exit code, stdout, stderr), run in this process: the
 * process boundary of bin/llm-ha is test/cli/bin.test.ts's.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import type { CostReport } from "../../infra/cost/estimate";
import { main } from "../../lab/cli";
import { runInProcess, type Ran } from "../support/in-process";
import { testTempDir } from "../support/temp-dir";

const ROOT = path.resolve(__dirname, "..", "..");

function cost(args: string[], cwd = ROOT): Promise<Ran> {
  return costEnv(args, {}, cwd);
}

/** `cost` with `env` over the test's environment (no COLUMNS of the caller's unless given). */
function costEnv(args: string[], env: Record<string, string>, cwd = ROOT): Promise<Ran> {
  return runInProcess(main, ["cost", ...args], { env: { COLUMNS: undefined, ...env }, cwd });
}

/** A copy of dev's stack file with `edit` applied, as its own project folder (removed when the calling test finishes). */
function devVariant(edit: (yaml: string) => string): string {
  const dir = testTempDir("llmha-cost-");
  fs.copyFileSync(path.join(ROOT, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
  const file = path.join(dir, "Pulumi.qa.yaml");
  // Only a stack named dev may waive TLS at the edge: the copy names a certificate instead.
  const dev = fs.readFileSync(path.join(ROOT, "Pulumi.dev.yaml"), "utf8").replace(
    "  llm-ha:edge:\n    plainHttp: true\n",
    "  llm-ha:edge:\n    certificateArn: arn:aws:acm:us-east-1:111122223333:certificate/6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0\n",
  );
  fs.writeFileSync(file, edit(dev));
  return file;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe("llm-ha cost", () => {
  for (const stack of ["dev", "staging", "prod"]) {
    it(`${stack}: JSON whose rows and totals agree, scheduled never above always-on`, async () => {
      const { code, stdout, stderr } = await cost(["--stack", stack, "--month", "2026-02", "--json"]);
      expect(code, stderr).toBe(0);
      const r = JSON.parse(stdout) as CostReport;
      expect(r).toMatchObject({ stack, region: "us-east-1", month: "2026-02", hours: 672 });
      expect(r.groups.length).toBeGreaterThan(0);
      for (const g of r.groups) {
        expect(g.gpuHoursScheduled).toBeLessThanOrEqual(g.gpuHoursAlwaysOn);
        expect(g.usdScheduled).toBeLessThanOrEqual(g.usdAlwaysOn);
        expect(g.gpuHoursAlwaysOn).toBe(g.gpus * 672);
        expect(g.usdAlwaysOn).toBeCloseTo(g.usdPerHour * g.nodes * 672, 2);
        expect(g.usdSaved).toBeCloseTo(g.usdAlwaysOn - g.usdScheduled, 2);
        // Only the standby AZ is ever scheduled.
        if (g.role === "active") expect(g.usdSaved).toBe(0);
        else expect(g.hoursUp).toBe(r.schedule?.hoursUp);
      }
      const t = r.total;
      expect(t.gpus).toBe(sum(r.groups.map((g) => g.gpus)));
      expect(t.gpuHoursAlwaysOn).toBeCloseTo(sum(r.groups.map((g) => g.gpuHoursAlwaysOn)), 2);
      // Practice wakes add to the scheduled side (an always-on standby skips them).
      expect(r.practice).not.toBeNull();
      expect(r.practice!.usd).toBeGreaterThan(0);
      expect(t.gpuHoursScheduled).toBeCloseTo(sum(r.groups.map((g) => g.gpuHoursScheduled)) + r.practice!.gpuHours, 2);
      expect(t.usdAlwaysOn).toBeCloseTo(sum(r.groups.map((g) => g.usdAlwaysOn)), 2);
      expect(t.usdScheduled).toBeCloseTo(sum(r.groups.map((g) => g.usdScheduled)) + r.practice!.usd, 2);
      expect(t.usdSaved).toBeCloseTo(t.usdAlwaysOn - t.usdScheduled, 2);
      expect(r.standby?.usdSaved).toBe(t.usdSaved);
      expect(r.schedule!.hoursUp + r.schedule!.hoursDown).toBe(672);
      for (const p of r.prices) expect(p).toMatchObject({ region: "us-east-1", asOf: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/), source: expect.stringMatching(/^https:\/\//) });
    });
  }

  it("fits $COLUMNS by default: the instance type and GPU-hour columns left out, the prose wrapped", async () => {
    const { code, stdout } = await costEnv(["--stack", "prod", "--month", "2026-02"], { COLUMNS: "80" });
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(80);
    expect(lines.find((l) => l.startsWith("AZ"))).toMatch(/^AZ\s+role\s+class\s+nodes\s+GPUs\s+\$\/mo always-on\s+\$\/mo scheduled\s+saved$/);
    expect(stdout).toMatch(/^us-east-1c\s+standby\s+h100\s+2\s+16\s+\$73,973\.76\s+\$49,756\.16\s+32\.7 %$/m);
    expect(stdout).not.toContain("p5.48xlarge  ");
  });

  it("prints prod as a table (-o wide: every column) with one row per AZ and class, the standby subtotal and the total", async () => {
    const { code, stdout } = await cost(["--stack", "prod", "--month", "2026-02", "-o", "wide"]);
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    expect(lines[2]).toMatch(/^AZ\s+role\s+class\s+instance\s+nodes\s+GPUs\s+GPU-h always-on\s+GPU-h scheduled\s+\$\/mo always-on\s+\$\/mo scheduled\s+saved$/);
    expect(lines.filter((l) => /^us-east-1[abc]\s+(active|standby)\s+(a100|h100)\s+p[45]/.test(l))).toHaveLength(6);
    // 220 of 672 hours at zero on the standby AZ: 32.7 % of that AZ's cost.
    expect(stdout).toMatch(/^us-east-1c\s+standby\s+h100\s+p5\.48xlarge\s+2\s+16\s+10,752\s+7,232\s+\$73,973\.76\s+\$49,756\.16\s+32\.7 %$/m);
    // Four Sunday 04:00 practices (the standby asleep Friday 22:00 – Monday 05:00), 20 min each: 2 × 55.04 × 4/3 h.
    expect(stdout).toMatch(/^us-east-1c\s+practice\s+h100\s+p5\.48xlarge\s+2\s+16\s+0\s+21\.33\s+\$0\.00\s+\$146\.77$/m);
    expect(stdout).toMatch(/^standby AZ\s+6\s+48\s+32,256\s+21,760\s+.*32\.5 %$/m);
    expect(stdout).toMatch(/^total\s+18\s+144\s+96,768\s+86,272\s+.*10\.8 %$/m);
    expect(stdout).toContain('Practice wakes "0 4 * * 0" (UTC): 4 this month, 4 with the standby at zero');
    expect(stdout).toContain("Up 452 h, at zero 220 h of 672 h");
  });

  it("counts practice wakes that find the standby at zero, skips those that find it up, and none with practice off", async () => {
    const price = 21.957642;
    const asleep = await cost(["--stack", devVariant((y) => y), "--month", "2026-02", "--json"], os.tmpdir());
    const r = JSON.parse(asleep.stdout) as CostReport;
    // Sundays 1, 8, 15, 22 February at 04:00 Berlin: the standby sleeps from Saturday 12:00 to Monday 07:00.
    expect(r.practice).toMatchObject({ cron: "0 4 * * 0", timeZone: "Europe/Berlin", budgetMinutes: 20, firings: 4, runs: 4, skipped: 0 });
    expect(r.practice!.rows).toEqual([{ az: "us-east-1b", gpuClass: "a100", instanceType: "p4d.24xlarge", nodes: 1, gpus: 8, hours: 1.33, gpuHours: 10.67, usdPerHour: price, usd: 29.28 }]);
    expect(r.total.usdScheduled).toBe(20493.81);
    // Mondays 10:00: the standby is up from 07:00, every practice is skipped and costs nothing.
    const up = await cost(["--stack", devVariant((y) => y.replace('cron: "0 4 * * 0"\n    budgetMinutes: 20', 'cron: "0 10 * * 1"\n    budgetMinutes: 30')), "--month", "2026-02", "--json"], os.tmpdir());
    const u = JSON.parse(up.stdout) as CostReport;
    expect(u.practice).toMatchObject({ firings: 4, runs: 0, skipped: 4, usd: 0, budgetMinutes: 30 });
    expect(u.total.usdScheduled).toBe(20464.53);
    const off = await cost(["--stack", devVariant((y) => y.replace(/ {2}llm-ha:practiceWake:\n[\s\S]*$/, "  llm-ha:practiceWake: false\n")), "--month", "2026-02", "--json"], os.tmpdir());
    expect((JSON.parse(off.stdout) as CostReport).practice).toBeNull();
  });

  it("shows what a standby at half an active AZ saves against full redundancy", async () => {
    const file = devVariant((y) => `${y.replace("desiredPerAz: 1", "desiredPerAz: 2").replace("maxPerAz: 2", "maxPerAz: 4")}  llm-ha:standbyCapacityRatio: 0.5\n`);
    const json = await cost(["--stack", file, "--month", "2026-02", "--json"], os.tmpdir());
    expect(json.code, json.stderr).toBe(0);
    const r = JSON.parse(json.stdout) as CostReport;
    const standby = r.groups.find((g) => g.role === "standby")!;
    expect(standby).toMatchObject({ nodes: 1, maxNodes: 2, gpus: 8 });
    expect(r.groups.find((g) => g.role === "active")).toMatchObject({ nodes: 2, maxNodes: 4 });
    // Full size: 2 nodes × 260 h up; half: 1 node.
    expect(r.redundancy).toMatchObject({ ratio: 0.5, nodes: 1, fullNodes: 2, usdFull: 11417.97, usdPartial: 5708.99, usdSaved: 5708.98 });
    expect(r.redundancy!.savedPct).toBeCloseTo((100 * 5708.98) / (r.total.usdScheduled + 5708.98), 2);
    const text = await cost(["--stack", file, "--month", "2026-02"], os.tmpdir());
    expect(text.stdout).toContain("Partial redundancy: the standby AZ runs at 50 % of an active AZ (1 nodes instead of 2): $5,708.99 instead of $11,417.97 a month, saves $5,708.98");
    const bad = await cost(["--stack", devVariant((y) => `${y}  llm-ha:standbyCapacityRatio: 1.5\n`)], os.tmpdir());
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('llm-ha:standbyCapacityRatio: "1.5" must be a number from 0.01 to 1');
  });

  it("takes a path to a stack file and a --price override", async () => {
    const file = devVariant((y) => y);
    const { code, stdout, stderr } = await cost(["--stack", file, "--month", "2026-02", "--price", "p4d.24xlarge=10", "--json"], os.tmpdir());
    expect(code, stderr).toBe(0);
    const r = JSON.parse(stdout) as CostReport;
    expect(r.stack).toBe("qa");
    expect(r.prices).toEqual([expect.objectContaining({ instanceType: "p4d.24xlarge", usdPerHour: 10, source: "--price", confirmed: false })]);
    expect(r.total.usdAlwaysOn).toBe(2 * 10 * 672);
  });

  it("exits 2 on an unknown stack, listing the stacks found", async () => {
    const { code, stderr } = await cost(["--stack", "qa"]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^llm-ha cost: no stack "qa" in \S+; stacks found: byo, dev, prod, staging$/m);
  });

  it("exits 2 on a bad cron, naming the config key", async () => {
    const file = devVariant((y) => y.replace('scaleDown: "0 20 * * 1-5"', 'scaleDown: "0 25 * * 1-5"'));
    const { code, stderr } = await cost(["--stack", file]);
    expect(code).toBe(2);
    expect(stderr).toContain('llm-ha:schedule.scaleDown: "0 25 * * 1-5" is not a 5-field cron expression: hour 25 is out of range 0-23');
  });

  it("exits 2 on an instance type with no price, naming it, the region and the key", async () => {
    const file = devVariant((y) => y.replace("maxPerAz: 2", "maxPerAz: 2\n      instanceType: g6e.48xlarge"));
    const { code, stderr } = await cost(["--stack", file]);
    expect(code).toBe(2);
    expect(stderr).toBe(
      "llm-ha cost: no On-Demand price for g6e.48xlarge in us-east-1 (llm-ha:gpuClasses[0], class a100); " +
        "add it to infra/cost/prices.json or pass --price g6e.48xlarge=USD_PER_HOUR\n",
    );
  });

  it("exits 2 on bad arguments and 0 on --help", async () => {
    expect((await cost(["--stack", "prod", "--month", "2026-2"])).stderr).toMatch(/--month "2026-2": expected YYYY-MM/);
    const unknown = await cost(["--stack", "prod", "--verbose"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown flag "--verbose"/);
    expect((await cost([])).stderr).toMatch(/--stack is required/);
    const help = await cost(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: llm-ha cost --stack ENV/);
  });
});
