import { describe, expect, it } from "vitest";
import { haPortsFenced } from "../../policies/fences";
import type { CapturedResource } from "../../policies/runner";
import { changed, find, happyStack, messages } from "./fixtures";

function res(type: string, name: string, props: Record<string, unknown>, propertyDependencies: Record<string, string[]> = {}): CapturedResource {
  return { type, name, urn: `urn:pulumi:test::llm-ha::${type}::${name}`, props, opts: { propertyDependencies } };
}

const INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule";
const EKS_URN = "urn:pulumi:test::llm-ha::aws:eks/cluster:Cluster::eks";

function netpol(name: string, ingress: unknown[]): CapturedResource {
  return res("kubernetes:networking.k8s.io/v1:NetworkPolicy", name, {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name, namespace: "llm-ha" },
    spec: { podSelector: {}, policyTypes: ["Ingress"], ingress },
  });
}

describe("ha-ports-fenced", () => {
  it("passes the fixture: GPU nodes in their own group, Redis from a client group, HTTPS from the world", async () => {
    expect(await messages(haPortsFenced, happyStack())).toEqual([]);
  });

  it("refuses Redis open to the VPC CIDR", async () => {
    const rs = changed("redis-sg", (p) => (p.ingress = [{ protocol: "tcp", fromPort: 6379, toPort: 6379, cidrBlocks: ["10.0.0.0/16"] }]));
    expect(await messages(haPortsFenced, rs)).toEqual(["redis-sg opens Redis (6379) to 10.0.0.0/16: only the clients' security groups may be let in."]);
  });

  it("refuses a block wider than the VPC, and all traffic from the world, on every fenced port", async () => {
    const rs = [...happyStack(), res(INGRESS_RULE, "wide", { ipProtocol: "tcp", fromPort: 7000, toPort: 9500, cidrIpv4: "10.0.0.0/8" })];
    expect(await messages(haPortsFenced, rs)).toEqual([
      "wide opens inference (8000) to 10.0.0.0/8: only the clients' security groups may be let in.",
      "wide opens llm-ha agent (9400-9401) to 10.0.0.0/8: only the clients' security groups may be let in.",
      "wide opens Kafka (9092-9098) to 10.0.0.0/8: only the clients' security groups may be let in.",
      "wide opens HAProxy monitor (8404) to 10.0.0.0/8: only the clients' security groups may be let in.",
    ]);
    const world = [...happyStack(), res(INGRESS_RULE, "all", { ipProtocol: "-1", cidrIpv4: "0.0.0.0/0" })];
    expect(await messages(haPortsFenced, world)).toHaveLength(5);
  });

  it("lets in a narrower block (one subnet) and other ports from the VPC", async () => {
    const rs = [
      ...happyStack(),
      res(INGRESS_RULE, "subnet", { ipProtocol: "tcp", fromPort: 8404, toPort: 8404, cidrIpv4: "10.0.240.0/24" }),
      res(INGRESS_RULE, "https", { ipProtocol: "tcp", fromPort: 443, toPort: 443, cidrIpv4: "10.0.0.0/16" }),
    ];
    expect(await messages(haPortsFenced, rs)).toEqual([]);
  });

  it("refuses the agent ports opened to the EKS cluster security group (every pod), not to another group", async () => {
    const fromCluster = res(INGRESS_RULE, "agents-from-cluster", { ipProtocol: "tcp", fromPort: 9400, toPort: 9401, referencedSecurityGroupId: "sg-eks" }, { referencedSecurityGroupId: [EKS_URN] });
    const fromL1 = res(INGRESS_RULE, "agents-from-l1", { ipProtocol: "tcp", fromPort: 9400, toPort: 9401, referencedSecurityGroupId: "sg-l1" });
    // The kubelet probes of the L1 pods: their NetworkPolicy fences the monitor port.
    const probes = res(INGRESS_RULE, "l1-probes", { ipProtocol: "tcp", fromPort: 8404, toPort: 8404, referencedSecurityGroupId: "sg-eks" }, { referencedSecurityGroupId: [EKS_URN] });
    expect(await messages(haPortsFenced, [...happyStack(), fromCluster, fromL1, probes])).toEqual([
      "agents-from-cluster opens llm-ha agent (9400-9401) to the EKS cluster security group, i.e. every node and pod: let in the clients' own groups.",
    ]);
  });

  it("refuses a GPU node group left in the cluster security group (no fence at all)", async () => {
    const rs = happyStack();
    delete find(rs, "gpu-us-east-1a-lt").props.vpcSecurityGroupIds;
    expect(await messages(haPortsFenced, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 has no security group of its own (its launch template sets no vpcSecurityGroupIds): its nodes join the cluster security group, where every pod reaches 8000/9400/9401.",
    ]);
  });

  it("refuses a NetworkPolicy that opens the monitor port to every source or to the whole VPC", async () => {
    const rs = [
      ...happyStack(),
      netpol("open", [{ ports: [{ protocol: "TCP", port: 8404 }] }]),
      netpol("vpc", [{ from: [{ ipBlock: { cidr: "10.0.0.0/16" } }], ports: [{ protocol: "TCP", port: 8404 }] }]),
      netpol("fenced", [
        { ports: [{ protocol: "TCP", port: 8080 }] },
        { from: [{ ipBlock: { cidr: "10.0.240.0/24" } }, { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [{ protocol: "TCP", port: 8404 }] },
      ]),
    ];
    expect(await messages(haPortsFenced, rs)).toEqual([
      "NetworkPolicy open opens HAProxy monitor (8404) to every source: name the clients (pods, namespaces or the NLB's subnets).",
      "NetworkPolicy vpc opens HAProxy monitor (8404) to 10.0.0.0/16, the whole VPC: name the clients.",
    ]);
  });

  it("takes the port list from config", async () => {
    const rs = [...happyStack(), res(INGRESS_RULE, "ssh", { ipProtocol: "tcp", fromPort: 22, toPort: 22, cidrIpv4: "10.0.0.0/16" })];
    expect(await messages(haPortsFenced, rs, { "ha-ports-fenced": { ports: [{ name: "SSH", from: 22, to: 22 }] } })).toEqual([
      "ssh opens SSH (22) to 10.0.0.0/16: only the clients' security groups may be let in.",
    ]);
  });
});
