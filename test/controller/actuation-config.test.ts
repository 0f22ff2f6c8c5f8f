/** The leader's actuator settings: parsed once at start-up, combinations refused with the variable named (exit 2). */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseConfig, resolveAwsRegion } from "../../agent/src/config/load";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const base = { LLMHA_AZ: "us-east-1a", LLMHA_NODE_ID: "n1", LLMHA_REDIS_URL: "redis://127.0.0.1:6379" };
const noImds = async (): Promise<null> => null;

function refused(env: Record<string, string>): string {
  try {
    parseConfig([], { ...base, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message;
  }
  throw new Error("accepted");
}

describe("actuator settings", () => {
  it("default: no standby AZ, no actuator, no zonal shift, 30 min shift expiry, 10 min hold", () => {
    expect(parseConfig([], base)).toMatchObject({
      standbyAz: null, actuator: "none", zonalShift: false, shiftExpiryMs: 1_800_000, standbyHoldMs: 600_000,
      awsRegion: null, standbyAsgs: null, shiftResources: [], azIds: null, localCloudUrl: null,
    });
  });

  it("local needs its endpoint; any actuator needs Redis (only the leader acts) and something to act on", () => {
    expect(refused({ LLMHA_ACTUATOR: "local", LLMHA_STANDBY_AZ: "c" })).toMatch(/^LLMHA_LOCAL_CLOUD_URL \(--local-cloud-url\): is required/);
    expect(() => parseConfig([], { LLMHA_AZ: "a", LLMHA_ACTUATOR: "dry-run", LLMHA_STANDBY_AZ: "c" })).toThrow(/^LLMHA_ACTUATOR .*needs LLMHA_REDIS_URL/);
    expect(refused({ LLMHA_ACTUATOR: "dry-run" })).toMatch(/^LLMHA_STANDBY_AZ .*nothing to do/);
    expect(refused({ LLMHA_ACTUATOR: "cloud" })).toMatch(/^LLMHA_ACTUATOR .*none, dry-run, aws, local/);
    expect(parseConfig(["--actuator", "local", "--standby-az", "az-c", "--local-cloud-url", "http://127.0.0.1:9/"], base)).toMatchObject({
      actuator: "local", standbyAz: "az-c", localCloudUrl: "http://127.0.0.1:9",
    });
  });

  it("aws without standby groups and without shift resources is refused, naming LLMHA_STANDBY_ASGS", () => {
    expect(refused({ LLMHA_ACTUATOR: "aws", LLMHA_STANDBY_AZ: "us-east-1c" })).toMatch(/^LLMHA_STANDBY_ASGS \(--standby-asgs\): LLMHA_ACTUATOR=aws needs/);
    expect(refused({ LLMHA_ACTUATOR: "aws", LLMHA_ZONAL_SHIFT: "true", LLMHA_STANDBY_ASGS: "gpu-c=2", LLMHA_STANDBY_AZ: "us-east-1c" })).toMatch(/^LLMHA_SHIFT_RESOURCES /);
    expect(refused({ LLMHA_ACTUATOR: "aws", LLMHA_STANDBY_ASGS: "gpu-c=2" })).toMatch(/^LLMHA_STANDBY_AZ /);
  });

  it("aws formats are checked with the actuator's own parsers at start-up; the region falls back to AWS_REGION, then the AZ", async () => {
    const env = { ...base, LLMHA_ACTUATOR: "aws", LLMHA_STANDBY_AZ: "us-east-1c", LLMHA_STANDBY_ASGS: "gpu-c=two" };
    await expect(loadConfig([], env, noImds)).rejects.toThrow(/^LLMHA_STANDBY_ASGS .*wake size of gpu-c/);
    const ok = await loadConfig([], { ...env, LLMHA_STANDBY_ASGS: "gpu-c=2" }, noImds);
    expect(ok.awsRegion).toBe("us-east-1");
    expect(resolveAwsRegion({ awsRegion: null, az: "us-east-1a" }, { AWS_REGION: "eu-west-1" })).toBe("eu-west-1");
    expect(() => resolveAwsRegion({ awsRegion: null, az: "az-a" }, {})).toThrow(/^LLMHA_AWS_REGION /);
    await expect(
      loadConfig([], { ...env, LLMHA_STANDBY_ASGS: "gpu-c=2", LLMHA_ZONAL_SHIFT: "1", LLMHA_SHIFT_RESOURCES: "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/gpu-a/0123456789abcdef", LLMHA_AZ_IDS: "us-east-1a=use1-az1" }, noImds),
    ).rejects.toThrow(/^LLMHA_AZ_IDS .*no AZ id for us-east-1c/);
  });

  it("`llm-ha agent` exits 2 on a bad combination", () => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_")));
    const r = spawnSync(process.execPath, ["--import", "tsx", CLI, "agent"], { env: { ...clean, ...base, LLMHA_ACTUATOR: "aws", LLMHA_STANDBY_AZ: "us-east-1c" }, encoding: "utf8", timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/LLMHA_STANDBY_ASGS/);
  });
});
