import { spawnSync } from "node:child_process";
import { failuresBetween } from "../../lab/drill/timeline";
import { resolvingFetch } from "../../lab/drill/sdk-traffic";
import { tokenRegressions } from "../../lab/drill/scenarios/redis";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { parseDrillArgs, DrillUsageError } from "../../lab/drill/command";
import { checkTargets, figuresLine, fmtFigure, figure, renderTable, standbyLine, summarize } from "../../lab/drill/report";
import { staleWrites, type RunResult } from "../../lab/drill/run-scenario";
import { SCENARIOS, UnknownScenarioError } from "../../lab/drill/scenarios";
import { estimateSeconds, selectScenarios } from "../../lab/drill/plan";
import { renderTimelineSvg, runsOf } from "../../lab/drill/svg";
import { dnsChanges, emptyTimeline, firstAfter, l1Removed, p50max, removedBetween, type Sample } from "../../lab/drill/timeline";
import { sharesOf, spreadRatio, tally } from "../../lab/drill/scenarios/proxy-measure";
import { drawRequest, FIELD_MIX, promptOf, sendRecorded, startWorkload } from "../../lab/drill/workload";
import { missingSystemPackages } from "../../lab/engines/system-deps";
import { freePort, waitFor } from "../../agent/src/util/net";
import { startFakeInference } from "../../lab/sim/fake-inference";

function run(over: Partial<RunResult> = {}): RunResult {
  return {
    scenario: "crash",
    run: 1,
    victims: ["gpu-a1"],
    injectAt: 1000,
    healAt: 5000,
    endAt: 9000,
    detectMs: 80,
    l1Ms: 300,
    dnsMs: null,
    crossMs: null,
    leaderMs: null,
    recoveryMs: 3000,
    failed: 0,
    failedSdk: 0,
    cuts: { all: { cut: 0, hadTo: 0 }, sdk: { cut: 0, hadTo: 0 } },
    continued: { n: 0, greedy: 0, exact: 0 },
    failedSdkNoServer: 0,
    failedBaseline: { default: 2, tuned: 1 },
    falseFailovers: 0,
    staleWrites: null,
    baselineMs: { default: 5200, tuned: 900 },
    extra: { failedBeyondInFlight: 0 },
    notes: [],
    ...over,
  };
}

describe("scenario table", () => {
  it("holds the whole fault matrix and a quick subset with crash, GPU lost, wedged and AZ GPU loss", () => {
    expect(SCENARIOS.map((s) => s.name)).toEqual([
      "crash", "gpu-lost", "xid", "ecc", "model-unloaded", "wedged", "latency-creep", "az-gpu-loss", "standby-wake", "az-loss",
      "leader-kill", "leader-pause", "node-drain", "rolling-restart",
      "redis-failover-lag", "redis-failover", "redis-blackhole", "redis-slow", "redis-restart", "redis-readonly", "flap", "mass-probe",
      "query-of-death", "query-of-death-stream", "long-prompt-crash", "overload", "l2-spread", "long-generation", "burst", "server-kinds", "silent-corruption", "canary-noise", "corrupt-weights", "global-outage", "standby-ice", "wake-onto-bad-gpus",
      "practice-wake", "edge-auth", "edge-flood", "health-flood", "redis-forgery", "node-compromise", "agent-starve",
      "redis-failover-then-leader-kill", "leader-isolated", "redis-latency", "cross-az-loss", "az-power-interruption", "az-partition",
      "repair-reboot", "repair-replace", "repair-capacity-short", "bad-host-returns", "repair-storm",
      "rollout-good", "rollout-bad-weights", "rollout-slow", "rollout-leader-kill", "standby-wake-karpenter",
    ]);
    const quick = selectScenarios({ mode: "quick" });
    expect(quick.map((q) => q.spec.name)).toEqual(["crash", "gpu-lost", "wedged", "az-gpu-loss", "standby-wake"]);
    expect(selectScenarios({ mode: "full" }).find((p) => p.spec.name === "crash")?.runs).toBe(5);
    // With no flag: one scenario per tier (the L4 outage included), once each, in a few minutes.
    const first = selectScenarios({ mode: "first" });
    expect(new Set(first.map((p) => p.spec.tier))).toEqual(new Set(["L1", "L2", "L3", "L4", "fleet", "edge"].filter((t) => SCENARIOS.some((s) => s.tier === t))));
    expect(first.every((p) => p.runs === 1)).toBe(true);
    expect(estimateSeconds(first)).toBeLessThan(9 * 60);
    expect(estimateSeconds(selectScenarios({ mode: "full" }))).toBeGreaterThan(15 * 60);
  });
  it("selects by name and refuses an unknown one", () => {
    expect(selectScenarios({ scenario: "wedged,az-loss", mode: "full" }).map((p) => p.spec.name)).toEqual(["wedged", "az-loss"]);
    expect(() => selectScenarios({ scenario: "meteor", mode: "full" })).toThrow(UnknownScenarioError);
    expect(selectScenarios({ scenario: "standby-wake", mode: "full", runs: 7 })[0].runs).toBe(7);
  });
  it("carries the design's L1 targets (docs/design.md)", () => {
    const t = (n: string) => SCENARIOS.find((s) => s.name === n)!.targets;
    expect(t("crash")).toMatchObject({ l1P50Ms: 700, l1Ms: 1200, failedBeyondInFlight: 0 });
    expect(t("gpu-lost").l1Ms).toBe(2000);
    expect(t("wedged").l1Ms).toBe(4000);
    expect(t("az-gpu-loss").crossMs).toBe(3000);
    expect(t("az-loss").dnsMs).toBe(5000);
    expect(t("leader-pause").staleWrites).toBe(0);
    expect(t("standby-wake").wakeDecisionMs).toBe(10_000); // DESIGN: L2 wake-up decided ≤ 10 s
  });
  it("silent-corruption: out of L1 ≤ 30 s with no failed request; canary-noise: 0 false drains over ≥ 1,000 canaries", () => {
    const sc = SCENARIOS.find((x) => x.name === "silent-corruption")!;
    expect(sc.targets).toEqual({ l1Ms: 30_000, failed: 0 });
    expect(checkTargets(sc.targets, [run({ scenario: "silent-corruption", l1Ms: 31_000, failed: 0 })]).misses).toEqual(["L1: max 31.00s > 30.00s"]);
    const cn = SCENARIOS.find((x) => x.name === "canary-noise")!;
    expect(checkTargets(cn.targets, [run({ scenario: "canary-noise", falseFailovers: 0, extra: { canariesShort: 0 } })]).pass).toBe(true);
    expect(checkTargets(cn.targets, [run({ scenario: "canary-noise", falseFailovers: 0, extra: { canariesShort: 200 } })]).misses).toEqual(["canaries short of the number to send: 200 > 0"]);
  });
  it("every scenario: a continued greedy answer must read as an undisturbed run", () => {
    const spec = SCENARIOS.find((x) => x.name === "crash")!;
    expect(checkTargets(spec.targets, [run({ continued: { n: 3, greedy: 2, exact: 2 } })]).pass).toBe(true);
    expect(checkTargets(spec.targets, [run({ continued: { n: 3, greedy: 2, exact: 1 } })]).misses).toEqual(["continued greedy answers whose text differs from an undisturbed run: 1 of 2"]);
  });
  it("standby-ice: the fallback must start ≤ 30 s after the first capacity failure, no request failing", () => {
    const spec = SCENARIOS.find((x) => x.name === "standby-ice")!;
    expect(spec.targets).toEqual({ wakeDecisionMs: 10_000, fallbackMs: 30_000, failed: 0 });
    const ok = run({ scenario: "standby-ice", failed: 0, extra: { wakeDecisionMs: 900, fallbackAfterFailureMs: 4200 } });
    expect(checkTargets(spec.targets, [ok]).pass).toBe(true);
    const slow = run({ scenario: "standby-ice", failed: 0, extra: { wakeDecisionMs: 900, fallbackAfterFailureMs: 31_000 } });
    expect(checkTargets(spec.targets, [slow]).misses).toEqual(["fallback started after the first capacity failure: max 31.00s > 30.00s"]);
    expect(checkTargets(spec.targets, [run({ scenario: "standby-ice", failed: 0, extra: { wakeDecisionMs: 900, fallbackAfterFailureMs: null } })]).pass).toBe(false);
  });
  it("checks the standby wake-up decision and prints its figures", () => {
    const r = run({ scenario: "standby-wake", extra: { wakeDecisionMs: 900, wakeCallMs: 950, firstStandbyMs: 4200, failedUntilStandby: 0, releaseAfterHealMs: 5100, wakeToken: 3 } });
    expect(checkTargets({ wakeDecisionMs: 10_000 }, [r]).pass).toBe(true);
    expect(checkTargets({ wakeDecisionMs: 800 }, [r]).misses).toEqual(["standby wake decided: max 0.90s > 0.80s"]);
    expect(checkTargets({ wakeDecisionMs: 10_000 }, [run({ extra: { wakeDecisionMs: null } })]).pass).toBe(false);
    expect(standbyLine(r)).toBe(
      "standby-wake: wake decided 0.90s, wake call 0.95s, first standby node serving 4.20s after the fault; failed requests meanwhile 0; released 5.10s after the heal (fencing token 3)",
    );
    expect(standbyLine(run())).toBeNull();
  });
});

describe("target checks", () => {
  const crash = SCENARIOS[0];
  it("passes runs within the targets", () => {
    expect(checkTargets(crash.targets, [run(), run({ l1Ms: 650 }), run({ l1Ms: 1100 })])).toEqual({ pass: true, misses: [] });
  });
  it("names each miss: p50, max, never seen, failed requests", () => {
    const c = checkTargets(crash.targets, [run({ l1Ms: 800 }), run({ l1Ms: 1300, failed: 3, extra: { failedBeyondInFlight: 2 } }), run({ l1Ms: null })]);
    expect(c.pass).toBe(false);
    expect(c.misses).toEqual(["L1: not seen in 1 of 3 run(s) (target ≤ 1.20s)", "L1: max 1.30s > 1.20s", "failed requests beyond those in flight at the kill: 2 > 0", "L1: p50 0.80s > 0.70s"]);
  });
  it("judges the gray scenarios' extra counts and times: measured and within, by name", () => {
    const t = { extraCounts: { oldNodeClients: 0 }, extraTimes: { redisWritableMs: 5000 } };
    expect(checkTargets(t, [run({ extra: { oldNodeClients: 0, redisWritableMs: 4000 } })]).pass).toBe(true);
    expect(checkTargets(t, [run({ extra: { oldNodeClients: 2, redisWritableMs: 6000 } }), run({ extra: {} })]).misses).toEqual([
      "redisWritableMs: not seen in 1 of 2 run(s) (target ≤ 5.00s)",
      "redisWritableMs: max 6.00s > 5.00s",
      "oldNodeClients: not measured in 1 of 2 run(s) (target ≤ 0)",
      "oldNodeClients: 2 > 0",
    ]);
  });
  it("reports a scenario that could not run as not measured, never as passed", () => {
    const s = summarize(SCENARIOS.find((x) => x.name === "leader-kill")!, [run({ notMeasured: "no leader in Redis" })]);
    expect(s.pass).toBeNull();
    expect(renderTable([s])).toContain("NOT MEASURED");
  });
  it("counts a deposed leader's accepted write as stale", () => {
    const f = (t: number, tokens: Record<string, number>, leaderToken: number) => ({ t, azState: {}, tier: null, tokens, standbyWake: false, suspect: "", leader: "x", leaderToken });
    expect(staleWrites([f(0, { tier: 3 }, 3), f(1, { tier: 4 }, 4), f(2, { tier: 4 }, 4)], 0)).toBe(0);
    expect(staleWrites([f(0, { tier: 3 }, 3), f(1, { tier: 3 }, 4), f(2, { tier: 4 }, 4), f(3, { tier: 3 }, 4)], 0)).toBe(1);
    // A counter rolled back by an earlier scenario (long before this fault) is not this run's stale write.
    const earlier = [f(0, { tier: 9 }, 9), f(1, { tier: 9 }, 9)];
    const now = [f(60_000, { tier: 3 }, 3), f(61_000, { tier: 4 }, 4), f(62_000, { tier: 4 }, 4)];
    expect(staleWrites([...earlier, ...now], 61_000)).toBe(0);
    expect(staleWrites([...earlier, f(55_000, { tier: 9 }, 9), ...now], 61_000)).toBe(1);
  });
});

describe("report formatting", () => {
  it("shows p50/max over runs, a single value, never, and not applicable", () => {
    expect(fmtFigure(figure([300, 500, 700]))).toBe("0.50/0.70s");
    expect(fmtFigure(figure([1234]))).toBe("1.23s");
    expect(fmtFigure(figure([null]))).toBe("never");
    expect(fmtFigure(figure([200, null]))).toBe("0.20s (1× never)");
    expect(fmtFigure(figure([1]), false)).toBe("-");
    expect(p50max([3, 1, 2, null])).toEqual({ p50: 2, max: 3, n: 3 });
  });
  it("renders one aligned row per scenario with the baselines beside llm-ha", () => {
    const table = renderTable([summarize(SCENARIOS[0], [run(), run({ l1Ms: 500 })])]);
    const [head, row] = table.trimEnd().split("\n");
    expect(head).toMatch(/^result\s+scenario\s+runs\s+detect\s+L1\s+DNS/);
    expect(row).toMatch(/^ok\s+crash\s+2\s+0\.08s\s+0\.30\/0\.50s\s+-/);
    expect(row).toMatch(/0 \(4\/2\)\s+0\s+0\s/);
    expect(row).toContain("5.20s");
    expect(head.indexOf("L1")).toBe(row.indexOf("0.30/0.50s"));
  });
  it("fits a width with the verdict first: the sdk, cut and baseline columns only with -o wide, the target shortened", () => {
    const s = [summarize(SCENARIOS[0], [run(), run({ l1Ms: 500 })])];
    const lines = renderTable(s, { width: 100 }).trimEnd().split("\n");
    for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(100);
    expect(lines[1]).toMatch(/…$/); // the target text shortened
    expect(lines[0]).toMatch(/^result\s+scenario\s+runs\s+detect\s+L1\s+DNS\s+cross\/leader\s+recovery\s+failed\s+false fo\s+target$/);
    expect(lines[1]).toMatch(/^ok\s+crash\s+2\s/);
    expect(lines[1]).not.toContain("5.20s");
    const wide = renderTable(s, { width: 100, wide: true }).trimEnd().split("\n");
    expect(wide[0]).toContain("base 2s×3");
    expect(wide[1]).toContain("5.20s");
    expect(Math.max(...wide.map((l) => [...l].length))).toBeGreaterThan(100);
  });
  it("shows no detection, removal or recovery for a scenario that injects no fault", () => {
    const spec = SCENARIOS.find((s) => s.name === "long-generation")!;
    const quiet = run({ scenario: spec.name, victims: [], detectMs: null, l1Ms: null, recoveryMs: null, baselineMs: { default: null, tuned: null } });
    const row = renderTable([summarize(spec, [quiet])]).trimEnd().split("\n")[1];
    expect(row).toMatch(/^ok\s+long-generation\s+1\s+-\s+-\s+-\s+-\s+-\s+0 \(/);
    expect(row).not.toContain("never");
  });
});

describe("timeline questions", () => {
  const s = (t: number, status: string, dns: string[] | null = ["127.0.0.2"]): Sample => ({ t, nodes: {}, l1: { "p/a": { status, weight: status === "UP" ? 100 : 0, total: 0 } }, dns });
  const tl = emptyTimeline();
  tl.samples.push(s(0, "UP"), s(100, "UP"), s(200, "DOWN", ["127.0.0.3"]), s(300, "UP", null), s(400, "UP", ["127.0.0.2"]));
  it("finds the first sample after a time and the servers that left rotation", () => {
    expect(firstAfter(tl.samples, 50, (x) => l1Removed(x.l1["p/a"]))).toBe(150);
    expect(firstAfter(tl.samples, 250, (x) => l1Removed(x.l1["p/a"]))).toBeNull();
    expect(removedBetween(tl, ["p/a"], 0, 150)).toEqual([]);
    expect(removedBetween(tl, ["p/a"], 0, 250)).toEqual(["p/a"]);
    expect(l1Removed({ status: "DRAIN", weight: 100, total: 0 })).toBe(true);
    expect(l1Removed({ status: "UP", weight: 0, total: 0 })).toBe(true);
  });
  it("counts DNS answer changes, ignoring failed queries", () => {
    expect(dnsChanges(tl, 0, 1000)).toBe(2);
  });
  it("leaves the standby AZ's comings and goings (the leader's wake and release) out of the DNS changes", () => {
    const t = emptyTimeline();
    const at = (ms: number, dns: string[]) => ({ ...tl.samples[0], t: ms, dns });
    t.samples = [at(0, ["a", "b"]), at(100, ["a", "b", "s"]), at(200, ["a", "b"]), at(300, ["a"])];
    expect(dnsChanges(t, 0, 1000)).toBe(3);
    t.standbyAddress = "s";
    expect(dnsChanges(t, 0, 1000)).toBe(1);
  });
});

describe("SVG timeline", () => {
  it("merges equal samples into runs", () => {
    expect(runsOf([{ t: 0, v: "A" }, { t: 10, v: "A" }, { t: 20, v: "B" }], 30)).toEqual([
      { from: 0, to: 20, v: "A" },
      { from: 20, to: 30, v: "B" },
    ]);
  });
  it("writes well-formed SVG with a lane per node, per AZ, the tier, failures and fault marks", () => {
    const tl = emptyTimeline();
    for (let t = 0; t <= 4000; t += 100) {
      tl.samples.push({
        t,
        nodes: { "gpu-a1": { status: t > 1000 && t < 2000 ? "UNREACHABLE" : "HEALTHY", weight: 100 } },
        l1: { "az_a_servers/gpu-a1": { status: t > 1100 && t < 2500 ? "DOWN" : "UP", weight: 100, total: t } },
        dns: ["127.0.0.2"],
      });
      tl.fleet.push({ t, azState: { "az-a": "OK" }, tier: "L0", tokens: {}, standbyWake: false, suspect: "" });
    }
    tl.sent = { "llm-ha": 100 };
    tl.failures.push({ t: 1050, client: "llm-ha", why: "timeout" });
    tl.marks.push({ t: 1000, kind: "inject", label: "crash gpu-a1 <&>" }, { t: 2000, kind: "heal", label: "heal" });
    const svg = renderTimelineSvg(tl, { title: "t", nodes: [{ id: "gpu-a1", az: "az-a", proxy: "az_a_servers" }], azs: [{ name: "az-a", address: "127.0.0.2", standby: false }] });
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("gpu-a1 (az-a)");
    expect(svg).toContain("az-a DNS");
    expect(svg).toContain("tier level");
    expect(svg).toContain("llm-ha (1 of 100)");
    expect(svg).toContain("crash gpu-a1 &lt;&amp;&gt;");
    expect(svg).toContain('fill="#801818"'); // UNREACHABLE lane segment
    const py = spawnSync("python3", ["-c", "import sys,xml.dom.minidom as m; m.parseString(sys.stdin.read())"], { input: svg });
    if (!py.error) expect(py.status, py.stderr?.toString()).toBe(0);
  });
});

describe("command line and system deps", () => {
  it("parses the flags and refuses bad ones", () => {
    expect(parseDrillArgs(["--quick", "--check", "--json", "r.json", "--nodes=8", "--out", "d"])).toEqual({ quick: true, check: true, json: "r.json", nodes: 8, out: "d", help: false });
    expect(() => parseDrillArgs(["--nodes", "2"])).toThrow(DrillUsageError);
    expect(() => parseDrillArgs(["--json"])).toThrow(/needs a value/);
    expect(() => parseDrillArgs(["--fast"])).toThrow(/unknown flag/);
    expect(parseDrillArgs(["--no-netns"]).noNetns).toBe(true);
  });
  it("names the Debian packages that are missing", () => {
    expect(missingSystemPackages({ onPath: () => true, bindBackend: () => true })).toEqual([]);
    expect(missingSystemPackages({ onPath: (b) => b !== "haproxy", bindBackend: () => false })).toEqual(["haproxy", "pdns-backend-bind"]);
  });
});

describe("proxy scenarios: targets and figures", () => {
  const t = (n: string) => SCENARIOS.find((s) => s.name === n)!.targets;
  it("carries the targets of each proxy and failover scenario", () => {
    expect(t("query-of-death")).toMatchObject({ crashedServers: 2 });
    expect(t("long-prompt-crash")).toMatchObject({ failedBeyondInFlight: 0 });
    expect(t("overload")).toMatchObject({ healthMs: 1000, retryAfterMissing: 0, otherFailures: 0, falseFailovers: 0 });
    expect(t("l2-spread")).toMatchObject({ spreadRatio: 1.5 });
    expect(t("long-generation")).toMatchObject({ failed: 0, falseFailovers: 0 });
    expect(t("global-outage")).toMatchObject({ retryAfterMissing: 0, otherFailures: 0, firstL4Ms: 1000 });
    expect(t("node-drain")).toMatchObject({ failed: 0, sdkFailed: 0, falseFailovers: 0 });
    for (const n of ["redis-failover", "redis-failover-lag"]) {
      expect(t(n)).toMatchObject({ falseFailovers: 0, staleWrites: 0, tokenRegressions: 0, azHealth503: 0, leaderMs: 3500, registryMs: 1000 });
    }
  });
  it("checks counts and ratios kept in extra: over the target, or not measured, is a miss", () => {
    expect(checkTargets({ crashedServers: 1 }, [run({ extra: { crashedServers: 1 } })]).pass).toBe(true);
    expect(checkTargets({ crashedServers: 1 }, [run({ extra: { crashedServers: 3 } })]).misses).toEqual(["inference servers crashed: 3 > 1"]);
    expect(checkTargets({ spreadRatio: 1.5 }, [run({ extra: { spreadRatio: 2 } })]).misses).toEqual(["busiest backup server's share over its fair share: 2 > 1.50"]);
    expect(checkTargets({ spreadRatio: 1.5 }, [run({ extra: {} })]).misses[0]).toMatch(/not measured in 1 of 1/);
    expect(checkTargets({ fast503Ms: 1000 }, [run({ extra: { max503Ms: null } })]).misses).toEqual(["slowest 503: not seen in 1 of 1 run(s) (target ≤ 1.00s)"]);
    expect(checkTargets({ healthMs: 1000 }, [run({ extra: { healthMaxMs: 2000 } })]).misses).toEqual(["slowest /healthz or /az/health answer: max 2.00s > 1.00s"]);
  });
  it("prints a run's figures under the table", () => {
    expect(figuresLine(run({ scenario: "l2-spread", extra: { figures: "busiest backup 1.02× its fair share" } }))).toBe("l2-spread: busiest backup 1.02× its fair share");
    expect(figuresLine(run())).toBeNull();
  });
});

describe("proxy scenarios: measurements", () => {
  const row = (status: string, total: number, weight = 100) => ({ status, weight: status.startsWith("UP") ? weight : 0, total });
  const sample = (t: number, b1: [string, number], b2: [string, number]): Sample => ({ t, nodes: {}, l1: { "p/b1": row(...b1), "p/b2": row(...b2) }, dns: null });
  it("shares each steady interval's requests equally among the servers in rotation", () => {
    const all = [sample(0, ["UP", 0], ["UP", 0]), sample(100, ["UP", 20], ["UP", 0]), sample(200, ["UP", 40], ["UP", 0])];
    const { shares, judgedMs } = sharesOf(all, ["p/b1", "p/b2"], 0, 200);
    expect(shares).toEqual([{ row: "p/b1", requests: 40, fair: 20 }, { row: "p/b2", requests: 0, fair: 20 }]);
    expect(judgedMs).toBe(200);
    expect(spreadRatio(shares)).toBe(2);
    // A server out of rotation has no share; an interval where one changes state or ramps up is not judged.
    const down = [sample(0, ["UP", 0], ["DOWN", 0]), sample(100, ["UP", 30], ["DOWN", 0]), sample(200, ["UP", 40], ["UP", 5]), sample(300, ["UP", 50], ["UP", 10])];
    down[3].l1["p/b2"].weight = 7;
    const d = sharesOf(down, ["p/b1", "p/b2"], 0, 300);
    expect(d).toEqual({ shares: [{ row: "p/b1", requests: 30, fair: 30 }, { row: "p/b2", requests: 0, fair: 0 }], judgedMs: 100 });
    expect(spreadRatio(d.shares)).toBe(1);
    expect(spreadRatio([{ row: "x", requests: 30, fair: 10 }])).toBeNull();
  });
  it("tallies failure reasons and draws requests from a mix", () => {
    expect(tally(["HTTP 502", "stream cut", "HTTP 502"])).toBe("HTTP 502 ×2, stream cut ×1");
    const seq = [0, 0.999, 0.9, 0.9];
    let i = 0;
    expect(drawRequest(FIELD_MIX, () => seq[i++])).toEqual({ shape: "completion", promptBytes: 1024, maxTokens: 250 });
    expect(promptOf(65_536, "MARK")).toHaveLength(65_536);
    expect(promptOf(100, "MARK")).toContain("MARK");
  });
});

describe("field workload", () => {
  it("sends every shape with the openai client and records successes; a 503 keeps its Retry-After", async () => {
    const fake = await startFakeInference({ model: "m", latencyMs: 1, tokenMs: 2 });
    const refuse = createServer((_req, res) => res.writeHead(503, { "retry-after": "1", "content-type": "text/html" }).end("<html>503</html>"));
    await new Promise<void>((r) => refuse.listen(0, "127.0.0.1", () => r()));
    try {
      const tl = emptyTimeline();
      const wl = startWorkload({ client: "f", target: () => fake.url, mix: { ...FIELD_MIX, maxTokens: [3, 6] }, concurrency: 4, timeline: tl, now: () => Date.now(), model: "m", timeoutMs: 5000 });
      // Counted, not timed: on a loaded machine 600 ms gave 4 records where a quiet one gives dozens.
      await waitFor("nine recorded requests", () => wl.records.length > 8, { timeoutMs: 20_000, everyMs: 50 }).catch(() => undefined);
      await wl.stop();
      expect(wl.records.length).toBeGreaterThan(8);
      expect(wl.records.every((x) => x.ok && x.tokens === x.maxTokens)).toBe(true);
      expect(new Set(wl.records.map((x) => x.shape)).size).toBeGreaterThanOrEqual(3);
      expect(tl.sent.f).toBe(wl.records.length);
      const port = (refuse.address() as AddressInfo).port;
      const rec = await sendRecorded({ client: "f", timeline: tl, now: () => Date.now(), model: "m", timeoutMs: 2000 }, `http://127.0.0.1:${port}`, { shape: "chat-stream", promptBytes: 1024, maxTokens: 3 });
      expect(rec).toMatchObject({ ok: false, why: "HTTP 503", status: 503, retryAfter: "1" });
      expect(tl.failures).toEqual([expect.objectContaining({ client: "f", why: "HTTP 503" })]);
      const dead = await sendRecorded({ client: "f", timeline: tl, now: () => Date.now(), model: "m", timeoutMs: 2000 }, `http://127.0.0.1:${await freePort()}`, { shape: "completion", promptBytes: 1024, maxTokens: 3 });
      expect(dead.why).toBe("ECONNREFUSED");
    } finally {
      await fake.close();
      refuse.close();
    }
  });
});

describe("redis failover figures", () => {
  it("counts a leader token lower than one seen before, from the fault on", () => {
    const f = (t: number, leaderToken: number | null) => ({ t, azState: {}, tier: null, tokens: {}, standbyWake: false, suspect: "", leaderToken });
    expect(tokenRegressions([f(1, 10), f(2, 10), f(3, null), f(4, 12)], 0)).toBe(0);
    expect(tokenRegressions([f(1, 10), f(2, 12), f(3, 11), f(4, 9)], 2)).toBe(2);
    expect(tokenRegressions([f(1, 10), f(2, 9), f(3, 11)], 3)).toBe(0);
  });
});

describe("client classes", () => {
  it("counts a failed request in a window when it was in flight in it (a stream started before the fault and cut by it)", () => {
    const tl = { samples: [], fleet: [], sent: {}, marks: [], continued: [], failures: [
      { t: 900, end: 1200, client: "c", why: "stream cut" },
      { t: 500, end: 800, client: "c", why: "HTTP 503" },
      { t: 1500, client: "c", why: "ECONNREFUSED" },
      { t: 1100, end: 1300, client: "other", why: "x" },
    ] };
    expect(failuresBetween(tl, "c", 1000, 2000)).toBe(2);
    expect(failuresBetween(tl, "c", 0, 850)).toBe(1);
  });
  it("the SDK class's fetch sends each attempt to an address of the latest DNS answer", async () => {
    const seen: string[] = [];
    const { createServer } = await import("node:http");
    const srv = createServer((req, res) => {
      seen.push(`${req.socket.localAddress}:${req.url}`);
      res.end("ok");
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.3", () => r()));
    const port = (srv.address() as { port: number }).port;
    try {
      const f = resolvingFetch(() => "127.0.0.3");
      expect(await (await f(`http://inference.llmha.test:${port}/v1/models`)).text()).toBe("ok");
      expect(seen).toEqual([`127.0.0.3:/v1/models`]);
      await expect(resolvingFetch(() => null)(`http://inference.llmha.test:${port}/v1/models`)).rejects.toThrow(/did not resolve/);
    } finally {
      srv.close();
    }
  });
});
