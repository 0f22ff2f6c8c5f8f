/**
 * The existing-cluster stack (`Pulumi.byo.yaml`, "bring your own cluster"): the program reads the
 * cluster (issuer, VPC, subnets per AZ) through invokes the mocks answer, creates no VPC, no
 * cluster and no node groups, and puts the GPU capacity in Karpenter NodePools per AZ and class,
 * or in the operator's node groups adopted by name. The Karpenter objects are validated against
 * Karpenter v1's schema (`@kubernetes-models/karpenter`).
 */
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../../agent/src/config/load";
import { captureStack, captureStackGraph, MOCK_EXISTING, type CapturedResource } from "../../infra/capture";
import { stackFailureLines } from "./stack-failure";
import { testTempDir } from "../support/temp-dir";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const ofType = (rs: CapturedResource[], t: string) => rs.filter((r) => r.type === t);
const controllerEnv = (rs: CapturedResource[]): Record<string, unknown> => {
  const d = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "llm-ha-controller")!.props as O;
  return Object.fromEntries(d.spec.template.spec.containers[0].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
};
const byName = (rs: CapturedResource[], type: string, name: string) => rs.find((r) => r.type === type && (r.props as O).metadata?.name === name);
const NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool";
const NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass";

const failure = (overrides: Record<string, string>): Promise<string[]> => stackFailureLines(overrides, "byo");

describe("byo stack, Karpenter", () => {
  let rs: CapturedResource[];
  let invokes: { token: string; args: Record<string, unknown> }[];
  beforeAll(async () => {
    ({ resources: rs, invokes } = await captureStackGraph("byo"));
  });

  it("creates no VPC, no EKS cluster, no node group and no load balancer controller", () => {
    expect(rs.length).toBeGreaterThan(100);
    const types = new Set(rs.map((r) => r.type));
    for (const t of ["aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway", "aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:eks/addon:Addon", "aws:iam/openIdConnectProvider:OpenIdConnectProvider", "kubernetes:helm.sh/v3:Release", "aws:autoscaling/schedule:Schedule"]) {
      expect(types.has(t), t).toBe(false);
    }
    // The runtime is all there: both namespaces, agents, the controller, L1 per AZ, DNS, Redis, MSK.
    for (const t of ["kubernetes:core/v1:Namespace", "kubernetes:apps/v1:DaemonSet", "aws:route53/record:Record", "aws:elasticache/replicationGroup:ReplicationGroup", "aws:msk/cluster:Cluster"]) expect(types.has(t), t).toBe(true);
    // No device plugin of llm-ha's: the existing cluster's runs (preflight checks it).
    expect(ofType(rs, "kubernetes:apps/v1:DaemonSet").map((r) => (r.props as O).metadata.name)).not.toContain("nvidia-device-plugin");
  });

  it("reads the existing cluster, its issuer's OIDC provider, its VPC and each AZ's subnets by invoke", () => {
    const tokens = invokes.map((i) => i.token);
    expect(tokens).toContain("aws:eks/getCluster:getCluster");
    expect(tokens).toContain("aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider");
    expect(invokes.find((i) => i.token === "aws:eks/getCluster:getCluster")!.args.name).toBe("ai-platform");
    const subnetQueries = invokes.filter((i) => i.token === "aws:ec2/getSubnets:getSubnets");
    expect(subnetQueries).toHaveLength(6);
    // Each AZ's NLB in the discovered public subnet of its AZ.
    const nlb = byName(rs, "kubernetes:core/v1:Service", "l1-proxy-us-east-1b") ?? ofType(rs, "kubernetes:core/v1:Service").find((r) => r.name === "app-l1-us-east-1b-nlb")!;
    expect(JSON.stringify(nlb.props)).toContain(MOCK_EXISTING.subnet("us-east-1b", "public"));
    // Redis and MSK in the cluster's VPC, one private subnet per AZ.
    const redisSubnets = ofType(rs, "aws:elasticache/subnetGroup:SubnetGroup")[0].props.subnetIds;
    expect(redisSubnets).toEqual(["us-east-1a", "us-east-1b", "us-east-1c"].map((az) => MOCK_EXISTING.subnet(az, "private")));
    for (const sg of ofType(rs, "aws:ec2/securityGroup:SecurityGroup")) expect(sg.props.vpcId, sg.name).toBe(MOCK_EXISTING.vpcId);
    // IRSA against the existing issuer: the fallback role trusts the cluster's provider.
    const trust = JSON.stringify(ofType(rs, "aws:iam/role:Role").map((r) => r.props.assumeRolePolicy));
    expect(trust).toContain("oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXISTINGAIPLATFORM");
  });

  it("gives each AZ and class a NodePool pinned to its AZ; the standby and its fallback asleep, their limits left to the leader", () => {
    const pools = ofType(rs, NODEPOOL);
    expect(pools.map((p) => (p.props as O).metadata.name).sort()).toEqual(["llm-ha-us-east-1a-h100", "llm-ha-us-east-1b-h100", "llm-ha-us-east-1c-h100", "llm-ha-us-east-1c-h100-fallback"]);
    for (const p of pools) {
      const o = p.props as O;
      const az = o.spec.template.metadata.labels["llm-ha.io/az"];
      expect(o.spec.template.spec.requirements.find((r: O) => r.key === "topology.kubernetes.io/zone")).toEqual({ key: "topology.kubernetes.io/zone", operator: "In", values: [az] });
      expect(o.spec.template.spec.taints).toEqual([{ key: "nvidia.com/gpu", value: "true", effect: "NoSchedule" }]);
      const role = o.spec.template.metadata.labels["llm-ha.io/role"];
      if (role === "active") {
        expect(o.spec.limits["nvidia.com/gpu"]).toBe("16");
        expect(p.opts.ignoreChanges).toEqual([]);
      } else {
        expect(o.spec.limits["nvidia.com/gpu"]).toBe("0");
        expect(p.opts.ignoreChanges).toEqual(["spec.limits"]);
        expect(o.spec.template.metadata.labels["llm-ha.io/az-role"]).toBe("standby");
      }
    }
    const fallback = byName(rs, NODEPOOL, "llm-ha-us-east-1c-h100-fallback")!.props as O;
    expect(fallback.spec.template.spec.requirements.find((r: O) => r.key === "node.kubernetes.io/instance-type").values).toEqual(["p5e.48xlarge"]);
  });

  it("validates every NodePool and EC2NodeClass against Karpenter v1's schema", async () => {
    const { NodePool } = await import("@kubernetes-models/karpenter/karpenter.sh/v1");
    const { EC2NodeClass } = await import("@kubernetes-models/karpenter/karpenter.k8s.aws/v1");
    const pools = ofType(rs, NODEPOOL);
    const classes = ofType(rs, NODECLASS);
    expect(pools.length).toBe(4);
    expect(classes.length).toBe(1);
    for (const p of pools) expect(() => new NodePool(p.props as never).validate(), p.name).not.toThrow();
    for (const c of classes) {
      // The mocks name a security group `<logical name>-id`; AWS names it sg-…, which the schema checks.
      const o = structuredClone(c.props as O);
      o.spec.securityGroupSelectorTerms = o.spec.securityGroupSelectorTerms.map((t: O) => ({ id: String(t.id).endsWith("-id") ? "sg-0123456789abcdef0" : t.id }));
      expect(() => new EC2NodeClass(o as never).validate(), c.name).not.toThrow();
    }
    // The schema is strict enough to fail: an operator Karpenter does not have is refused.
    const bad = structuredClone(pools[0].props as O);
    bad.spec.template.spec.requirements[0].operator = "Within";
    expect(() => new NodePool(bad as never).validate()).toThrow(/operator/);
  });

  it("puts the created EC2NodeClass in the discovered private subnets behind the GPU nodes' fence, IMDSv2 one hop", () => {
    const c = ofType(rs, NODECLASS)[0].props as O;
    expect(c.spec.subnetSelectorTerms).toEqual(["us-east-1a", "us-east-1b", "us-east-1c"].map((az) => ({ id: MOCK_EXISTING.subnet(az, "private") })));
    const fence = ofType(rs, "aws:ec2/securityGroup:SecurityGroup").find((r) => r.name === "fence-gpu-nodes");
    expect(c.spec.securityGroupSelectorTerms).toEqual([{ id: `${fence?.name ?? "fence-gpu-nodes"}-id` }]);
    expect(c.spec.metadataOptions).toMatchObject({ httpTokens: "required", httpPutResponseHopLimit: 1 });
    expect(c.spec.amiSelectorTerms).toEqual([{ alias: "al2023@v20251117" }]);
    // Its node role joins through an EC2_LINUX access entry.
    expect(ofType(rs, "aws:eks/accessEntry:AccessEntry").map((e) => e.props.type)).toEqual(["EC2_LINUX"]);
  });

  it("sets the controller's Karpenter engine per the contract", () => {
    const env = controllerEnv(rs);
    expect(env.LLMHA_CAPACITY_ENGINE).toBe("karpenter");
    expect(env.LLMHA_STANDBY_AZ).toBe("us-east-1c");
    expect(env.LLMHA_STANDBY_NODEPOOLS).toBe("llm-ha-us-east-1c-h100=8,llm-ha-us-east-1c-h100-fallback=8");
    expect(env.LLMHA_STANDBY_PLACEHOLDER).toBe("llm-ha/llm-ha-standby-placeholder=1");
    expect(env.LLMHA_STANDBY_SCHEDULE).toBe("0 21 * * 1-5;0 6 * * 1-5;0 12 * * 6");
    expect(env.LLMHA_STANDBY_SCHEDULE_TZ).toBe("America/New_York");
    expect(env.LLMHA_STANDBY_ASGS).toBeUndefined();
    expect(env.LLMHA_IDENTITY_ISSUER).toBe(MOCK_EXISTING.issuer("ai-platform"));
  });

  it("the controller's Karpenter settings pass the agent's own start-up checks (the two halves of the contract agree)", () => {
    const env = controllerEnv(rs);
    const dir = testTempDir("llmha-byo-");
    writeFileSync(join(dir, "password"), "pw\n");
    const plain = Object.fromEntries(Object.entries(env).filter(([, v]) => typeof v === "string")) as Record<string, string>;
    const podOnly = { LLMHA_NODE_ID: "llm-ha-controller-0", LLMHA_REDIS_URL: "rediss://redis:6379", LLMHA_REDIS_PASSWORD_FILE: join(dir, "password"), KUBERNETES_SERVICE_HOST: "10.100.0.1" };
    expect(parseConfig([], { ...plain, ...podOnly })).toMatchObject({ role: "controller", capacityEngine: "karpenter", standbyAz: "us-east-1c", standbyAsgs: null, standbyNodepools: "llm-ha-us-east-1c-h100=8,llm-ha-us-east-1c-h100-fallback=8" });
  });

  it("grants the controller the standby pools by name, NodeClaims, and the placeholder's scale only", () => {
    const cr = byName(rs, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "llm-ha-controller-karpenter")!.props as O;
    expect(cr.rules).toEqual([
      { apiGroups: ["karpenter.sh"], resources: ["nodepools"], resourceNames: ["llm-ha-us-east-1c-h100", "llm-ha-us-east-1c-h100-fallback"], verbs: ["get", "patch"] },
      { apiGroups: ["karpenter.sh"], resources: ["nodepools"], verbs: ["list"] },
      { apiGroups: ["karpenter.sh"], resources: ["nodeclaims"], verbs: ["get", "list", "delete"] },
    ]);
    const role = byName(rs, "kubernetes:rbac.authorization.k8s.io/v1:Role", "llm-ha-controller-placeholder")!.props as O;
    expect(role.metadata.namespace).toBe("llm-ha");
    expect(role.rules).toEqual([{ apiGroups: ["apps"], resources: ["deployments/scale"], resourceNames: ["llm-ha-standby-placeholder"], verbs: ["get", "patch"] }]);
    const binding = byName(rs, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "llm-ha-controller-karpenter")!.props as O;
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "llm-ha-controller", namespace: "llm-ha-edge" }]);
  });

  it("creates the placeholder at zero in the standby AZ, below every inference pod, its replicas left to the leader", () => {
    const d = byName(rs, "kubernetes:apps/v1:Deployment", "llm-ha-standby-placeholder")!;
    const o = d.props as O;
    expect(o.spec.replicas).toBe(0);
    expect(d.opts.ignoreChanges).toEqual(["spec.replicas"]);
    expect(o.spec.template.spec.nodeSelector).toEqual({ "topology.kubernetes.io/zone": "us-east-1c" });
    expect(o.spec.template.spec.tolerations).toEqual([{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }]);
    expect(o.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]).toBe("8");
    const pc = byName(rs, "kubernetes:scheduling.k8s.io/v1:PriorityClass", "llm-ha-standby-placeholder")!.props as O;
    expect(pc.value).toBeLessThan(0);
    expect(pc.preemptionPolicy).toBe("Never");
  });
});

describe("byo stack, adopted node groups", () => {
  const nodeGroups = JSON.stringify({
    engine: "nodeGroups",
    nodeGroups: { "us-east-1a": { h100: "gpu-a" }, "us-east-1b": { h100: "gpu-b" }, "us-east-1c": { h100: "gpu-c" }, fallback: { h100: "gpu-c-p5e" } },
  });

  it("reads each group's auto scaling group and hands them to the controller and the schedule, creating no NodePool", async () => {
    const { resources, invokes } = await captureStackGraph("byo", { "llm-ha:capacity": nodeGroups });
    expect(invokes.filter((i) => i.token === "aws:eks/getNodeGroup:getNodeGroup").map((i) => i.args.nodeGroupName)).toEqual(["gpu-a", "gpu-b", "gpu-c", "gpu-c-p5e"]);
    expect(ofType(resources, NODEPOOL)).toEqual([]);
    expect(ofType(resources, "aws:eks/nodeGroup:NodeGroup")).toEqual([]);
    const env = controllerEnv(resources);
    expect(env.LLMHA_CAPACITY_ENGINE).toBeUndefined();
    expect(env.LLMHA_STANDBY_ASGS).toBe("eks-gpu-c-asg=1");
    expect(env.LLMHA_STANDBY_FALLBACK).toBe("eks-gpu-c-p5e-asg=1");
    expect(ofType(resources, "aws:autoscaling/schedule:Schedule").map((s) => s.props.autoscalingGroupName)).toContain("eks-gpu-c-asg");
  });

  it("refuses a group list that misses an AZ or names a class the stack does not run", async () => {
    const bad = JSON.stringify({ engine: "nodeGroups", nodeGroups: { "us-east-1a": { h100: "gpu-a", a100: "x" }, "us-east-1b": { h100: "gpu-b" } } });
    const p = await failure({ "llm-ha:capacity": bad });
    expect(p).toContain("llm-ha:capacity.nodeGroups.us-east-1c: is missing: every AZ of llm-ha:azs needs its node group per GPU class");
    expect(p).toContain("llm-ha:capacity.nodeGroups.us-east-1a.a100: a100 is not one of llm-ha:gpuClasses");
  });
});

describe("byo settings", () => {
  it("refuses the own-cluster settings beside llm-ha:existingCluster, naming why", async () => {
    const p = await failure({ "llm-ha:network": JSON.stringify({ cidr: "10.0.0.0/16" }), "llm-ha:apiEndpoint": JSON.stringify({ access: "public", publicAccessCidrs: ["198.51.100.0/24"] }) });
    expect(p.some((x) => x.startsWith("llm-ha:network: does not apply with llm-ha:existingCluster"))).toBe(true);
    expect(p.some((x) => x.startsWith("llm-ha:apiEndpoint: does not apply with llm-ha:existingCluster"))).toBe(true);
  });

  it("requires llm-ha:capacity on an existing cluster and refuses it without one", async () => {
    expect(await failure({ "llm-ha:capacity": "" })).toContain(
      "llm-ha:capacity: is required with llm-ha:existingCluster: engine: karpenter (NodePools per AZ) or engine: nodeGroups (your managed node groups, by name)",
    );
    const own = await captureStack("dev", { "llm-ha:capacity": JSON.stringify({ engine: "karpenter" }) }).then(() => [], (e: pulumi.InputPropertiesError) => e.errors.map((x) => x.propertyPath));
    expect(own).toEqual(["llm-ha:capacity"]);
  });

  it("checks the given subnets and names of an existing cluster", async () => {
    const p = await failure({
      "llm-ha:existingCluster": JSON.stringify({ name: "ai platform", vpcId: "vpc-x", subnets: { "us-east-1a": { private: ["subnet-0123456789abcdef0"], public: "nope" } } }),
    });
    expect(p).toEqual(expect.arrayContaining([
      'llm-ha:existingCluster.name: "ai platform" is not an EKS cluster name (aws eks list-clusters)',
      "llm-ha:existingCluster.vpcId: must look like vpc-0123456789abcdef0",
      "llm-ha:existingCluster.subnets.us-east-1b: is missing: give every AZ of llm-ha:azs its subnets, or leave subnets out to discover them",
      "llm-ha:existingCluster.subnets.us-east-1a.public: must be the subnet id (subnet-…) of the AZ's public subnet, where its NLB goes",
    ]));
  });

  it("uses the given subnets instead of discovering them", async () => {
    const subnets = Object.fromEntries(["a", "b", "c"].map((l, i) => [`us-east-1${l}`, { private: [`subnet-0aa${i}0000000000000`], public: `subnet-0bb${i}0000000000000` }]));
    const { resources, invokes } = await captureStackGraph("byo", { "llm-ha:existingCluster": JSON.stringify({ name: "ai-platform", subnets }) });
    expect(invokes.filter((i) => i.token === "aws:ec2/getSubnets:getSubnets")).toEqual([]);
    expect(ofType(resources, NODECLASS)[0].props.spec).toMatchObject({ subnetSelectorTerms: [{ id: "subnet-0aa00000000000000" }, { id: "subnet-0aa10000000000000" }, { id: "subnet-0aa20000000000000" }] });
  });
});

describe("byo stack, Karpenter with capacity reservations", () => {
  it("selects each class's reservations in its EC2NodeClass and lets the reserved AZ's pool launch into them first", async () => {
    const classes = JSON.stringify([
      { name: "h100", desiredPerAz: 1, maxPerAz: 2, capacityReservations: { "us-east-1a": "cr-0123456789abcdef0" } },
      { name: "a100", desiredPerAz: 1, maxPerAz: 1, capacityType: "CAPACITY_BLOCK", capacityReservations: { "us-east-1a": "cr-0aaaaaaaaaaaaaaa1", "us-east-1b": "cr-0aaaaaaaaaaaaaaa2", "us-east-1c": "cr-0aaaaaaaaaaaaaaa3" } },
    ]);
    const rs = await captureStack("byo", { "llm-ha:gpuClasses": classes, "llm-ha:standbyFallback": JSON.stringify({ h100: [], a100: [] }), "llm-ha:standbyCapacityWaiver": "reserved capacity in every AZ" });
    const { EC2NodeClass } = await import("@kubernetes-models/karpenter/karpenter.k8s.aws/v1");
    const { NodePool } = await import("@kubernetes-models/karpenter/karpenter.sh/v1");
    const classOf = (n: string) => byName(rs, NODECLASS, n)!.props as O;
    expect(classOf("llm-ha-h100").spec.capacityReservationSelectorTerms).toEqual([{ id: "cr-0123456789abcdef0" }]);
    expect(classOf("llm-ha-a100").spec.capacityReservationSelectorTerms).toHaveLength(3);
    const types = (n: string) => (byName(rs, NODEPOOL, n)!.props as O).spec.template.spec.requirements.find((r: O) => r.key === "karpenter.sh/capacity-type").values;
    expect(types("llm-ha-us-east-1a-h100")).toEqual(["reserved", "on-demand"]);
    expect(types("llm-ha-us-east-1b-h100")).toEqual(["on-demand"]);
    expect(types("llm-ha-us-east-1b-a100")).toEqual(["reserved"]);
    for (const r of ofType(rs, NODEPOOL)) expect(() => new NodePool(r.props as never).validate(), r.name).not.toThrow();
    for (const r of ofType(rs, NODECLASS)) {
      const o = structuredClone(r.props as O);
      o.spec.securityGroupSelectorTerms = [{ id: "sg-0123456789abcdef0" }];
      expect(() => new EC2NodeClass(o as never).validate(), r.name).not.toThrow();
    }
    // The standby wakes both classes' pools, no fallback pool without fallback types.
    expect(controllerEnv(rs).LLMHA_STANDBY_NODEPOOLS).toBe("llm-ha-us-east-1c-h100=8,llm-ha-us-east-1c-a100=8");
  });

  it("refuses amiAlias and nodeRole beside an adopted nodeClass, and an unknown engine", async () => {
    const p = await failure({ "llm-ha:capacity": JSON.stringify({ engine: "karpenter", karpenter: { nodeClass: "gpu", amiAlias: "al2023@latest", nodeRole: "r" } }) });
    expect(p).toEqual([
      "llm-ha:capacity.karpenter.amiAlias: applies to the EC2NodeClass the stack creates, not to an adopted nodeClass",
      "llm-ha:capacity.karpenter.nodeRole: applies to the EC2NodeClass the stack creates, not to an adopted nodeClass",
    ]);
    expect(await failure({ "llm-ha:capacity": JSON.stringify({ engine: "eks-auto" }) })).toEqual(['llm-ha:capacity.engine: must be "karpenter" or "nodeGroups", got "eks-auto"']);
  });
});
