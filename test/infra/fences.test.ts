// The network fences' pieces that need no stack: the security group's port arithmetic, the
// namespace's NetworkPolicies (Kubernetes schema) and the L1 HAProxy's stats page off the network.
import { describe, expect, it } from "vitest";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { CLOSED_TO_CLUSTER, tcpRangesExcept } from "../../infra/fences";
import { publicSubnetCidrs } from "../../infra/network";
import { l1HaproxyConfig, L1_STATS_BIND } from "../../infra/workloads/l1-proxy";
import { workloadNetworkPolicies } from "../../infra/workloads/network-policies";
import { runPolicies } from "../../policies/runner";
import { haPortsFenced } from "../../policies/fences";

describe("network fences", () => {
  it("opens every TCP port to the cluster's members but the closed ones", () => {
    const ranges = tcpRangesExcept(CLOSED_TO_CLUSTER);
    const open = (port: number) => ranges.some((r) => r.fromPort <= port && port <= r.toPort);
    for (const port of [8000, 9400, 9401, 6379, 8404, 9092, 9098]) expect(open(port), String(port)).toBe(false);
    for (const port of [0, 53, 443, 7999, 8001, 9091, 9099, 9402, 10250, 65535]) expect(open(port), String(port)).toBe(true);
    expect(tcpRangesExcept([[0, 10]])).toEqual([{ fromPort: 11, toPort: 65535 }]);
  });

  it("denies the namespace both ways, lets the monitor port in from the NLBs' subnets and Prometheus only, and passes ha-ports-fenced", async () => {
    const nlbCidrs = publicSubnetCidrs("10.0.0.0/16", 3);
    expect(nlbCidrs).toEqual(["10.0.240.0/24", "10.0.241.0/24", "10.0.242.0/24"]);
    const byNs = workloadNetworkPolicies({ namespace: "llm-ha", edgeNamespace: "llm-ha-edge", vpcCidr: "10.0.0.0/16", nlbCidrs, prometheusNamespace: "monitoring" });
    const nps = { ...byNs.workloads, ...byNs.edge };
    for (const np of Object.values(nps)) expect(() => new NetworkPolicy(np as never).validate()).not.toThrow();
    // Default deny in both namespaces; the L1 pods' and the controller's policies where their pods are.
    expect(Object.values(byNs.workloads).map((np) => np.metadata)).toEqual([expect.objectContaining({ name: "default-deny", namespace: "llm-ha" }), expect.objectContaining({ name: "gpu-ingress", namespace: "llm-ha" })]);
    for (const np of Object.values(byNs.edge)) expect((np.metadata as { namespace: string }).namespace).toBe("llm-ha-edge");
    expect(nps["edge-default-deny"].spec).toEqual({ podSelector: {}, policyTypes: ["Ingress", "Egress"] });
    // Across the namespaces: into vLLM and the agents, the edge namespace's L1 pods (all three ports) and Prometheus (metrics) only.
    expect((nps["gpu-ingress"].spec as { ingress: unknown[] }).ingress).toEqual([
      { from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "llm-ha-edge" } }, podSelector: { matchLabels: { "llm-ha.io/net-role": "l1" } } }], ports: [8000, 9400, 9401].map((port) => ({ protocol: "TCP", port })) },
      { from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [8000, 9400].map((port) => ({ protocol: "TCP", port })) },
    ]);
    expect(nps["default-deny"].spec).toEqual({ podSelector: {}, policyTypes: ["Ingress", "Egress"] });
    const monitor = JSON.stringify(nps["l1-ingress"]);
    expect(monitor).not.toContain("10.0.0.0/16");
    // Egress: DNS, HTTPS, and the VPC only on the ports of Redis, MSK, vLLM and the agents.
    const ports = (nps["l1-egress"].spec as { egress: { ports: { port: number }[] }[] }).egress.flatMap((e) => e.ports.map((p) => p.port));
    expect(ports.sort((a, b) => a - b)).toEqual([53, 53, 443, 6379, 8000, 9098, 9400, 9401]);
    const captured = [
      { type: "aws:ec2/vpc:Vpc", name: "vpc", urn: "urn:pulumi:t::p::aws:ec2/vpc:Vpc::vpc", props: { cidrBlock: "10.0.0.0/16" } },
      ...Object.entries(nps).map(([id, np]) => ({ type: "kubernetes:networking.k8s.io/v1:NetworkPolicy", name: id, urn: `urn:pulumi:t::p::np::${id}`, props: np as Record<string, unknown> })),
    ];
    expect(await runPolicies([haPortsFenced], captured)).toEqual([]);
  });

  it("serves HAProxy's stats page on the pod's loopback only, not on the monitor port", () => {
    const cfg = l1HaproxyConfig({ serversNamespace: "llm-ha", az: "a", azs: ["a", "b"], slots: { a: 2, b: 2 } });
    const monitor = cfg.slice(cfg.indexOf("frontend monitor"), cfg.indexOf("\n\n", cfg.indexOf("frontend monitor")));
    expect(monitor).toContain("monitor-uri /healthz");
    expect(monitor).not.toContain("stats");
    expect(L1_STATS_BIND).toMatch(/^127\.0\.0\.1:/);
    expect(cfg).toContain(`frontend stats\n  bind ${L1_STATS_BIND}\n  maxconn 4\n  stats enable\n  stats uri /stats`);
  });
});
