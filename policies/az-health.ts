// The L3 zone tier's signal: Route53 fails an AZ over when its health checks of that AZ's NLB
// `/az/health` listener (:8081) fail. Open to the world, anyone holding a few dozen idle
// connections there makes the checkers time out (10 s × 2 failures: a healthy AZ fails over in
// about 20 s). Only the checkers' published ranges (ROUTE53_HEALTHCHECKS, committed as a
// snapshot: contracts/route53-ranges.ts) may reach it; the API listener stays open to clients.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { PORTS } from "../contracts/names";
import { checkerCidrs } from "../contracts/route53-ranges";
import { cidrContains, isPublicCidr } from "./cidr";
import { findReferenced } from "./conventions";
import { ingressesOf, opensPorts, SG_TYPES } from "./network";
import { list, num, record, str, stringMap, strings, type Props } from "./props";

const SERVICE_TYPE = "kubernetes:core/v1:Service";
const SG_TYPE = "aws:ec2/securityGroup:SecurityGroup";
const LB = "service.beta.kubernetes.io/aws-load-balancer";

export interface AzHealthConfig {
  port: number;
  allowedCidrs: string[];
}

/** An IPv6 CIDR as [first address, prefix length]. */
function v6(cidr: string): [bigint, number] | undefined {
  const [addr, lenText] = cidr.trim().toLowerCase().split("/");
  const len = Number(lenText ?? "128");
  if (!addr?.includes(":") || !Number.isInteger(len) || len < 0 || len > 128) return undefined;
  const [head, tail, extra] = addr.split("::");
  if (extra !== undefined) return undefined;
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return undefined;
  const value = groups.reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n);
  const hostBits = BigInt(128 - len);
  return [(value >> hostBits) << hostBits, len];
}

/** Whether `inner` lies inside `outer` (IPv4 or IPv6). */
export function withinCidr(outer: string, inner: string): boolean {
  if (!outer.includes(":")) return !inner.includes(":") && cidrContains(outer, inner);
  const o = v6(outer);
  const i = v6(inner);
  if (!o || !i || i[1] < o[1]) return false;
  const hostBits = BigInt(128 - o[1]);
  return (i[0] >> hostBits) << hostBits === o[0];
}

const world = (c: string) => c.trim() === "0.0.0.0/0" || c.trim() === "::/0";

/** The security groups a Service names in `…-security-groups`: by the engine's dependencies, else by id or name. */
function namedGroups(resources: readonly PolicyResource[], svc: PolicyResource, refs: string[]): PolicyResource[] {
  const deps = (svc.propertyDependencies.metadata ?? []).filter((r) => r.type === SG_TYPE);
  const byRef = refs.map((ref) => findReferenced(resources, { ...svc, propertyDependencies: {} }, "metadata", ref, SG_TYPE)).filter((r): r is PolicyResource => r !== undefined);
  return [...new Set([...deps, ...byRef])];
}

/** The ingress rules on `sg`: its inline ones and every rule resource whose securityGroupId is it. */
function rulesOf(resources: readonly PolicyResource[], sg: PolicyResource): { r: PolicyResource; props: Props }[] {
  const out: { r: PolicyResource; props: Props }[] = [{ r: sg, props: sg.props as Props }];
  for (const r of resources) {
    if (r.type === SG_TYPE || !SG_TYPES.includes(r.type)) continue;
    const p = r.props as Props;
    if (findReferenced(resources, r, "securityGroupId", str(p.securityGroupId), SG_TYPE) === sg) out.push({ r, props: p });
  }
  return out;
}

export const azHealthFromRoute53Only: StackValidationPolicy = {
  name: "az-health-from-route53-only",
  description:
    "The L1 NLBs' /az/health listener (:8081) admits Route53's health checkers only (ROUTE53_HEALTHCHECKS of AWS's ip-ranges.json, the committed snapshot contracts/route53-healthcheck-ranges.json): the NLB Service names a frontend security group of the stack (aws-load-balancer-security-groups) whose :8081 sources all lie inside those ranges, and no security group opens :8081 to 0.0.0.0/0, ::/0 or another public block (L3 zone tier: nobody else can exhaust the listener until the checkers time out and fail a healthy AZ over).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      port: { type: "integer", default: PORTS.l1AzHealth, description: "The /az/health listener's port." },
      allowedCidrs: {
        type: "array",
        items: { type: "string" },
        default: [...checkerCidrs().ipv4, ...checkerCidrs().ipv6],
        description: "Sources :8081 may admit (a block inside one counts): the health checkers' ranges.",
      },
    },
  },
  validateStack: (args, reportViolation) => {
    const { port, allowedCidrs } = args.getConfig<AzHealthConfig>();
    const range = { name: "/az/health", from: port, to: port };
    const allowed = (c: string) => allowedCidrs.some((a) => withinCidr(a, c.trim()));
    const judged = new Set<string>();
    /** An NLB frontend group's rule: every :8081 source inside the checkers' ranges. */
    const judge = (what: string, r: PolicyResource, props: Props) => {
      for (const ingress of ingressesOf(r.type, props)) {
        if (!opensPorts(ingress, range)) continue;
        if (ingress.sourceProperty) reportViolation(`${what} admits a security group on :${port} (${ingress.sourceProperty}); only Route53's health checkers may reach /az/health.`, r.urn);
        for (const c of ingress.cidrs.filter((x) => !allowed(x))) {
          reportViolation(
            world(c)
              ? `${what} opens :${port} (/az/health) to ${c}: anyone can hold its connections until Route53's checkers time out; admit only the ROUTE53_HEALTHCHECKS ranges (contracts/route53-healthcheck-ranges.json).`
              : `${what} opens :${port} (/az/health) to ${c}, outside Route53's health checkers' ranges (contracts/route53-healthcheck-ranges.json).`,
            r.urn,
          );
        }
      }
    };
    for (const svc of args.resources) {
      if (svc.type !== SERVICE_TYPE) continue;
      const p = svc.props as Props;
      const spec = record(p.spec);
      if (str(spec?.type) !== "LoadBalancer") continue;
      if (!list(spec?.ports).some((x) => num(record(x)?.port) === port)) continue;
      const annotations = stringMap(record(p.metadata)?.annotations);
      const refs = (annotations[`${LB}-security-groups`] ?? "").split(",").map((x) => x.trim()).filter(Boolean);
      if (refs.length === 0) {
        const ranges = strings(spec?.loadBalancerSourceRanges);
        const outside = ranges.filter((c) => !allowed(c));
        if (ranges.length === 0 || outside.length > 0) {
          reportViolation(
            `Service ${svc.name} exposes /az/health (:${port}) on its NLB ${ranges.length === 0 ? "to 0.0.0.0/0 (no frontend security group: the load balancer controller opens every listener to the world)" : `to ${outside.join(", ")}`}; name the stack's NLB frontend group in ${LB}-security-groups (infra/fences.ts nlbFrontend), which admits Route53's health checkers only.`,
            svc.urn,
          );
        }
        continue;
      }
      // A group several NLBs share (one per AZ) is judged once, under the first Service that names it.
      const groups = namedGroups(args.resources, svc, refs).filter((g) => !judged.has(g.urn));
      for (const sg of groups) {
        let admitsCheckers = false;
        for (const { r, props } of rulesOf(args.resources, sg)) {
          judged.add(r.urn);
          judge(`Security group ${sg.name}${r === sg ? "" : ` (rule ${r.name})`}, the NLB frontend of ${svc.name},`, r, props);
          if (ingressesOf(r.type, props).some((i) => opensPorts(i, range) && i.cidrs.some(allowed))) admitsCheckers = true;
        }
        if (!admitsCheckers) reportViolation(`Security group ${sg.name}, the NLB frontend of ${svc.name}, admits none of Route53's health checkers on :${port}: every health check of the AZ fails.`, sg.urn);
      }
    }
    // Any other group: :8081 never to the world or another public block.
    for (const r of args.resources) {
      if (!SG_TYPES.includes(r.type) || judged.has(r.urn)) continue;
      for (const ingress of ingressesOf(r.type, r.props as Props)) {
        if (!opensPorts(ingress, range)) continue;
        for (const c of ingress.cidrs.filter((x) => !allowed(x) && isPublicCidr(x))) {
          reportViolation(`${r.name} opens :${port} (/az/health) to ${c}, outside Route53's health checkers' ranges (contracts/route53-healthcheck-ranges.json).`, r.urn);
        }
      }
    }
  },
};
