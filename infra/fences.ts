import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { PORTS } from "../contracts/names";
import { checkerCidrs } from "../contracts/route53-ranges";
import { NET_ROLE_LABEL, NET_ROLES, type NetRole } from "./names";
import { tagged } from "./tags";

/**
 * The ports on GPU nodes that only the L1 proxies and Prometheus may reach: vLLM (8000), the
 * agent's HTTP (9400: `/az/health`, `/metrics`) and its agent-check (9401). The inference
 * servers and agents run on the host network, where NetworkPolicy does not apply: the
 * fence is the GPU nodes' own security group.
 */
export const FENCED_GPU_PORTS: readonly number[] = Object.freeze([PORTS.inference, PORTS.agentHttp, PORTS.agentCheck]);

export interface FencesArgs {
  vpcId: pulumi.Input<string>;
  /** VPC CIDR: where the pods' egress to Redis, MSK, CoreDNS and the GPU nodes goes. Required. */
  vpcCidr: string;
  /** Cluster name: the L1 pods' group carries its `kubernetes.io/cluster/<name>` tag. Required. */
  clusterName: string;
  /** The EKS cluster security group (control plane, system nodes and their pods). Required. */
  clusterSecurityGroupId: pulumi.Input<string>;
  /** The L1 NLBs' client listener: 443 (TLS) or a dev stack's plain 80. Default 443. */
  apiPort?: number;
  /**
   * Where the NLBs' `/az/health` listener (:8081) is reachable from: Route53's health checkers
   * (contracts/route53-ranges.ts). Default: every checker region's IPv4 blocks of the snapshot.
   */
  healthCheckerCidrs?: readonly string[];
}

type Rule = { ipProtocol: string; fromPort?: number; toPort?: number };

/**
 * Ports no cluster member may reach on a GPU node: the fenced ones, and Redis, Kafka and
 * HAProxy's monitor port (nothing listens there on a GPU node; leaving them out keeps the
 * `ha-ports-fenced` policy's rule simple: no cluster-wide rule covers them anywhere).
 */
export const CLOSED_TO_CLUSTER: readonly [number, number][] = Object.freeze([
  [6379, 6379],
  [PORTS.inference, PORTS.inference],
  [PORTS.l1Monitor, PORTS.l1Monitor],
  [9092, 9098],
  [PORTS.agentHttp, PORTS.agentCheck],
]);

/** TCP 0–65535 without the `holes` (inclusive ranges), as port ranges: a security group can only allow, never except. */
export function tcpRangesExcept(holes: readonly (readonly [number, number])[]): { fromPort: number; toPort: number }[] {
  const out: { fromPort: number; toPort: number }[] = [];
  let from = 0;
  for (const [a, b] of [...holes].sort((x, y) => x[0] - y[0])) {
    if (a > from) out.push({ fromPort: from, toPort: a - 1 });
    from = Math.max(from, b + 1);
  }
  if (from <= 65535) out.push({ fromPort: from, toPort: 65535 });
  return out;
}

/**
 * The network fences (docs/security.md "Network fences"):
 * - `gpuNodes`, the GPU nodes' only security group (their launch templates name it, so EKS
 *   leaves them out of the cluster security group): 8000/9400/9401 from the L1 pods and the
 *   scrapers only; every other port from the cluster's members and the GPU nodes, as the
 *   cluster security group gave them (kubelet, node-to-node).
 * - `l1Pods`, the L1 proxies' own group (security groups for pods, selected by
 *   `llm-ha.io/net-role: l1`): the one client of MSK and, with the GPU nodes and the
 *   controller, of Redis. Tagged for the cluster so the load balancer controller adds the
 *   NLB's client and health-check rules to it.
 * - `controllerPods`, the controller's group (`llm-ha.io/net-role: controller`): Redis and AWS.
 * - `scrapers`, for Prometheus: this stack does not own its namespace, so the operator attaches
 *   the group to it (`scraperSecurityGroupId`, docs/security.md).
 * - `nlbFrontend`, the L1 NLBs' own group (their `aws-load-balancer-security-groups`): the API
 *   listener to every client, the `/az/health` listener (:8081) to Route53's health checkers
 *   only, so nobody else can hold its connections until the checkers time out.
 * Egress of the pod groups: DNS, Redis, MSK and the GPU ports inside the VPC, 443 anywhere
 * (AWS APIs, fallback providers).
 */
export class Fences extends pulumi.ComponentResource {
  readonly gpuNodes: aws.ec2.SecurityGroup;
  readonly podGroups: Record<NetRole, aws.ec2.SecurityGroup>;
  readonly scrapers: aws.ec2.SecurityGroup;
  readonly nlbFrontend: aws.ec2.SecurityGroup;

  constructor(name: string, args: FencesArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Fences", name, {}, opts);
    const o = { parent: this };
    const sg = (id: string, description: string, tags: Record<string, string> = {}) =>
      new aws.ec2.SecurityGroup(`${name}-${id}`, { vpcId: args.vpcId, description, tags: tagged({ Name: `${name}-${id}`, ...tags }) }, o);
    const ingress = (id: string, group: aws.ec2.SecurityGroup, from: pulumi.Input<string>, r: Rule, description: string) =>
      new aws.vpc.SecurityGroupIngressRule(`${name}-${id}`, { securityGroupId: group.id, referencedSecurityGroupId: from, ...r, description, tags: tagged() }, o);
    const egress = (id: string, group: aws.ec2.SecurityGroup, cidr: string, r: Rule, description: string) =>
      new aws.vpc.SecurityGroupEgressRule(`${name}-${id}`, { securityGroupId: group.id, cidrIpv4: cidr, ...r, description, tags: tagged() }, o);

    this.gpuNodes = sg("gpu-nodes", "GPU nodes: 8000/9400/9401 from the L1 proxies and Prometheus only");
    this.podGroups = {
      l1: sg("l1-pods", "L1 proxy pods (security groups for pods)", { [`kubernetes.io/cluster/${args.clusterName}`]: "owned" }),
      controller: sg("controller-pods", "llm-ha controller pods (security groups for pods)"),
    };
    this.scrapers = sg("scrapers", "Prometheus: scrapes the GPU nodes' fenced ports");
    const l1 = this.podGroups.l1;

    // Everything the cluster security group gave the GPU nodes, but the fenced ports.
    tcpRangesExcept(CLOSED_TO_CLUSTER).forEach((r, i) => {
      ingress(`gpu-from-cluster-${i}`, this.gpuNodes, args.clusterSecurityGroupId, { ipProtocol: "tcp", ...r }, "control plane and cluster members, fenced ports excepted");
      ingress(`gpu-from-gpu-${i}`, this.gpuNodes, this.gpuNodes.id, { ipProtocol: "tcp", ...r }, "GPU nodes among themselves, fenced ports excepted");
    });
    ingress("gpu-from-cluster-udp", this.gpuNodes, args.clusterSecurityGroupId, { ipProtocol: "udp", fromPort: 0, toPort: 65535 }, "cluster members (UDP)");
    for (const port of FENCED_GPU_PORTS) {
      ingress(`gpu-${port}-from-l1`, this.gpuNodes, l1.id, { ipProtocol: "tcp", fromPort: port, toPort: port }, "L1 proxies");
      ingress(`gpu-${port}-from-scrapers`, this.gpuNodes, this.scrapers.id, { ipProtocol: "tcp", fromPort: port, toPort: port }, "Prometheus");
    }
    // The nodes' own traffic (image pulls, AWS APIs, the model hub) is not fenced here.
    egress("gpu-out", this.gpuNodes, "0.0.0.0/0", { ipProtocol: "-1" }, "GPU nodes' own traffic");
    // The control plane and system nodes take the GPU nodes in (kubelet to API server, CoreDNS).
    new aws.vpc.SecurityGroupIngressRule(
      `${name}-cluster-from-gpu`,
      { securityGroupId: args.clusterSecurityGroupId, referencedSecurityGroupId: this.gpuNodes.id, ipProtocol: "-1", description: "GPU nodes", tags: tagged() },
      o,
    );

    // Kubelet probes and the NLB's rules (added by the load balancer controller) reach the L1 pods.
    for (const port of [PORTS.l1, PORTS.l1AzHealth, PORTS.l1Monitor]) {
      ingress(`l1-${port}-from-cluster`, l1, args.clusterSecurityGroupId, { ipProtocol: "tcp", fromPort: port, toPort: port }, "kubelet probes");
    }
    ingress(`l1-metrics-from-scrapers`, l1, this.scrapers.id, { ipProtocol: "tcp", fromPort: PORTS.l1Monitor, toPort: 9411 }, "Prometheus (HAProxy exporter, fallback metrics)");
    // The continuation relay's metrics alone: a rule of its own, not the range up to 9421, which
    // would take in its completions (9420) and HAProxy's continuation listener (9422) in between.
    ingress(`l1-continue-metrics-from-scrapers`, l1, this.scrapers.id, { ipProtocol: "tcp", fromPort: PORTS.l1ContinueMetrics, toPort: PORTS.l1ContinueMetrics }, "Prometheus (continuation relay metrics)");
    // The controller takes Prometheus alone (its `/metrics`); its probes are exec probes.
    ingress(`controller-metrics-from-scrapers`, this.podGroups.controller, this.scrapers.id, { ipProtocol: "tcp", fromPort: PORTS.agentHttp, toPort: PORTS.agentHttp }, "Prometheus");
    const podEgress: Record<NetRole, { id: string; r: Rule; what: string }[]> = {
      l1: [
        { id: "redis", r: { ipProtocol: "tcp", fromPort: 6379, toPort: 6379 }, what: "Redis" },
        { id: "msk", r: { ipProtocol: "tcp", fromPort: 9098, toPort: 9098 }, what: "MSK (IAM over TLS)" },
        { id: "inference", r: { ipProtocol: "tcp", fromPort: PORTS.inference, toPort: PORTS.inference }, what: "inference servers" },
        { id: "agents", r: { ipProtocol: "tcp", fromPort: PORTS.agentHttp, toPort: PORTS.agentCheck }, what: "agents" },
      ],
      controller: [{ id: "redis", r: { ipProtocol: "tcp", fromPort: 6379, toPort: 6379 }, what: "Redis" }],
    };
    for (const role of NET_ROLES) {
      const group = this.podGroups[role];
      for (const e of podEgress[role]) egress(`${role}-to-${e.id}`, group, args.vpcCidr, e.r, e.what);
      egress(`${role}-to-dns-udp`, group, args.vpcCidr, { ipProtocol: "udp", fromPort: 53, toPort: 53 }, "CoreDNS");
      egress(`${role}-to-dns-tcp`, group, args.vpcCidr, { ipProtocol: "tcp", fromPort: 53, toPort: 53 }, "CoreDNS");
      egress(`${role}-to-https`, group, "0.0.0.0/0", { ipProtocol: "tcp", fromPort: 443, toPort: 443 }, "AWS APIs and fallback providers");
    }
    // A pod with its own groups is no longer a cluster member: CoreDNS and the API server let it in.
    for (const role of NET_ROLES) {
      for (const [proto, port] of [["udp", 53], ["tcp", 53], ["tcp", 443]] as const) {
        new aws.vpc.SecurityGroupIngressRule(
          `${name}-cluster-${proto}${port}-from-${role}`,
          { securityGroupId: args.clusterSecurityGroupId, referencedSecurityGroupId: this.podGroups[role].id, ipProtocol: proto, fromPort: port, toPort: port, description: `${role} pods`, tags: tagged() },
          o,
        );
      }
    }
    egress("scrapers-to-vpc", this.scrapers, args.vpcCidr, { ipProtocol: "tcp", fromPort: 0, toPort: 65535 }, "scrape targets");

    // The L1 NLBs' frontend: clients on the API port, Route53's checkers alone on :8081.
    this.nlbFrontend = sg("l1-nlb", "L1 NLBs: the API to clients, /az/health (8081) to Route53 health checkers only");
    const apiPort = args.apiPort ?? 443;
    const cidrIngress = (id: string, cidr: string, port: number, description: string) =>
      new aws.vpc.SecurityGroupIngressRule(`${name}-${id}`, { securityGroupId: this.nlbFrontend.id, cidrIpv4: cidr, ipProtocol: "tcp", fromPort: port, toPort: port, description, tags: tagged() }, o);
    cidrIngress("nlb-api", "0.0.0.0/0", apiPort, "inference API clients");
    for (const cidr of args.healthCheckerCidrs ?? checkerCidrs().ipv4) {
      cidrIngress(`nlb-az-health-${cidr.replace(/[./:]/g, "-")}`, cidr, PORTS.l1AzHealth, "Route53 health checkers (ROUTE53_HEALTHCHECKS)");
    }
    // To the L1 pods: the listeners' targets and the NLB's own target health check.
    for (const port of [PORTS.l1, PORTS.l1AzHealth, PORTS.l1Monitor]) {
      egress(`nlb-to-l1-${port}`, this.nlbFrontend, args.vpcCidr, { ipProtocol: "tcp", fromPort: port, toPort: port }, "L1 proxy pods");
    }

    this.registerOutputs({ gpuNodes: this.gpuNodes.id, scrapers: this.scrapers.id, nlbFrontend: this.nlbFrontend.id });
  }
}

/**
 * The SecurityGroupPolicies giving each pod role its group, in the namespace of those pods (the
 * edge namespace): created by the workloads after that namespace exists — made before it, the
 * first `pulumi up` failed with "namespace not found" — and before the pods they select, whose
 * groups are set when they are created. `dependsOn`: vpc-cni, which ships their CRD.
 */
export function createSecurityGroupPolicies(
  name: string,
  groupIds: Record<NetRole, pulumi.Input<string>>,
  namespace: string,
  opts: pulumi.CustomResourceOptions,
): k8s.apiextensions.CustomResource[] {
  return NET_ROLES.map(
    (role) =>
      new k8s.apiextensions.CustomResource(
        `${name}-sgp-${role}`,
        {
          apiVersion: "vpcresources.k8s.aws/v1beta1",
          kind: "SecurityGroupPolicy",
          metadata: { name: `llmha-${role}`, namespace, labels: { "app.kubernetes.io/part-of": "llm-ha" } },
          spec: { podSelector: { matchLabels: { [NET_ROLE_LABEL]: role } }, securityGroups: { groupIds: [groupIds[role]] } },
        },
        opts,
      ),
  );
}
