/**
 * The pack over the existing-cluster stack (`Pulumi.byo.yaml`): clean, with no VPC, EKS cluster or
 * node group of its own in the graph; the rules that need the stack's own cluster stand aside
 * there, and the NodePool rules catch a pool spanning zones, a standby created awake or reset by
 * `pulumi up`, and a pool without the GPU taint.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies, type Violation } from "../../policies/runner";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { settled } from "./fixtures";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON
const NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool";
const pool = (rs: CapturedResource[], name: string) => rs.find((r) => r.type === NODEPOOL && (r.props as O).metadata.name === name)!;

describe("policy pack over the byo stack", () => {
  let rs: CapturedResource[];
  let violations: Violation[];

  beforeAll(async () => {
    rs = await captureStack("byo");
    violations = await runPolicies(policies, rs);
  });

  it("captures no VPC, no EKS cluster and no node group of llm-ha's own, and Karpenter pools in every AZ", () => {
    const types = rs.map((r) => r.type);
    expect(types).not.toContain("aws:ec2/vpc:Vpc");
    expect(types).not.toContain("aws:eks/cluster:Cluster");
    expect(types).not.toContain("aws:eks/nodeGroup:NodeGroup");
    expect(rs.filter((r) => r.type === NODEPOOL)).toHaveLength(4);
  });

  it("has zero violations of any level", () => {
    expect(violations.filter(settled).map((v) => `${v.enforcementLevel} ${v.policy}: ${v.message}`)).toEqual([]);
  });

  it("flags a pool that spans two zones, or labels another AZ than it launches in", async () => {
    const broken = structuredClone(rs);
    const p = pool(broken, "llm-ha-us-east-1a-h100");
    (p.props as O).spec.template.spec.requirements[0].values = ["us-east-1a", "us-east-1b"];
    const q = pool(broken, "llm-ha-us-east-1b-h100");
    (q.props as O).spec.template.spec.requirements[0].values = ["us-east-1c"];
    // Left with pools in us-east-1c only, the stack also loses its second AZ of GPU capacity.
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([
      ["gpu-node-groups-multi-az", undefined],
      ["nodepool-single-az", p.urn],
      ["nodepool-single-az", q.urn],
    ]);
  });

  it("flags a standby pool created awake, or one whose limits pulumi up would reset", async () => {
    const broken = structuredClone(rs);
    const standby = pool(broken, "llm-ha-us-east-1c-h100");
    (standby.props as O).spec.limits["nvidia.com/gpu"] = "8";
    const fallback = pool(broken, "llm-ha-us-east-1c-h100-fallback");
    fallback.opts.ignoreChanges = [];
    const active = pool(broken, "llm-ha-us-east-1a-h100");
    delete (active.props as O).spec.limits;
    const found = mandatory(await runPolicies(policies, broken));
    expect(found.map((v) => [v.policy, v.urn])).toEqual([
      ["nodepool-standby-limits", active.urn],
      ["nodepool-standby-limits", standby.urn],
      ["nodepool-standby-limits", fallback.urn],
    ]);
  });

  it("flags a role's Redis user left out of the stack's user group (by id and by reference), and a Redis rule by CIDR", async () => {
    const broken = structuredClone(rs);
    const user = broken.find((r) => r.type === "aws:elasticache/user:User" && (r.props as O).userName === "llmha-edge")!;
    const group = broken.find((r) => r.type === "aws:elasticache/userGroup:UserGroup")!;
    (group.props as O).userIds = (group.props as O).userIds.filter((id: string) => id !== (user.props as O).userId);
    // Still a member while the group references the user's Output.
    expect(mandatory(await runPolicies(policies, broken))).toEqual([]);
    group.opts.propertyDependencies.userIds = group.opts.propertyDependencies.userIds.filter((u) => u !== user.urn);
    const rule = broken.find((r) => r.type === "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule" && r.name === "redis-from-l1")!;
    delete (rule.props as O).referencedSecurityGroupId;
    (rule.props as O).cidrIpv4 = "10.50.0.0/16";
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn, v.message])).toEqual([
      ["redis-role-users-in-group", user.urn, `ElastiCache user redis-user-llmha-edge (llmha-edge) is in no user group: its clients cannot authenticate. List it in the stack's UserGroup, or associate it with the adopted group (llm-ha:redis.existing.userGroupId).`],
      ["data-ingress-by-security-group", rule.urn, "redis-from-l1 lets 10.50.0.0/16 in on Redis (6379): let in the clients' security groups by reference only (infra/fences.ts)."],
    ]);
  });

  it("flags a pool without the GPU taint", async () => {
    const broken = structuredClone(rs);
    const p = pool(broken, "llm-ha-us-east-1b-h100");
    (p.props as O).spec.template.spec.taints = [];
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([["nodepool-gpu-taint", p.urn]]);
  });

  it("still holds the placeholder apart from inference only by its label: without it, the inference rules apply", async () => {
    const broken = structuredClone(rs);
    const d = broken.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.name === "llm-ha-standby-placeholder")!;
    delete (d.props as O).spec.template.metadata.labels["llm-ha.io/capacity-placeholder"];
    const found = new Set(mandatory(await runPolicies(policies, broken)).filter((v) => v.urn === d.urn).map((v) => v.policy));
    expect([...found].sort()).toEqual(["gpu-deployment-pdb", "gpu-deployment-spread", "inference-one-model", "inference-rollout-handover"]);
  });
});
