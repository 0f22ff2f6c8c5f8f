/**
 * The repair ladder's mode as a stack setting (`llm-ha:repair`): every stack advises by
 * default and the controller's grants stay as without the ladder; `act` is opt-in and wires
 * everything the ladder acts through — the reboot on the stack's own GPU instances (IAM, with
 * the tag conditions), the repair RBAC in the inference namespace, cordon on Nodes, the aws
 * actuator with its IRSA annotation — even on a stack with no standby and no reserved group.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { WORKLOADS_NAMESPACE } from "../../infra/names";
import { REPAIR_SURGE_TAG_KEY } from "../../infra/agent-iam";
import { REPAIR_SURGE_TAG } from "../../agent/src/fleet/actuators/repair-asg";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const controllerEnv = (rs: CapturedResource[]): Record<string, unknown> => {
  const d = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "llm-ha-controller")!.props as O;
  return Object.fromEntries(d.spec.template.spec.containers[0].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
};
const rolePolicy = (rs: CapturedResource[]) => rs.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator");
const statements = (rs: CapturedResource[]): O[] => JSON.parse(String(rolePolicy(rs)!.props.policy)).Statement;
const k8s = (rs: CapturedResource[], kind: string) => rs.filter((r) => r.type === `kubernetes:rbac.authorization.k8s.io/v1:${kind}`).map((r) => r.props as O);
const repairRbac = (rs: CapturedResource[]) => [...k8s(rs, "Role"), ...k8s(rs, "RoleBinding")].filter((o) => o.metadata.name === "llm-ha-controller-repair");
const nodeVerbs = (rs: CapturedResource[]): string[] =>
  k8s(rs, "ClusterRole").find((o) => o.metadata.name === "llm-ha-controller-nodes")!.rules.filter((r: O) => r.resources?.includes("nodes")).flatMap((r: O) => r.verbs);
const controllerSa = (rs: CapturedResource[]) => rs.find((r) => r.type === "kubernetes:core/v1:ServiceAccount" && (r.props as O).metadata.name === "llm-ha-controller")!.props as O;
const act = { "llm-ha:repair": JSON.stringify({ mode: "act" }) };
/** dev without its standby AZ (and what only a standby has): no wake, no reserved group, nothing for an actuator to do. */
const noStandby = { "llm-ha:standbyAz": "", "llm-ha:schedule": "", "llm-ha:practiceWake": "" };

const dir = mkdtempSync(join(tmpdir(), "llmha-repair-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function failure(overrides: Record<string, string>): Promise<pulumi.InputPropertiesError> {
  const err: unknown = await captureStack("dev", overrides).then(() => undefined, (e: unknown) => e);
  expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
  return err as pulumi.InputPropertiesError;
}

describe("llm-ha:repair", () => {
  it("prod by default: the controller advises, with no reboot grant, no repair Role and Nodes read-only", async () => {
    const rs = await captureStack("prod");
    const env = controllerEnv(rs);
    expect(env.LLMHA_REPAIR_MODE).toBe("advise");
    expect(env.LLMHA_REPAIR_SPARE).toBeUndefined();
    expect(env.LLMHA_REPAIR_NAMESPACE).toBeUndefined();
    expect(env.LLMHA_REPAIR_PREDICTIVE_BUDGET).toBeUndefined();
    expect(statements(rs).map((s) => s.Sid)).not.toContain("RebootGpuInstances");
    expect(JSON.stringify(statements(rs))).not.toContain("ec2:RebootInstances");
    expect(repairRbac(rs)).toEqual([]);
    expect(nodeVerbs(rs)).toEqual(["get", "list", "watch"]);
  });

  it("prod with act: the reboot on the stack's own GPU instances, the repair Role in the inference namespace, cordon on Nodes, the settings", async () => {
    const rs = await captureStack("prod", { "llm-ha:repair": JSON.stringify({ mode: "act", spare: { "us-east-1a": 1, "us-east-1c": 0 }, predictiveBudget: 1 }) });
    expect(controllerEnv(rs)).toMatchObject({
      LLMHA_REPAIR_MODE: "act",
      LLMHA_REPAIR_SPARE: "us-east-1a=1,us-east-1c=0",
      LLMHA_REPAIR_PREDICTIVE_BUDGET: "1",
      LLMHA_REPAIR_NAMESPACE: WORKLOADS_NAMESPACE,
      LLMHA_ACTUATOR: "aws",
      LLMHA_AWS_REGION: "us-east-1",
      LLMHA_INVENTORY: "kubernetes",
    });
    expect(statements(rs).find((s) => s.Sid === "RebootGpuInstances")).toEqual({
      Sid: "RebootGpuInstances",
      Effect: "Allow",
      Action: ["ec2:RebootInstances"],
      Resource: "arn:aws:ec2:us-east-1:123456789012:instance/*",
      Condition: {
        StringEquals: { "aws:ResourceTag/Project": "llm-ha", "aws:ResourceTag/Environment": "prod" },
        Null: { "aws:ResourceTag/llm-ha.io/gpu-class": "false" },
      },
    });
    // The standby's grants are still there beside it.
    expect(statements(rs).some((s) => String(s.Sid).startsWith("ResizeStandbyGroup"))).toBe(true);
    const [role, binding] = repairRbac(rs);
    expect(role).toMatchObject({ kind: "Role", metadata: { namespace: WORKLOADS_NAMESPACE } });
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "delete"] },
      { apiGroups: [""], resources: ["pods/eviction"], verbs: ["create"] },
    ]);
    expect(binding).toMatchObject({ kind: "RoleBinding", metadata: { namespace: WORKLOADS_NAMESPACE }, subjects: [{ kind: "ServiceAccount", name: "llm-ha-controller", namespace: "llm-ha-edge" }] });
    expect(nodeVerbs(rs)).toEqual(["get", "list", "watch", "patch"]);
  });

  it("a stack with no standby and no reserved group: advise gets no cloud role at all; act gets the role for the reboot and the replacement alone", async () => {
    const advise = await captureStack("dev", noStandby);
    expect(rolePolicy(advise)).toBeUndefined();
    expect(controllerEnv(advise)).toMatchObject({ LLMHA_REPAIR_MODE: "advise" });
    expect(controllerEnv(advise).LLMHA_ACTUATOR).toBeUndefined();
    expect(controllerSa(advise).metadata.annotations).toBeUndefined();

    const rs = await captureStack("dev", { ...noStandby, ...act });
    // The reboot, and the replacement through the GPU groups: a read, a bounded surge per group, its tag, the termination.
    const st = statements(rs);
    const gpuGroups = rs.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && (r.props as O).amiType === "AL2023_x86_64_NVIDIA").map((r) => r.name);
    expect(st.map((s) => s.Sid)).toEqual(["ReadState", "RebootGpuInstances", "ReadRepairPlacement", ...gpuGroups.map((_, i) => `SurgeForRepair${i}`), "TagRepairSurge", "TerminateForRepair"]);
    expect(st[1].Condition.StringEquals).toEqual({ "aws:ResourceTag/Project": "llm-ha", "aws:ResourceTag/Environment": "dev" });
    const arn = (g: string) => `arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-${g}-asg`;
    const inCluster = { StringEquals: { "autoscaling:ResourceTag/eks:cluster-name": "llm-ha-dev" } };
    expect(st.find((s) => s.Sid === "ReadRepairPlacement")).toEqual({ Sid: "ReadRepairPlacement", Effect: "Allow", Action: ["autoscaling:DescribeAutoScalingInstances"], Resource: "*" });
    expect(st.find((s) => s.Sid === "TerminateForRepair")).toEqual({ Sid: "TerminateForRepair", Effect: "Allow", Action: ["autoscaling:TerminateInstanceInAutoScalingGroup"], Resource: gpuGroups.map(arn), Condition: inCluster });
    expect(st.find((s) => s.Sid === "TagRepairSurge")?.Condition).toEqual({ ...inCluster, "ForAllValues:StringEquals": { "aws:TagKeys": [REPAIR_SURGE_TAG_KEY] } });
    expect(st.find((s) => s.Sid === "SurgeForRepair0")).toMatchObject({ Action: ["autoscaling:UpdateAutoScalingGroup"], Resource: arn(gpuGroups[0]), Condition: { NumericLessThanEquals: { "autoscaling:MaxSize": expect.any(String) } } });
    expect(REPAIR_SURGE_TAG).toBe(REPAIR_SURGE_TAG_KEY);
    const env = controllerEnv(rs);
    expect(env).toMatchObject({ LLMHA_REPAIR_MODE: "act", LLMHA_REPAIR_NAMESPACE: WORKLOADS_NAMESPACE, LLMHA_ACTUATOR: "aws", LLMHA_AZ_IDS: "us-east-1a=use1-az4,us-east-1b=use1-az6" });
    expect(env.LLMHA_STANDBY_ASGS).toBeUndefined();
    expect(env.LLMHA_RESERVED_GROUPS).toBeUndefined();
    const role = rs.find((r) => r.type === "aws:iam/role:Role" && r.name === "agent-role")!;
    expect(controllerSa(rs).metadata.annotations).toEqual({ "eks.amazonaws.com/role-arn": expect.stringContaining("agent-role") });
    expect(String(role.props.description)).toMatch(/reboots and replaces the stack's GPU nodes/);
    expect(repairRbac(rs)).toHaveLength(2);

    // The agent takes what the stack gives its controller (the pod-only values stood in for).
    writeFileSync(join(dir, "password"), "pw\n");
    const plain = Object.fromEntries(Object.entries(env).filter(([, v]) => typeof v === "string")) as Record<string, string>;
    const podOnly = { LLMHA_NODE_ID: "llm-ha-controller-0", LLMHA_REDIS_URL: "rediss://redis:6379", LLMHA_REDIS_PASSWORD_FILE: join(dir, "password"), KUBERNETES_SERVICE_HOST: "10.100.0.1" };
    expect(parseConfig([], { ...plain, ...podOnly })).toMatchObject({ role: "controller", actuator: "aws", repairMode: "act", repairNamespace: WORKLOADS_NAMESPACE, standbyAsgs: null });
  });

  it("off: the controller runs no ladder and gets nothing for one", async () => {
    const rs = await captureStack("dev", { "llm-ha:repair": JSON.stringify({ mode: "off" }) });
    expect(controllerEnv(rs).LLMHA_REPAIR_MODE).toBe("off");
    expect(JSON.stringify(statements(rs))).not.toContain("ec2:RebootInstances");
    expect(repairRbac(rs)).toEqual([]);
  });

  it("names each bad value by its key", async () => {
    const e = await failure({ "llm-ha:repair": JSON.stringify({ mode: "fix", spare: { "us-east-1a": 1.5, "us-east-1b": 1001, "us-east-1z": 1 }, dryRun: true, predictiveBudget: -1 }) });
    expect(e.errors.map((x) => x.propertyPath)).toEqual(["llm-ha:repair.dryRun", "llm-ha:repair.mode", "llm-ha:repair.predictiveBudget", "llm-ha:repair.spare.us-east-1a", "llm-ha:repair.spare.us-east-1b", "llm-ha:repair.spare.us-east-1z"]);
    expect(e.message).toMatch(/-1 must be a whole number from 0 to 1000 \(predictive drains per 24 h\)/);
    expect(e.message).toMatch(/"fix" must be one of advise, act, off/);
    expect(e.message).toMatch(/1\.5 must be a whole number from 0 to 1000/);
    expect(e.message).toMatch(/us-east-1z.*is not an AZ of llm-ha:azs \(us-east-1a, us-east-1b\)/);
    // `pulumi config set llm-ha:repair act` (no --path): the command meant is named.
    expect((await failure({ "llm-ha:repair": "act" })).message).toContain("pulumi config set --path 'llm-ha:repair.mode' act");
    for (const [v, path] of [["act", "llm-ha:repair"], [JSON.stringify({ spare: [1] }), "llm-ha:repair.spare"], [JSON.stringify({ mode: "act", spare: { "us-east-1a": -1 } }), "llm-ha:repair.spare.us-east-1a"]]) {
      expect((await failure({ "llm-ha:repair": v })).errors.map((x) => x.propertyPath)).toEqual([path]);
    }
  });
});
