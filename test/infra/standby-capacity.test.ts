/**
 * The standby AZ's capacity settings under Pulumi's mocks: fallback groups,
 * partial redundancy, practice wakes and the waiver, each bad value named by its key.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { stackFailure } from "./stack-failure";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { standbySize } from "../../infra/config";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const failure = stackFailure;
const problems = (e: pulumi.InputPropertiesError) => e.errors.map((x) => `${x.propertyPath}: ${x.reason}`);

const group = (rs: CapturedResource[], name: string) => rs.find((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && r.name === name)?.props as O | undefined;
/** The controller's settings (the controller Deployment reads them, not the GPU-node agents, which hold no cloud role). */
const agentEnv = (rs: CapturedResource[]): Record<string, unknown> => {
  const ds = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "llm-ha-controller")!.props as O;
  return Object.fromEntries(ds.spec.template.spec.containers[0].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
};
const wakePolicy = (rs: CapturedResource[]): string[] =>
  JSON.parse(String(rs.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator")!.props.policy)).Statement.find((s: O) => s.Sid === "HoldStandbySchedule").Resource;

describe("standby sizing", () => {
  it("rounds up, keeps a max of at least one node", () => {
    expect(standbySize({ desiredPerAz: 4, maxPerAz: 8 }, 0.5)).toEqual({ desired: 2, max: 4 });
    expect(standbySize({ desiredPerAz: 3, maxPerAz: 5 }, 0.5)).toEqual({ desired: 2, max: 3 });
    expect(standbySize({ desiredPerAz: 2, maxPerAz: 4 }, 1)).toEqual({ desired: 2, max: 4 });
    expect(standbySize({ desiredPerAz: 0, maxPerAz: 1 }, 0.3)).toEqual({ desired: 0, max: 1 });
  });
});

describe("standby capacity in the stack", () => {
  it("partial redundancy: prod's standby at half an active AZ — groups, schedule, inference replicas, wake sizes and the agents' setting", async () => {
    const rs = await captureStack("prod", { "llm-ha:standbyCapacityRatio": "0.5" });
    // a100: 4 per AZ (max 8) → 2 (max 4); h100: 2 (max 4) → 1 (max 2); the active AZs keep theirs.
    // Scarce groups without a reservation are created at 0 (EC2 may not have them at creation):
    // the sizes are the maxima here, the running ones in the schedule below and in the gpuScaleUp output.
    expect(group(rs, "gpu-us-east-1c-a100")?.scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: 4 });
    expect(group(rs, "gpu-us-east-1c-h100")?.scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: 2 });
    expect(group(rs, "gpu-us-east-1c-h100-fallback")?.scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: 2 });
    expect(group(rs, "gpu-us-east-1a-a100")?.scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: 8 });
    const ups = rs.filter((r) => r.type === "aws:autoscaling/schedule:Schedule" && r.name.endsWith("-up")).map((r) => [r.name, (r.props as O).desiredCapacity, (r.props as O).maxSize])
      .sort(([a], [b]) => String(a).localeCompare(String(b)));
    expect(ups).toEqual([
      ["standby-us-east-1c-a100-up", 2, 4],
      ["standby-us-east-1c-h100-up", 1, 2],
    ]);
    const replicas = rs
      .filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "inference")
      .map((r) => [(r.props as O).metadata.name, (r.props as O).spec.replicas]);
    expect(replicas.filter(([n]) => String(n).includes("us-east-1c"))).toEqual([
      [expect.stringContaining("a100"), 2],
      [expect.stringContaining("h100"), 1],
    ]);
    expect(replicas.filter(([n]) => String(n).includes("us-east-1a")).map(([, r]) => r)).toEqual([4, 2]);
    expect(agentEnv(rs)).toMatchObject({
      LLMHA_STANDBY_ASGS: "eks-gpu-us-east-1c-a100-asg=2,eks-gpu-us-east-1c-h100-asg=1",
      LLMHA_STANDBY_FALLBACK: "eks-gpu-us-east-1c-h100-fallback-asg=1",
      LLMHA_STANDBY_CAPACITY_PERCENT: "50",
    });
  });

  it("a fallback type named per class replaces the default; [] leaves the class without a group and the role without its ASG", async () => {
    const rs = await captureStack("prod", { "llm-ha:standbyFallback": JSON.stringify({ a100: [], h100: ["p5en.48xlarge", "p5e.48xlarge"] }) });
    expect(group(rs, "gpu-us-east-1c-a100-fallback")).toBeUndefined();
    expect(group(rs, "gpu-us-east-1c-h100-fallback")?.instanceTypes).toEqual(["p5en.48xlarge", "p5e.48xlarge"]);
    expect(wakePolicy(rs).map((a) => a.split("/").pop())).toEqual(["eks-gpu-us-east-1c-a100-asg", "eks-gpu-us-east-1c-h100-asg", "eks-gpu-us-east-1c-h100-fallback-asg"]);
    const off = await captureStack("dev", { "llm-ha:standbyFallback": JSON.stringify({ a100: [] }) });
    expect(wakePolicy(off).map((a) => a.split("/").pop())).toEqual(["eks-gpu-us-east-1b-a100-asg"]);
    expect(agentEnv(off).LLMHA_STANDBY_FALLBACK).toBeUndefined();
  });

  it("practice wakes: the stack's own cron, zone and budget reach the agents; false turns them off", async () => {
    const rs = await captureStack("dev", { "llm-ha:practiceWake": JSON.stringify({ cron: "30 3 * * 2", timeZone: "UTC", budgetMinutes: 45 }) });
    expect(agentEnv(rs)).toMatchObject({ LLMHA_PRACTICE_WAKE: "30 3 * * 2", LLMHA_PRACTICE_WAKE_TZ: "UTC", LLMHA_PRACTICE_WAKE_BUDGET_MS: "2700000" });
    const off = agentEnv(await captureStack("dev", { "llm-ha:practiceWake": "false" }));
    expect(off.LLMHA_PRACTICE_WAKE).toBeUndefined();
    expect(off.LLMHA_PRACTICE_WAKE_TZ).toBeUndefined();
  });

  it("refuses bad values, naming each key", async () => {
    const e = await failure({
      "llm-ha:standbyCapacityRatio": "0",
      "llm-ha:standbyFallback": JSON.stringify({ a100: ["p4d.24xlarge"], h200: ["p5e.48xlarge"] }),
      "llm-ha:standbyCapacityWaiver": "no",
      "llm-ha:practiceWake": JSON.stringify({ cron: "0 25 * * *", timeZone: "Mars/Olympus", budgetMinutes: 0, when: "sunday" }),
    });
    expect(problems(e)).toEqual([
      'llm-ha:standbyCapacityRatio: "0" must be a number from 0.01 to 1: the standby\'s size relative to an active AZ (0.5 = half)',
      "llm-ha:standbyFallback.h200: is not a GPU class of llm-ha:gpuClasses (a100)",
      "llm-ha:standbyFallback.a100: p4d.24xlarge is already an instance type of the class's own groups: a fallback needs another type",
      "llm-ha:standbyCapacityWaiver: must say why the standby needs no capacity fallback, 10 to 256 characters",
      "llm-ha:practiceWake.when: unknown setting; known: cron, timeZone, budgetMinutes",
      'llm-ha:practiceWake.cron: "0 25 * * *" is not a 5-field cron expression: hour 25 is out of range 0-23',
      'llm-ha:practiceWake.timeZone: "Mars/Olympus" is not an IANA time zone',
      "llm-ha:practiceWake.budgetMinutes: must be an integer from 1 to 1440",
    ]);
  });

  it("refuses standby settings without a standby AZ, and makes none of them", async () => {
    const noStandby = { "llm-ha:standbyAz": "", "llm-ha:schedule": "", "llm-ha:practiceWake": "" };
    const e = await failure({ ...noStandby, "llm-ha:standbyCapacityRatio": "0.5", "llm-ha:standbyFallback": JSON.stringify({ a100: ["p4de.24xlarge"] }), "llm-ha:practiceWake": "{}" });
    expect(problems(e)).toEqual([
      "llm-ha:standbyCapacityRatio: needs llm-ha:standbyAz: it is about the standby AZ",
      "llm-ha:standbyFallback: needs llm-ha:standbyAz: it is about the standby AZ",
      "llm-ha:practiceWake: needs llm-ha:standbyAz: it is about the standby AZ",
    ]);
    // Without a standby AZ nothing of it is made: no fallback group, no practice.
    const rs = await captureStack("dev", noStandby);
    expect(rs.some((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && r.name.endsWith("-fallback"))).toBe(false);
  });
});
