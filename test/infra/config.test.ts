import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { isCron } from "../../infra/config";
import { captureStack } from "../../infra/capture";
import { parseStackYaml } from "./stack-yaml";

/** Runs dev with overrides and returns the one error it must fail with. */
async function failure(overrides: Record<string, string>): Promise<pulumi.InputPropertiesError> {
  const err: unknown = await captureStack("dev", overrides).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
  return err as pulumi.InputPropertiesError;
}

const paths = (e: pulumi.InputPropertiesError) => e.errors.map((x) => x.propertyPath);

describe("stack configuration", () => {
  it("refuses the zonal shift keys, saying why (single-AZ NLBs: ARC shifts nothing), and grants no shift", async () => {
    const nlb = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1a/0123456789abcdef";
    const dns = { zoneId: "ZDEVTESTZONE1", serviceName: "infer.dev.llm-ha.net" };
    const bad = await failure({ "llm-ha:dns": JSON.stringify({ ...dns, zonalShift: true, zonalShiftResources: [nlb] }) });
    expect(paths(bad)).toEqual(["llm-ha:dns.zonalShift", "llm-ha:dns.zonalShiftResources"]);
    expect(bad.message).toContain("ARC zonal shift ignores a single-AZ load balancer");
    const rs = await captureStack("dev", { "llm-ha:dns": JSON.stringify(dns) });
    expect(JSON.stringify(rs)).not.toMatch(/StartZonalShift|zonal_shift\.config|LLMHA_ZONAL_SHIFT|LLMHA_SHIFT_RESOURCES/);
  });

  it("names an unknown GPU class", async () => {
    const e = await failure({ "llm-ha:gpuClasses": JSON.stringify([{ name: "v100", desiredPerAz: 1 }]) });
    expect(paths(e)).toEqual(["llm-ha:gpuClasses[0].name"]);
    expect(e.message).toMatch(/unknown GPU class "v100"; known: a100, h100/);
  });

  it("refuses a single AZ, and a standby AZ outside the list", async () => {
    const e = await failure({ "llm-ha:azs": JSON.stringify(["us-east-1a"]) });
    // Two brokers in one AZ cannot hold replication factor 3 either.
    expect(paths(e)).toEqual(["llm-ha:azs", "llm-ha:standbyAz", "llm-ha:kafka.brokersPerAz"]);
    expect(e.message).toMatch(/at least 2 availability zones/);
  });

  it("refuses a standby AZ not in llm-ha:azs", async () => {
    const e = await failure({ "llm-ha:standbyAz": "us-east-1z" });
    expect(paths(e)).toEqual(["llm-ha:standbyAz"]);
  });

  it("refuses a malformed cron and an unknown time zone", async () => {
    const e = await failure({ "llm-ha:schedule": JSON.stringify({ timeZone: "Mars/Olympus", scaleDown: "every night", scaleUp: "0 7 * * 1-5" }) });
    expect(paths(e)).toEqual(["llm-ha:schedule.timeZone", "llm-ha:schedule.scaleDown"]);
  });

  it("refuses a TTL over 30 s and a failure threshold over 2", async () => {
    const e = await failure({ "llm-ha:dns": JSON.stringify({ zoneId: "ZDEVTESTZONE1", serviceName: "infer.llm-ha.net", ttl: 60, failureThreshold: 3 }) });
    expect(paths(e)).toEqual(["llm-ha:dns.ttl", "llm-ha:dns.failureThreshold"]);
  });

  it("refuses an unknown llm-ha:charts key (naming the near one) and an empty archive path", async () => {
    const typo = await failure({ "llm-ha:charts": JSON.stringify({ lbControlerArchive: "/srv/charts/aws-load-balancer-controller-3.5.0.tgz" }) });
    expect(paths(typo)).toEqual(["llm-ha:charts.lbControlerArchive"]);
    expect(typo.message).toContain("llm-ha:charts.lbControlerArchive: is not a chart setting (did you mean lbControllerArchive?); known: lbControllerArchive");
    const empty = await failure({ "llm-ha:charts": JSON.stringify({ lbControllerArchive: "" }) });
    expect(empty.message).toContain("llm-ha:charts.lbControllerArchive: must be the path of aws-load-balancer-controller-3.5.0.tgz on this runner");
  });

  it("reports every bad key at once in one error", async () => {
    const e = await failure({
      "llm-ha:azs": JSON.stringify(["us-east-1a"]),
      "llm-ha:gpuClasses": JSON.stringify([{ name: "t4" }]),
      "llm-ha:dns": JSON.stringify({ zoneId: "ZDEVTESTZONE1", serviceName: "infer.llm-ha.net", ttl: 300 }),
      "llm-ha:schedule": JSON.stringify({ timeZone: "UTC", scaleDown: "0 25 * * *", scaleUp: "0 7 * *" }),
      "llm-ha:redisRolePasswords": "",
    });
    const keys = ["llm-ha:azs", "llm-ha:standbyAz", "llm-ha:gpuClasses[0].name", "llm-ha:dns.ttl", "llm-ha:redisRolePasswords", "llm-ha:schedule.scaleDown", "llm-ha:schedule.scaleUp", "llm-ha:kafka.brokersPerAz"];
    expect(new Set(paths(e))).toEqual(new Set(keys));
    for (const k of keys) expect(e.message).toContain(k);
  });

  it("asks for every Redis role's password, 16-128 characters, and no other key; names the command", async () => {
    const pw = (n: number) => "p".repeat(n);
    const e = await failure({ "llm-ha:redisRolePasswords": JSON.stringify({ "llmha-agent": pw(32), "llmha-controller": pw(8), "llmha-admin": pw(32) }) });
    const keys = paths(e).filter((k) => k.startsWith("llm-ha:redisRolePasswords"));
    expect(keys).toEqual(expect.arrayContaining(["llm-ha:redisRolePasswords.llmha-controller", "llm-ha:redisRolePasswords.llmha-edge", "llm-ha:redisRolePasswords.llmha-admin"]));
    expect(keys).not.toContain("llm-ha:redisRolePasswords.llmha-agent");
    expect(e.message).toContain("llm-ha:redisRolePasswords.llmha-controller: must be 16-128 characters");
    expect(e.message).toContain("llm-ha:redisRolePasswords.llmha-edge: is required (pulumi config set --secret --path 'llm-ha:redisRolePasswords.llmha-edge'");
    const none = await failure({ "llm-ha:redisRolePasswords": "" });
    expect(none.message).toMatch(/llm-ha:redisRolePasswords: is required: one password per Redis role \(for r in llmha-agent /);
  });

  it("accepts the cron forms Auto Scaling takes and rejects the rest", () => {
    for (const ok of ["0 20 * * 1-5", "*/15 * * * *", "30 6 * * MON-FRI", "0 0 1,15 * *"]) expect(isCron(ok), ok).toBe(true);
    for (const bad of ["", "0 20 * *", "60 * * * *", "0 24 * * *", "every night", "0 20 * * 1-5 2025"]) expect(isCron(bad), bad).toBe(false);
  });
});

describe("stack file reader", () => {
  it("reads nested maps, lists of maps, quoted strings and comments", () => {
    const doc = parseStackYaml(
      ["# c", "config:", "  a:b: x  # trailing", "  list:", "    - name: a100", "      n: 2", "    - h100", '  cron: "0 20 * * 1-5"', "  flag: true", "  flow: [a, 1]"].join("\n"),
    );
    expect(doc).toEqual({ config: { "a:b": "x", list: [{ name: "a100", n: 2 }, "h100"], cron: "0 20 * * 1-5", flag: true, flow: ["a", 1] } });
  });
});
