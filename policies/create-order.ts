// Create order where AWS enforces it and a mock does not: a resource that names another by
// a plain string (a record name, a cluster name, a role, a principal) must depend on it, or
// the engine creates both at once and AWS refuses the first (Route53: "target was not
// found"; EKS: no access entry for the principal), or destroys them in the wrong order.
// Dependencies are what the engine orders by: explicit dependsOn and every input that is
// another resource's Output (the capture reads both off the register request).
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { findReferenced } from "./conventions";
import { list, record, str, type Props } from "./props";
import { EKS_CLUSTER_TYPE } from "./deployability";

export const RECORD_TYPE = "aws:route53/record:Record";
export const ROLE_TYPE = "aws:iam/role:Role";
export const ROLE_POLICY_ATTACHMENT_TYPE = "aws:iam/rolePolicyAttachment:RolePolicyAttachment";
export const ROLE_POLICY_TYPE = "aws:iam/rolePolicy:RolePolicy";
export const ACCESS_ENTRY_TYPE = "aws:eks/accessEntry:AccessEntry";
export const ACCESS_POLICY_ASSOCIATION_TYPE = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation";

/** True when `from` waits for `to`: directly or through a chain of dependencies. */
export function dependsOnTransitively(from: PolicyResource, to: PolicyResource): boolean {
  const seen = new Set<string>();
  const todo = [...from.dependencies];
  while (todo.length) {
    const r = todo.pop()!;
    if (r.urn === to.urn) return true;
    if (seen.has(r.urn)) continue;
    seen.add(r.urn);
    todo.push(...r.dependencies);
  }
  return false;
}

const dnsName = (n: string | undefined) => n?.toLowerCase().replace(/\.$/, "");

/** What `from` names by a plain string, and what AWS does when it is not there yet. */
interface Named {
  from: PolicyResource;
  targets: PolicyResource[];
  what: string;
  why: string;
}

/** Route53 aliases → the records of that name in that zone. */
function aliasTargets(rs: readonly PolicyResource[]): Named[] {
  const out: Named[] = [];
  for (const r of rs.filter((x) => x.type === RECORD_TYPE)) {
    for (const a of list((r.props as Props).aliases).map(record)) {
      const name = dnsName(str(a?.name));
      const zone = str(a?.zoneId);
      const targets = rs.filter((t) => t !== r && t.type === RECORD_TYPE && dnsName(str((t.props as Props).name)) === name && str((t.props as Props).zoneId) === zone);
      if (targets.length) {
        out.push({ from: r, targets, what: `aliases ${name}`, why: "Route53 refuses an alias whose target record does not exist yet (InvalidChangeBatch … target was not found)" });
      }
    }
  }
  return out;
}

/** The role a resource names in `property` (an ARN), resolved through its property dependencies or by ARN/name. */
function roleOf(rs: readonly PolicyResource[], r: PolicyResource, property: string): PolicyResource | undefined {
  return findReferenced(rs, r, property, str((r.props as Props)[property]), ROLE_TYPE);
}

/** The policies attached to a role: attachments and inline policies that name it. */
function policiesOf(rs: readonly PolicyResource[], role: PolicyResource): PolicyResource[] {
  const roleName = str((role.props as Props).name) ?? role.name;
  return rs.filter(
    (a) =>
      (a.type === ROLE_POLICY_ATTACHMENT_TYPE || a.type === ROLE_POLICY_TYPE) &&
      ((a.propertyDependencies.role ?? []).some((d) => d.urn === role.urn) || str((a.props as Props).role) === roleName),
  );
}

/** EKS clusters and node groups → their role's policies (attached before create, detached after delete). */
function rolePolicyTargets(rs: readonly PolicyResource[]): Named[] {
  const out: Named[] = [];
  const consumers: [string, string, string][] = [
    [EKS_CLUSTER_TYPE, "roleArn", "EKS cannot manage the cluster's ENIs without AmazonEKSClusterPolicy, and destroy detaches it first, leaving ENIs and security groups behind"],
    ["aws:eks/nodeGroup:NodeGroup", "nodeRoleArn", "nodes launched before the worker, CNI and ECR policies are attached cannot join (the group ends degraded)"],
  ];
  for (const [type, property, why] of consumers) {
    for (const r of rs.filter((x) => x.type === type)) {
      const role = roleOf(rs, r, property);
      const targets = role ? policiesOf(rs, role) : [];
      if (targets.length) out.push({ from: r, targets, what: `takes role ${role!.name} by ARN`, why });
    }
  }
  return out;
}

/** Resources that name an EKS cluster by `clusterName` → that cluster; access policy associations → their principal's entry. */
function clusterTargets(rs: readonly PolicyResource[]): Named[] {
  const out: Named[] = [];
  const clusters = rs.filter((c) => c.type === EKS_CLUSTER_TYPE);
  for (const r of rs.filter((x) => x.type.startsWith("aws:eks/") && x.type !== EKS_CLUSTER_TYPE)) {
    const name = str((r.props as Props).clusterName);
    const targets = clusters.filter((c) => (str((c.props as Props).name) ?? c.name) === name);
    if (targets.length) out.push({ from: r, targets, what: `names cluster ${name}`, why: "EKS answers ResourceNotFoundException for a cluster that does not exist yet" });
    if (r.type === ACCESS_POLICY_ASSOCIATION_TYPE) {
      const principal = str((r.props as Props).principalArn);
      const entries = rs.filter((e) => e.type === ACCESS_ENTRY_TYPE && str((e.props as Props).principalArn) === principal && str((e.props as Props).clusterName) === name);
      if (entries.length) out.push({ from: r, targets: entries, what: `names principal ${principal}`, why: "EKS refuses an access policy association for a principal without an access entry" });
    }
  }
  return out;
}

export const createOrderFollowsReferences: StackValidationPolicy = {
  name: "create-order-follows-references",
  description:
    "A resource that names another by a plain string (a Route53 alias's target record, the role of an EKS cluster or node group and that role's policies, an EKS cluster, an access entry's principal) depends on it, so the engine creates it after and deletes it before (L3: an alias created before its target stops every `pulumi up` with InvalidChangeBatch).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const rs = args.resources;
    for (const n of [...aliasTargets(rs), ...rolePolicyTargets(rs), ...clusterTargets(rs)]) {
      const missing = n.targets.filter((t) => !dependsOnTransitively(n.from, t));
      if (missing.length === 0) continue;
      reportViolation(
        `${n.from.type.split(":").pop()} ${n.from.name} ${n.what} but does not depend on ${missing.map((t) => t.name).join(", ")}: ${n.why}. Take the name from their Output or add them to dependsOn.`,
        n.from.urn,
      );
    }
  },
};
