import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseConfig, helpText } from "../../agent/src/config/load";
import { OPTION_GROUPS, OPTION_SPECS, flagOf } from "../../agent/src/config/spec";
import { configReferenceMarkdown, settingsPage } from "../../agent/src/config/reference";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const base = { LLMHA_AZ: "az-a", LLMHA_NODE_ID: "n1" };

function runCli(args: string[], env: Record<string, string>): { code: number | null; stderr: string; stdout: string } {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_") && k !== "COLUMNS"));
  const r = spawnSync(process.execPath, ["--import", "tsx", CLI, ...args], { env: { ...clean, ...env }, encoding: "utf8", timeout: 20_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe("configuration", () => {
  it("has the contract defaults (docs/settings.md)", () => {
    const c = parseConfig([], base);
    expect(c).toMatchObject({
      cluster: "default",
      nvidiaSmi: "nvidia-smi",
      gpuCount: null,
      inferenceUrl: "http://127.0.0.1:8000",
      inferenceKind: "vllm",
      model: null,
      intervalMs: 1000,
      probeLatencyMs: 5000,
      httpPort: 9400,
      agentCheckPort: 9401,
      redisUrl: null,
      leaseTtlMs: 20000,
      leaseRenewMs: 7000,
      leaseContendMs: 5000,
    });
  });

  it("the repair ladder advises by default; off and spare counts per AZ are taken", () => {
    expect(parseConfig([], base)).toMatchObject({ repairMode: "advise", repairSpare: null });
    expect(parseConfig([], { ...base, LLMHA_REPAIR_MODE: "off", LLMHA_REPAIR_SPARE: "us-east-1a=2, us-east-1b=0" })).toMatchObject({ repairMode: "off", repairSpare: "us-east-1a=2, us-east-1b=0" });
  });

  it("predictive drains are on with a budget of 2 per 24 h by default; off and the budget are taken", () => {
    expect(parseConfig([], base)).toMatchObject({ repairPredictive: "on", repairPredictiveBudget: 2 });
    expect(parseConfig([], { ...base, LLMHA_REPAIR_PREDICTIVE: "off", LLMHA_REPAIR_PREDICTIVE_BUDGET: "0" })).toMatchObject({ repairPredictive: "off", repairPredictiveBudget: 0 });
  });

  it("act is taken with an actuator; aws needs the inventory (the Kubernetes API)", () => {
    const act = { ...base, LLMHA_REPAIR_MODE: "act", LLMHA_REDIS_URL: "redis://r:6379", LLMHA_STANDBY_AZ: "us-east-1c" };
    expect(parseConfig([], { ...act, LLMHA_ACTUATOR: "dry-run" })).toMatchObject({ repairMode: "act", repairNamespace: "llm-ha" });
    expect(() => parseConfig([], { ...act, LLMHA_ACTUATOR: "aws", LLMHA_AWS_REGION: "us-east-1", LLMHA_STANDBY_ASGS: "us-east-1c:asg-c:2" })).toThrow(/act with LLMHA_ACTUATOR=aws needs LLMHA_INVENTORY/);
  });

  it("an aws actuator whose only job is the repair ladder acting is taken; without act it still has nothing to do", () => {
    // The controller of a stack with no standby AZ and no reserved groups (infra: llm-ha:repair.mode act).
    const ctl = {
      ...base, LLMHA_ROLE: "controller", LLMHA_REDIS_URL: "redis://r:6379", LLMHA_ACTUATOR: "aws", LLMHA_AWS_REGION: "us-east-1",
      LLMHA_AZ_IDS: "us-east-1a=use1-az4,us-east-1b=use1-az6", LLMHA_INVENTORY: "kubernetes", KUBERNETES_SERVICE_HOST: "10.100.0.1",
    };
    expect(parseConfig([], { ...ctl, LLMHA_REPAIR_MODE: "act", LLMHA_REPAIR_NAMESPACE: "llm-ha" })).toMatchObject({ actuator: "aws", repairMode: "act", standbyAz: null, standbyAsgs: null, reservedGroups: null });
    for (const mode of ["advise", "off"]) expect(() => parseConfig([], { ...ctl, LLMHA_REPAIR_MODE: mode })).toThrow(/LLMHA_STANDBY_AZ.*LLMHA_ACTUATOR=aws has nothing to do/);
    // A standby AZ without its groups is still refused: act does not stand in for LLMHA_STANDBY_ASGS there.
    expect(() => parseConfig([], { ...ctl, LLMHA_REPAIR_MODE: "act", LLMHA_STANDBY_ASGS: "asg-b=2" })).toThrow(/LLMHA_STANDBY_AZ.*is required with LLMHA_STANDBY_ASGS/);
    // Only aws: a dry-run or local actuator with nothing but act still has nothing to do.
    expect(() => parseConfig([], { ...ctl, LLMHA_ACTUATOR: "dry-run", LLMHA_REPAIR_MODE: "act" })).toThrow(/LLMHA_ACTUATOR=dry-run has nothing to do/);
  });

  it("act mode's timings default to production's (settle 30 s, drain 10 min, wait 30 min, replacement 60 min); the drill's shorter ones are taken", () => {
    expect(parseConfig([], base)).toMatchObject({ repairSettleMs: 30_000, repairDrainTimeoutMs: 600_000, repairWaitTimeoutMs: 1_800_000, repairReplacementTimeoutMs: 3_600_000 });
    const drill = { ...base, LLMHA_REPAIR_SETTLE_MS: "5000", LLMHA_REPAIR_DRAIN_TIMEOUT_MS: "60000", LLMHA_REPAIR_WAIT_TIMEOUT_MS: "90000", LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS: "45000" };
    expect(parseConfig([], drill)).toMatchObject({ repairSettleMs: 5000, repairDrainTimeoutMs: 60_000, repairWaitTimeoutMs: 90_000, repairReplacementTimeoutMs: 45_000 });
  });

  it("the deep check runs dcgmi where found by default; LLMHA_DEEP_CHECK=dcgmi refuses to start without it, naming LLMHA_DCGMI", () => {
    expect(parseConfig([], base)).toMatchObject({ deepCheck: "auto", dcgmi: "dcgmi", deepCheckTimeoutMs: 120_000, deepCheckRetryMs: 600_000 });
    // auto starts without dcgmi (smoke and canary only).
    expect(parseConfig([], { ...base, PATH: "/nonexistent" }).deepCheck).toBe("auto");
    expect(() => parseConfig([], { ...base, PATH: "/nonexistent", LLMHA_DEEP_CHECK: "dcgmi" })).toThrow(/LLMHA_DCGMI .*"dcgmi" is not found or not executable on PATH/);
    expect(() => parseConfig([], { ...base, LLMHA_DEEP_CHECK: "dcgmi", LLMHA_DCGMI: "/nonexistent/dcgmi" })).toThrow(/LLMHA_DCGMI .*not found or not executable, and LLMHA_DEEP_CHECK=dcgmi requires it/);
    const fake = join(__dirname, "..", "..", "lab", "sim", "fake-dcgmi.cjs");
    expect(parseConfig([], { ...base, LLMHA_DEEP_CHECK: "dcgmi", LLMHA_DCGMI: fake }).dcgmi).toBe(fake);
  });

  it("flags win over environment variables", () => {
    expect(parseConfig(["--interval-ms", "250"], { ...base, LLMHA_INTERVAL_MS: "900" }).intervalMs).toBe(250);
  });

  it.each([
    ["LLMHA_INTERVAL_MS", "abc", /LLMHA_INTERVAL_MS \(--interval-ms\): must be a whole number/],
    ["LLMHA_INTERVAL_MS", "5", /between 100 and/],
    ["LLMHA_INFERENCE_KIND", "sglang", /LLMHA_INFERENCE_KIND .*must be one of vllm, tgi, triton, llamacpp, openai/],
    ["LLMHA_INFERENCE_URL", "ftp://x", /LLMHA_INFERENCE_URL .*http\(s\) URL/],
    ["LLMHA_REDIS_URL", "http://x", /LLMHA_REDIS_URL .*redis:\/\/ or rediss:\/\//],
    ["LLMHA_GPU_COUNT", "0", /LLMHA_GPU_COUNT/],
    ["LLMHA_AGENT_CHECK_PORT", "9400", /must differ from LLMHA_HTTP_PORT/],
    ["LLMHA_LEASE_RENEW_MS", "30000", /below LLMHA_LEASE_TTL_MS/],
    ["LLMHA_CLUSTER", "a b", /LLMHA_CLUSTER/],
    ["LLMHA_REPAIR_MODE", "fix", /LLMHA_REPAIR_MODE .*must be one of off, advise, act/],
    ["LLMHA_REPAIR_MODE", "act", /LLMHA_REPAIR_MODE .*act needs LLMHA_ACTUATOR/],
    ["LLMHA_REPAIR_SPARE", "us-east-1a:2", /LLMHA_REPAIR_SPARE.*is not AZ=COUNT/],
    ["LLMHA_DEEP_CHECK", "full", /LLMHA_DEEP_CHECK .*must be one of auto, dcgmi, smoke, off/],
    ["LLMHA_GPU_QUERY", "poll", /LLMHA_GPU_QUERY .*must be one of stream, per-tick, got "poll"/],
    ["LLMHA_DEEP_CHECK_TIMEOUT_MS", "10", /LLMHA_DEEP_CHECK_TIMEOUT_MS .*between 1000 and/],
    ["LLMHA_REPAIR_PREDICTIVE", "yes", /LLMHA_REPAIR_PREDICTIVE .*must be on or off, got "yes"/],
    ["LLMHA_REPAIR_PREDICTIVE_BUDGET", "-1", /LLMHA_REPAIR_PREDICTIVE_BUDGET/],
    ["LLMHA_REPAIR_PREDICTIVE_BUDGET", "two", /LLMHA_REPAIR_PREDICTIVE_BUDGET/],
    ["LLMHA_STANDBY_HEALTHY_BOUND_MS", "500", /LLMHA_STANDBY_HEALTHY_BOUND_MS .*between 1000 and/],
    ["LLMHA_STANDBY_HEALTHY_BOUND_MS", "10m", /LLMHA_STANDBY_HEALTHY_BOUND_MS .*must be a whole number/],
    ["LLMHA_STANDBY_WAKE_BACKOFF_MS", "500", /LLMHA_STANDBY_WAKE_BACKOFF_MS .*between 1000 and/],
    ["LLMHA_STANDBY_WAKE_BACKOFF_MS", "2h", /LLMHA_STANDBY_WAKE_BACKOFF_MS .*must be a whole number/],
    ["LLMHA_REPAIR_SETTLE_MS", "30s", /LLMHA_REPAIR_SETTLE_MS .*must be a whole number/],
    ["LLMHA_REPAIR_WAIT_TIMEOUT_MS", "10", /LLMHA_REPAIR_WAIT_TIMEOUT_MS .*between 1000 and/],
    ["LLMHA_REPAIR_DRAIN_TIMEOUT_MS", "0", /LLMHA_REPAIR_DRAIN_TIMEOUT_MS .*between 1000 and/],
    ["LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS", "999", /LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS .*between 1000 and/],
  ])("%s=%s is refused with a message naming it", (k, v, re) => {
    expect(() => parseConfig([], { ...base, [k]: v })).toThrow(re);
  });

  it("never echoes a Redis URL (it may hold the password)", () => {
    try {
      parseConfig([], { ...base, LLMHA_REDIS_URL: "not a url with s3cret" });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as Error).message).not.toContain("s3cret");
    }
  });

  it("LLMHA_AZ falls back to IMDSv2 and is required without it", async () => {
    expect((await loadConfig([], { LLMHA_NODE_ID: "n" }, async () => "us-east-1b")).az).toBe("us-east-1b");
    await expect(loadConfig([], { LLMHA_NODE_ID: "n" }, async () => null)).rejects.toThrow(/LLMHA_AZ .*is required/);
  });

  it("`llm-ha agent` exits 2 on a bad value, naming the variable", () => {
    const r = runCli(["agent"], { ...base, LLMHA_PROBE_LATENCY_MS: "fast" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("LLMHA_PROBE_LATENCY_MS (--probe-latency-ms): must be a whole number");
    const f = runCli(["agent", "--no-such-flag", "1"], base);
    expect(f.code).toBe(2);
    expect(f.stderr).toMatch(/no-such-flag/);
  });

  it("`llm-ha agent --help` lists every option with its default, grouped by concern, fitting $COLUMNS", () => {
    const r = runCli(["agent", "--help"], {});
    expect(r.code).toBe(0);
    // Descriptions wrap: read them with the line breaks undone.
    const flat = r.stdout.replace(/\n {6}/g, " ");
    for (const s of OPTION_SPECS) {
      expect(r.stdout).toContain(`${flagOf(s.env)} / ${s.env}`);
      expect(flat).toContain(`(default: ${s.defaultText})`);
    }
    expect(helpText()).toBe(r.stdout);
    const titles = OPTION_GROUPS.map((g) => g.title);
    expect(r.stdout.split("\n").filter((l) => titles.includes(l))).toEqual(titles);
    // Each setting in exactly one group.
    expect(OPTION_GROUPS.flatMap((g) => g.keys).sort()).toEqual(OPTION_SPECS.map((s) => s.key).sort());
    const narrow = runCli(["agent", "--help"], { COLUMNS: "80" });
    for (const l of narrow.stdout.split("\n")) expect([...l].length, l).toBeLessThanOrEqual(80);
    expect(r.stdout.indexOf("--standby-az")).toBeGreaterThan(r.stdout.indexOf("Standby AZ and practice wakes"));
  });
});

describe("docs/settings.md", () => {
  it("is the settings page generated from the spec (npx tsx agent/src/config/reference.ts > docs/settings.md)", async () => {
    const page = readFileSync(join(__dirname, "..", "..", "docs", "settings.md"), "utf8");
    expect(page).toBe(settingsPage());
    expect(page).toContain(configReferenceMarkdown());
  });
});
