// The ports the HA machinery listens on: an agent port open to the internet lets anyone
// mark nodes down (L1); Redis and Kafka hold the registry, lease and queue (L2, L4); the
// kubelet runs pods. None of them may face the internet: 0.0.0.0/0, ::/0 or any other
// public block (policies/cidr.ts), e.g. an office's /24 or a /1 pair.
import { type ResourceValidationPolicy } from "@pulumi/policy";
import { isPublicCidr } from "./cidr";
import { list, num, record, str, strings, type Props } from "./props";

export interface PortRange {
  name: string;
  from: number;
  to: number;
}

export interface NoPublicPortsConfig {
  ports: PortRange[];
}

const SG_TYPE = "aws:ec2/securityGroup:SecurityGroup";
const INGRESS_RULE_TYPE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule";
const SG_RULE_TYPE = "aws:ec2/securityGroupRule:SecurityGroupRule";
export const SG_TYPES = [SG_TYPE, INGRESS_RULE_TYPE, SG_RULE_TYPE];

export interface Ingress {
  from: number;
  to: number;
  protocol: string;
  cidrs: string[];
  /** The property naming the source security group, when the rule has one (`self` counts as a group). */
  sourceProperty?: string;
}

/** Protocol "-1" (or "all") opens every port whatever fromPort/toPort say. */
export function opensPorts(i: Ingress, range: PortRange): boolean {
  const p = i.protocol.toLowerCase();
  if (p === "-1" || p === "all") return true;
  if (p !== "tcp" && p !== "6") return false;
  return i.from <= range.to && i.to >= range.from;
}

export function ingressesOf(type: string, props: Props): Ingress[] {
  const proto = (v: unknown) => str(v) ?? String(num(v) ?? "");
  if (type === SG_TYPE) {
    return list(props.ingress).map((x) => {
      const r = record(x) ?? {};
      return {
        from: num(r.fromPort) ?? 0,
        to: num(r.toPort) ?? 0,
        protocol: proto(r.protocol),
        cidrs: [...strings(r.cidrBlocks), ...strings(r.ipv6CidrBlocks)],
        sourceProperty: strings(r.securityGroups).length > 0 || r.self === true ? "ingress" : undefined,
      };
    });
  }
  if (type === INGRESS_RULE_TYPE) {
    return [
      {
        from: num(props.fromPort) ?? 0,
        to: num(props.toPort) ?? 65535,
        protocol: proto(props.ipProtocol),
        cidrs: [str(props.cidrIpv4), str(props.cidrIpv6)].filter((c): c is string => c !== undefined),
        sourceProperty: props.referencedSecurityGroupId !== undefined ? "referencedSecurityGroupId" : undefined,
      },
    ];
  }
  if (type === SG_RULE_TYPE && props.type === "ingress") {
    return [
      {
        from: num(props.fromPort) ?? 0,
        to: num(props.toPort) ?? 0,
        protocol: proto(props.protocol),
        cidrs: [...strings(props.cidrBlocks), ...strings(props.ipv6CidrBlocks)],
        sourceProperty: props.sourceSecurityGroupId !== undefined || props.self === true ? "sourceSecurityGroupId" : undefined,
      },
    ];
  }
  return [];
}

export const noPublicHaPorts: ResourceValidationPolicy = {
  name: "no-public-ha-ports",
  description:
    "No security group opens Redis (6379), Kafka (9092-9098), the llm-ha agent (9400-9401) or the kubelet (10250) to the internet: 0.0.0.0/0, ::/0 or any public block (L1 node tier: nobody outside can drain nodes through the agent-check port; L2/L4: the registry, lease and queue stay private).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      ports: {
        type: "array",
        items: {
          type: "object",
          required: ["name", "from", "to"],
          properties: { name: { type: "string" }, from: { type: "integer" }, to: { type: "integer" } },
        },
        default: [
          { name: "Redis", from: 6379, to: 6379 },
          { name: "Kafka", from: 9092, to: 9098 },
          { name: "llm-ha agent", from: 9400, to: 9401 },
          { name: "kubelet", from: 10250, to: 10250 },
        ],
        description: "Port ranges that must never be open to the internet.",
      },
    },
  },
  validateResource: (args, reportViolation) => {
    if (!SG_TYPES.includes(args.type)) args.notApplicable(`Policy only applies to ${SG_TYPES.join(", ")}`);
    const { ports } = args.getConfig<NoPublicPortsConfig>();
    for (const ingress of ingressesOf(args.type, args.props as Props)) {
      const world = ingress.cidrs.filter(isPublicCidr);
      if (world.length === 0) continue;
      for (const range of ports) {
        if (!opensPorts(ingress, range)) continue;
        const span = range.from === range.to ? `${range.from}` : `${range.from}-${range.to}`;
        reportViolation(`${args.name} opens ${range.name} (${span}) to ${world.join(" and ")}.`);
      }
    }
  },
};
