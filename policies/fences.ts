// Inside the VPC one pod must not be worth the fleet: vLLM (8000) and the agents (9400/9401)
// answer only the L1 proxies and Prometheus, Redis and MSK only their clients, HAProxy's
// monitor port only the NLB and Prometheus. A rule that opens one of those ports to the VPC
// CIDR (or anything wider), to the cluster security group (every pod and node), or to every
// source of a NetworkPolicy is no fence; nor is a GPU node group left in the cluster group.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { cidrContains } from "./cidr";
import { gpuNodeGroupsWithTemplates } from "./conventions";
import { kubernetesType } from "./crds";
import { ingressesOf, opensPorts, SG_TYPES, type PortRange } from "./network";
import { list, num, record, str, strings, type Props } from "./props";

/** A fenced port range; `podOnly`: served only by pods that NetworkPolicy covers, so a security group rule from the cluster's group is not a hole. */
export interface FencedPort extends PortRange {
  podOnly?: boolean;
}

export interface HaPortsFencedConfig {
  ports: FencedPort[];
}

const VPC_TYPE = "aws:ec2/vpc:Vpc";
const EKS_CLUSTER_TYPE = "aws:eks/cluster:Cluster";

/** The ports `ha-ports-fenced` guards unless configured otherwise. */
export const FENCED_PORTS: readonly FencedPort[] = Object.freeze([
  { name: "inference", from: 8000, to: 8000 },
  { name: "llm-ha agent", from: 9400, to: 9401 },
  { name: "Redis", from: 6379, to: 6379 },
  { name: "Kafka", from: 9092, to: 9098 },
  // The L1 pods' kubelet probes come from the nodes (cluster group); their NetworkPolicy fences the rest.
  { name: "HAProxy monitor", from: 8404, to: 8404, podOnly: true },
]);

const span = (r: PortRange) => (r.from === r.to ? `${r.from}` : `${r.from}-${r.to}`);

/** A CIDR that lets in the whole VPC (or more): any block containing one of the VPC's. */
function coversVpc(cidr: string, vpcCidrs: readonly string[]): boolean {
  return cidr.endsWith("/0") || vpcCidrs.some((v) => cidrContains(cidr, v));
}

/** Whether the rule's source group is an EKS cluster's own security group (its Output: a property dependency on the cluster). */
function fromClusterGroup(r: PolicyResource, property: string | undefined): boolean {
  if (property === undefined) return false;
  return (r.propertyDependencies[property] ?? []).some((d) => d.type === EKS_CLUSTER_TYPE);
}

/** A NetworkPolicy ingress port that falls in the range (named ports cannot be resolved here: not counted). */
function npOpens(port: unknown, range: PortRange): boolean {
  const p = record(port) ?? {};
  if (p.port === undefined) return true;
  const from = num(p.port);
  if (from === undefined) return false;
  const to = num(p.endPort) ?? from;
  return from <= range.to && to >= range.from;
}

function checkNetworkPolicy(r: PolicyResource, ports: readonly PortRange[], vpcCidrs: readonly string[], report: (m: string, urn?: string) => void): void {
  const spec = record((r.props as Props).spec) ?? {};
  const name = str(record((r.props as Props).metadata)?.name) ?? r.name;
  for (const rule of list(spec.ingress).map((x) => record(x) ?? {})) {
    const rulePorts = list(rule.ports);
    const froms = list(rule.from).map((f) => record(f) ?? {});
    for (const range of ports) {
      if (rulePorts.length > 0 && !rulePorts.some((p) => npOpens(p, range))) continue;
      if (froms.length === 0) {
        report(`NetworkPolicy ${name} opens ${range.name} (${span(range)}) to every source: name the clients (pods, namespaces or the NLB's subnets).`, r.urn);
        continue;
      }
      const wide = froms.map((f) => str(record(f.ipBlock)?.cidr)).filter((c): c is string => c !== undefined && coversVpc(c, vpcCidrs));
      if (wide.length > 0) report(`NetworkPolicy ${name} opens ${range.name} (${span(range)}) to ${wide.join(" and ")}, the whole VPC: name the clients.`, r.urn);
    }
  }
}

export const haPortsFenced: StackValidationPolicy = {
  name: "ha-ports-fenced",
  description:
    "vLLM (8000), the agents (9400-9401), Redis (6379), Kafka (9092-9098) and HAProxy's monitor port (8404) are fenced inside the VPC: no security group rule " +
    "opens them to the VPC CIDR or wider or to the EKS cluster security group, no NetworkPolicy to every source or the whole VPC, and every GPU node group " +
    "has its own security group (left in the cluster's, every pod reaches vLLM and the agents around the L1 proxies' limits).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      ports: {
        type: "array",
        items: { type: "object", required: ["name", "from", "to"], properties: { name: { type: "string" }, from: { type: "integer" }, to: { type: "integer" }, podOnly: { type: "boolean" } } },
        default: FENCED_PORTS.map((p) => ({ ...p })),
        description: "Port ranges that only named clients may reach.",
      },
    },
  },
  validateStack: (args, reportViolation) => {
    const { ports } = args.getConfig<HaPortsFencedConfig>();
    const vpcCidrs = args.resources.filter((r) => r.type === VPC_TYPE).map((r) => str((r.props as Props).cidrBlock)).filter((c): c is string => c !== undefined);
    for (const r of args.resources) {
      if (kubernetesType(r.type)?.kind === "NetworkPolicy") {
        checkNetworkPolicy(r, ports, vpcCidrs, reportViolation);
        continue;
      }
      if (!SG_TYPES.includes(r.type)) continue;
      for (const ingress of ingressesOf(r.type, r.props as Props)) {
        for (const range of ports) {
          if (!opensPorts(ingress, range)) continue;
          const wide = ingress.cidrs.filter((c) => coversVpc(c, vpcCidrs));
          if (wide.length > 0) reportViolation(`${r.name} opens ${range.name} (${span(range)}) to ${wide.join(" and ")}: only the clients' security groups may be let in.`, r.urn);
          if (!range.podOnly && fromClusterGroup(r, ingress.sourceProperty)) {
            reportViolation(`${r.name} opens ${range.name} (${span(range)}) to the EKS cluster security group, i.e. every node and pod: let in the clients' own groups.`, r.urn);
          }
        }
      }
    }
    for (const g of gpuNodeGroupsWithTemplates(args.resources)) {
      if (strings(g.ltProps.vpcSecurityGroupIds).length > 0) continue;
      reportViolation(
        `GPU node group ${g.group.name} has no security group of its own (its launch template sets no vpcSecurityGroupIds): its nodes join the cluster security group, where every pod reaches 8000/9400/9401.`,
        g.group.urn,
      );
    }
  },
};
