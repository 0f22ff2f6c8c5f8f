/**
 * `llm-ha preflight --online` on an existing cluster (`Pulumi.byo.yaml`): the cluster's version,
 * the add-ons llm-ha expects there, Karpenter's CRDs and version, the adopted node groups' labels
 * and taints, the system nodes per AZ and the running identity's access, each finding with its
 * fix. The reads go through a fake `ClusterReader` that answers as the aws CLI and kubectl do.
 */
import { describe, expect, it } from "vitest";
import { stackFile } from "../../infra/capture";
import { offlineChecks, onlinePlan } from "../../infra/preflight/checks";
import { existingClusterRows, imageVersion, type ClusterReader } from "../../infra/preflight/existing-cluster";
import { readStackFile } from "../../infra/stack-yaml";
import type { StackConfig } from "../../infra/config";

const TODAY = new Date("2026-12-06T00:00:00Z");

function byoConfig(extra: Record<string, string> = {}): StackConfig {
  const { config } = offlineChecks({ ...readStackFile(stackFile("byo")), ...extra }, "llm-ha", "byo", TODAY);
  if (!config) throw new Error("byo did not resolve");
  return config;
}

type World = {
  version: string;
  paths: Record<string, unknown>;
  denied: string[];
  nodeGroups: Record<string, { labels: Record<string, string>; taints: { key: string; value?: string; effect: string }[] }>;
};

const crd = (served = "v1") => ({ spec: { versions: [{ name: served, served: true }] } });
const node = (az: string) => ({ metadata: { labels: { "topology.kubernetes.io/zone": az, "llm-ha.io/node-role": "system" } } });

function healthy(): World {
  return {
    version: "1.36",
    denied: [],
    nodeGroups: {},
    paths: {
      "/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Daws-load-balancer-controller": { items: [{ metadata: { name: "aws-load-balancer-controller", namespace: "kube-system" } }] },
      "/apis/apps/v1/daemonsets": {
        items: [{ metadata: { name: "nvdp-nvidia-device-plugin" }, spec: { template: { spec: { tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }], containers: [{ image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" }] } } } }],
      },
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/securitygrouppolicies.vpcresources.k8s.aws": crd("v1beta1"),
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh": crd(),
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh": crd(),
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ec2nodeclasses.karpenter.k8s.aws": crd(),
      "/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Dkarpenter": { items: [{ spec: { template: { spec: { containers: [{ image: "public.ecr.aws/karpenter/controller:1.6.3@sha256:abc" }] } } } }] },
      "/api/v1/nodes?labelSelector=llm-ha.io%2Fnode-role%3Dsystem": { items: ["us-east-1a", "us-east-1b", "us-east-1c"].map(node) },
      "/api/v1/namespaces/kube-system/serviceaccounts/aws-node": { metadata: { annotations: { "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/vpc-cni" } } },
    },
  };
}

function reader(w: World): ClusterReader & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    clusterVersion: async () => w.version,
    nodeGroup: async (_c, name) => {
      const g = w.nodeGroups[name];
      if (!g) throw new Error(`aws eks describe-nodegroup: ResourceNotFoundException: No node group found for name: ${name}`);
      return g;
    },
    get: async (path) => {
      reads.push(path);
      return w.paths[path];
    },
    canI: async (verb, resource) => !w.denied.includes(`${verb} ${resource}`),
  };
}

const status = (rows: { check: string; status: string }[]) => Object.fromEntries(rows.map((r) => [r.check, r.status]));

describe("preflight on an existing cluster", () => {
  it("passes a cluster that has what llm-ha expects", async () => {
    const rows = await existingClusterRows(byoConfig(), reader(healthy()), TODAY);
    expect(rows.filter((r) => r.status !== "ok").map((r) => `${r.check}: ${r.detail}`)).toEqual([]);
    expect(Object.keys(status(rows))).toEqual(["cluster version", "load balancer controller", "NVIDIA device plugin", "security groups for pods", "VPC CNI role", "Karpenter version", "system nodes", "access"]);
  });

  it("names each finding with its fix", async () => {
    const w = healthy();
    w.version = "1.31";
    delete w.paths["/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Daws-load-balancer-controller"];
    (w.paths["/apis/apps/v1/daemonsets"] as { items: { spec: { template: { spec: { tolerations: unknown[] } } } }[] }).items[0].spec.template.spec.tolerations = [];
    delete w.paths["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh"];
    w.paths["/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Dkarpenter"] = { items: [{ spec: { template: { spec: { containers: [{ image: "public.ecr.aws/karpenter/controller:0.37.0" }] } } } }] };
    w.paths["/api/v1/nodes?labelSelector=llm-ha.io%2Fnode-role%3Dsystem"] = { items: [node("us-east-1a"), node("us-east-1b")] };
    w.denied = ["create nodepools.karpenter.sh"];
    w.paths["/api/v1/namespaces/kube-system/serviceaccounts/aws-node"] = { metadata: {} };
    const rows = await existingClusterRows(byoConfig(), reader(w), TODAY);
    const by = (check: string) => rows.find((r) => r.check === check)!;
    expect(by("cluster version")).toMatchObject({ status: "fail", fix: expect.stringContaining("aws eks update-cluster-version --name ai-platform --kubernetes-version 1.32") });
    expect(by("load balancer controller")).toMatchObject({ status: "missing", fix: expect.stringContaining("helm install aws-load-balancer-controller") });
    expect(by("NVIDIA device plugin")).toMatchObject({ status: "invalid", fix: expect.stringContaining("operator: Exists") });
    expect(by("Karpenter CRD nodeclaims.karpenter.sh")).toMatchObject({ status: "missing" });
    expect(by("VPC CNI role")).toMatchObject({ status: "warn", fix: expect.stringContaining("llm-ha:capacity.karpenter.nodeRole") });
    expect(by("Karpenter version")).toMatchObject({ status: "invalid", detail: "Karpenter 0.37.0 is older than 1.0.0 (the v1 API)" });
    expect(by("system nodes")).toMatchObject({ status: "missing", detail: expect.stringContaining("in us-east-1c") });
    expect(by("access")).toMatchObject({ status: "missing", detail: "the running identity may not create nodepools.karpenter.sh", fix: expect.stringContaining("associate-access-policy") });
  });

  it("checks adopted node groups' labels and taint, and gives the command that sets them", async () => {
    const groups = JSON.stringify({ engine: "nodeGroups", nodeGroups: { "us-east-1a": { h100: "gpu-a" }, "us-east-1b": { h100: "gpu-b" }, "us-east-1c": { h100: "gpu-c" } } });
    const w = healthy();
    const labels = (az: string, role: string) => ({ "llm-ha.io/gpu-class": "h100", "llm-ha.io/az": az, "llm-ha.io/az-role": role });
    const taint = [{ key: "nvidia.com/gpu", value: "true", effect: "NO_SCHEDULE" }];
    w.nodeGroups = { "gpu-a": { labels: labels("us-east-1a", "active"), taints: taint }, "gpu-b": { labels: labels("us-east-1b", "active"), taints: [] }, "gpu-c": { labels: labels("us-east-1c", "active"), taints: taint } };
    const r = reader(w);
    const rows = await existingClusterRows(byoConfig({ "llm-ha:capacity": groups }), r, TODAY);
    expect(status(rows)).toMatchObject({ "node group gpu-a": "ok", "node group gpu-b": "invalid", "node group gpu-c": "invalid" });
    expect(rows.find((x) => x.check === "node group gpu-b")!.fix).toBe(
      "aws eks update-nodegroup-config --cluster-name ai-platform --nodegroup-name gpu-b --labels 'addOrUpdateLabels={llm-ha.io/gpu-class=h100,llm-ha.io/az=us-east-1b,llm-ha.io/az-role=active}' --taints 'addOrUpdateTaints=[{key=nvidia.com/gpu,value=true,effect=NO_SCHEDULE}]'",
    );
    expect(rows.find((x) => x.check === "node group gpu-c")!.detail).toBe("labels llm-ha.io/az-role=standby missing or different");
    // Karpenter is not this stack's engine: not read.
    expect(r.reads.some((p) => p.includes("karpenter"))).toBe(false);
  });

  it("turns a failed read into a row naming it, and goes on", async () => {
    const r = reader(healthy());
    r.clusterVersion = async () => {
      throw new Error("aws eks describe-cluster: An error occurred (ResourceNotFoundException)");
    };
    const rows = await existingClusterRows(byoConfig(), r, TODAY);
    expect(rows[0]).toMatchObject({ check: "cluster version", status: "fail", detail: expect.stringContaining("ResourceNotFoundException"), fix: expect.stringContaining("aws eks update-kubeconfig --name ai-platform") });
    expect(rows.length).toBeGreaterThan(5);
  });

  it("offline: asks for no API endpoint or load balancer controller digest, and plans the cluster's reads", async () => {
    const { rows } = offlineChecks(readStackFile(stackFile("byo")), "llm-ha", "byo", TODAY);
    const checks = rows.map((r) => r.check);
    expect(checks).not.toContain("setting llm-ha:apiEndpoint");
    expect(checks).not.toContain("setting llm-ha:images.lbControllerDigest");
    expect(checks).not.toContain("managed add-on versions");
    expect(rows.find((r) => r.check === "existing cluster")).toMatchObject({ status: "ok" });
    expect(rows.find((r) => r.check === "stack configuration")).toMatchObject({ status: "ok" });
    const plan = onlinePlan(byoConfig());
    expect(plan[0]).toMatch(/^existing cluster ai-platform: eks describe-cluster/);
    expect(plan.some((l) => l.startsWith("Standard quota") || l.startsWith("add-on versions"))).toBe(false);
  });

  it("reads a version from the image tag", () => {
    expect(imageVersion("public.ecr.aws/karpenter/controller:1.6.3@sha256:abc")).toBe("1.6.3");
    expect(imageVersion("x/karpenter:v1.0.8")).toBe("1.0.8");
    expect(imageVersion("x/karpenter@sha256:abc")).toBeUndefined();
  });
});
