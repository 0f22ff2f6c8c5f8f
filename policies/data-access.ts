// Who reaches the data tier, checked on the graph whether the stack created Redis and MSK or
// adopts the operator's (`llm-ha:redis.existing`, `llm-ha:kafka.existing`). With an adopted
// replication group or cluster there is no ReplicationGroup or MSK Cluster in the graph for
// redis-ha-encrypted and msk-ha-encrypted to read (llm-ha preflight checks those settings);
// what the stack still creates there, the role users, their memberships and the ingress rules,
// is checked here.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { WORKLOAD_ROLE_NAMES } from "../contracts/redis-roles";
import { ingressesOf, SG_TYPES, type PortRange } from "./network";
import { str, strings, type Props } from "./props";

const USER_TYPE = "aws:elasticache/user:User";
const USER_GROUP_TYPE = "aws:elasticache/userGroup:UserGroup";
const ASSOCIATION_TYPE = "aws:elasticache/userGroupAssociation:UserGroupAssociation";

export const redisRoleUsersInGroup: StackValidationPolicy = {
  name: "redis-role-users-in-group",
  description:
    "Every ElastiCache user of an llm-ha role (userName llmha-…) is a member of a user group, listed in the stack's UserGroup or added to an adopted one by a UserGroupAssociation; and where the stack adds users to an adopted group, every workload role has its user there (L2 cluster tier: a role with no user in the group cannot authenticate, so its agents, controller, L1 pods or fallback lose the registry and the lease).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const roles = WORKLOAD_ROLE_NAMES as readonly string[];
    const users = args.resources.filter((r) => r.type === USER_TYPE && roles.includes(str((r.props as Props).userName) ?? ""));
    const groups = args.resources.filter((r) => r.type === USER_GROUP_TYPE);
    const associations = args.resources.filter((r) => r.type === ASSOCIATION_TYPE);
    // Member by value or by reference: a group or association whose property is the user's Output names it even before the id is known.
    const names = (r: PolicyResource, property: string, u: PolicyResource) => strings((r.props as Props)[property]).includes(str((u.props as Props).userId) ?? "\0") || (r.propertyDependencies[property] ?? []).some((d) => d.urn === u.urn);
    const memberships = (u: PolicyResource) => [...groups.filter((g) => names(g, "userIds", u)), ...associations.filter((a) => names(a, "userId", u))];
    for (const u of users) {
      if (memberships(u).length === 0) {
        reportViolation(`ElastiCache user ${u.name} (${str((u.props as Props).userName)}) is in no user group: its clients cannot authenticate. List it in the stack's UserGroup, or associate it with the adopted group (llm-ha:redis.existing.userGroupId).`, u.urn);
      }
    }
    for (const group of new Set(associations.map((a) => str((a.props as Props).userGroupId)).filter((g): g is string => g !== undefined))) {
      const inGroup = associations.filter((a) => str((a.props as Props).userGroupId) === group);
      const missing = roles.filter((role) => !users.some((u) => str((u.props as Props).userName) === role && inGroup.some((a) => names(a, "userId", u))));
      if (missing.length > 0) reportViolation(`The adopted user group ${group} gets no user for ${missing.join(", ")}: those clients cannot authenticate. Set llm-ha:redisRolePasswords for every role.`);
    }
  },
};

/** Rules written for Redis or Kafka: a tcp range within one of these. */
const DATA_PORTS: readonly PortRange[] = Object.freeze([
  { name: "Redis", from: 6379, to: 6379 },
  { name: "Kafka", from: 9092, to: 9098 },
]);

export const dataIngressBySecurityGroup: StackValidationPolicy = {
  name: "data-ingress-by-security-group",
  description:
    "Every ingress rule written for Redis (6379) or Kafka (9092-9098), on the stack's own security groups or on an adopted replication group's or cluster's, lets in a security group by reference and no CIDR block (L2 cluster and L4 global tiers: only the pods and nodes in llm-ha's client groups reach the registry, the lease and the queue; an address range lets in whatever lands on it).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const r of args.resources.filter((x) => SG_TYPES.includes(x.type))) {
      for (const i of ingressesOf(r.type, r.props as Props)) {
        const range = DATA_PORTS.find((d) => (i.protocol === "tcp" || i.protocol === "6") && i.from >= d.from && i.to <= d.to);
        if (range === undefined) continue;
        if (i.cidrs.length > 0 || i.sourceProperty === undefined) {
          reportViolation(`${r.name} lets ${i.cidrs.length > 0 ? i.cidrs.join(" and ") : "no security group"} in on ${range.name} (${i.from === i.to ? i.from : `${i.from}-${i.to}`}): let in the clients' security groups by reference only (infra/fences.ts).`, r.urn);
        }
      }
    }
  },
};
