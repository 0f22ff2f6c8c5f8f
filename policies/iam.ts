// The agent's IAM role (IRSA) may wake the standby groups and shift the zones' load
// balancers, and nothing more: every GPU node runs an agent, so a broad grant there is a
// broad grant on every GPU node.
import { type PolicyResource, type StackValidationPolicy } from "@pulumi/policy";
import { findReferenced } from "./conventions";
import { joinWords, list, record, str, stringMap, strings, type Props } from "./props";

const ROLE_TYPE = "aws:iam/role:Role";
const ROLE_POLICY_TYPE = "aws:iam/rolePolicy:RolePolicy";
/** The tag infra/agent-iam.ts puts on the agent's role. */
export const AGENT_ROLE_TAG = { key: "llm-ha.io/identity", value: "agent" };

export interface AgentRoleConfig {
  allowedActions: string[];
  readOnlyActions: string[];
  tagScopedActions?: string[];
}

/** Whether a statement is held to the stack's own resources by `StringEquals aws:ResourceTag/Project`. */
function projectTagScoped(s: Props): boolean {
  const eq = record(record(s.Condition)?.StringEquals);
  return eq !== undefined && typeof eq["aws:ResourceTag/Project"] === "string" && eq["aws:ResourceTag/Project"] !== "" && !/[*?]/.test(eq["aws:ResourceTag/Project"]);
}

/** The statements of a policy document given as JSON text or as an object. */
export function statements(doc: unknown): Props[] {
  let d: unknown = doc;
  if (typeof doc === "string") {
    try {
      d = JSON.parse(doc);
    } catch {
      return [];
    }
  }
  const s = record(d)?.Statement;
  return (Array.isArray(s) ? s : [s]).map(record).filter((x): x is Props => x !== undefined);
}

/** A string or a list of strings, as IAM allows. */
export const oneOrMany = (v: unknown): string[] => (typeof v === "string" ? [v] : strings(list(v)));

function isAgentRole(role: PolicyResource | undefined): boolean {
  return role !== undefined && stringMap((role.props as Props).tags)[AGENT_ROLE_TAG.key] === AGENT_ROLE_TAG.value;
}

export const agentRoleLeastPrivilege: StackValidationPolicy = {
  name: "agent-role-least-privilege",
  description:
    "The agent's IAM role grants only the actuator's actions, and no write action on a wildcard Resource: \"*\" or any ARN whose name is only wildcards, read as IAM's glob (arn:aws:ec2:*:*:*) (L2 cluster and L3 zone tiers: the leader may wake the standby AZ, size the GPU groups created at zero on a reservation, and shift a zone's load balancers, nothing else, on every GPU node).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      allowedActions: {
        type: "array",
        items: { type: "string" },
        default: [
          "autoscaling:DescribeAutoScalingGroups",
          "autoscaling:DescribeScheduledActions",
          "autoscaling:DescribeScalingActivities",
          "autoscaling:UpdateAutoScalingGroup",
          "autoscaling:SuspendProcesses",
          "autoscaling:ResumeProcesses",
          "autoscaling:CreateOrUpdateTags",
          "autoscaling:DeleteTags",
          "arc-zonal-shift:ListZonalShifts",
          "arc-zonal-shift:GetManagedResource",
          "arc-zonal-shift:StartZonalShift",
          "arc-zonal-shift:UpdateZonalShift",
          "arc-zonal-shift:CancelZonalShift",
          "ec2:RebootInstances",
          "ec2:DescribeCapacityReservations",
          "autoscaling:DescribeAutoScalingInstances",
          "autoscaling:TerminateInstanceInAutoScalingGroup",
        ],
        description: "Every action the agent's role may allow.",
      },
      tagScopedActions: {
        type: "array",
        items: { type: "string" },
        default: ["ec2:RebootInstances"],
        description: "Write actions that may name a wildcard Resource when the statement is conditioned on the stack's own `Project` tag (`aws:ResourceTag/Project`): EC2 instance ARNs carry no name to pin.",
      },
      readOnlyActions: {
        type: "array",
        items: { type: "string" },
        default: [
          "autoscaling:DescribeAutoScalingGroups",
          "autoscaling:DescribeScheduledActions",
          "autoscaling:DescribeScalingActivities",
          "arc-zonal-shift:ListZonalShifts",
          "ec2:DescribeCapacityReservations",
          "autoscaling:DescribeAutoScalingInstances",
        ],
        description: "Actions that may be allowed on Resource \"*\" (IAM cannot scope them by resource).",
      },
    },
  },
  validateStack: (args, reportViolation) => {
    const { allowedActions, readOnlyActions, tagScopedActions } = args.getConfig<AgentRoleConfig>();
    const tagScoped = new Set((tagScopedActions ?? ["ec2:RebootInstances"]).map((a) => a.toLowerCase()));
    const allowed = new Set(allowedActions.map((a) => a.toLowerCase()));
    const readOnly = new Set(readOnlyActions.map((a) => a.toLowerCase()));
    for (const rp of args.resources) {
      if (rp.type !== ROLE_POLICY_TYPE) continue;
      const p = rp.props as Props;
      const role = findReferenced(args.resources, rp, "role", str(p.role), ROLE_TYPE);
      if (!isAgentRole(role)) continue;
      for (const s of statements(p.policy)) {
        if (s.Effect !== "Allow") continue;
        if (s.NotAction !== undefined || s.NotResource !== undefined) {
          reportViolation(`Agent role policy ${rp.name} uses ${s.NotAction !== undefined ? "NotAction" : "NotResource"}; list the actions and resources it allows.`, rp.urn);
          continue;
        }
        const actions = oneOrMany(s.Action);
        const beyond = actions.filter((a) => !allowed.has(a.toLowerCase()));
        if (beyond.length > 0) {
          reportViolation(`Agent role policy ${rp.name} allows ${joinWords(beyond)}, beyond the actuator's actions.`, rp.urn);
        }
        const wild = oneOrMany(s.Resource).filter(isWildcardResource);
        if (wild.length > 0) {
          const writes = actions.filter((a) => allowed.has(a.toLowerCase()) && !readOnly.has(a.toLowerCase()) && !(tagScoped.has(a.toLowerCase()) && projectTagScoped(s)));
          if (writes.length > 0) {
            reportViolation(`Agent role policy ${rp.name} allows ${joinWords(writes)} on Resource ${wild.map((r) => `"${r}"`).join(", ")}; name the standby groups and load balancers.`, rp.urn);
          }
        }
      }
    }
  },
};

/**
 * A Resource that names no particular resource, read as the glob IAM matches it with: `*`, an
 * ARN of any service (`arn:aws:*:…`), or one whose resource name is only wildcards
 * (`arn:aws:ec2:*:*:*`, `…:loadbalancer/net/*`, `…:autoScalingGroupName/*`). A wildcard inside a
 * named resource (an ASG ARN's group id) still names it.
 */
export function isWildcardResource(resource: string): boolean {
  const parts = resource.split(":");
  const onlyWild = (x: string) => /^[*?]*$/.test(x);
  if (parts[0] !== "arn" || parts.length < 6) return onlyWild(resource);
  if (onlyWild(parts[2])) return true;
  return onlyWild(parts.slice(5).join(":").split(/[/:]/).pop() ?? "");
}

/** The tag infra/workloads/fallback.ts puts on the L4 fallback's role. */
export const FALLBACK_ROLE_TAG = { key: "llm-ha.io/identity", value: "fallback" };
/** The ServiceAccount that role trusts (IRSA). */
export const FALLBACK_SERVICE_ACCOUNT = "llmha-fallback";
/** Any L4 queue topic: `llmha.<cluster>.requests` (agent/src/edge/fallback/queue.ts) on any MSK cluster. */
export const QUEUE_TOPIC_PATTERN = "arn:*:kafka:*:*:topic/*/*/llmha.*.requests";
/** The MSK data-plane actions that put records on a topic. */
export const KAFKA_WRITE_ACTIONS = ["kafka-cluster:WriteData", "kafka-cluster:WriteDataIdempotently"];

/**
 * Whether some string matches both IAM patterns (`*` any run, `?` one character), compared
 * case-insensitively: `kafka-cluster:*` and `kafka-cluster:WriteData` overlap,
 * `arn:aws:kafka:*:*:topic/c/u/*` and the queue topic pattern overlap.
 */
export function globsOverlap(a: string, b: string): boolean {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const memo = new Map<number, boolean>();
  const go = (i: number, j: number): boolean => {
    const k = i * (y.length + 1) + j;
    const hit = memo.get(k);
    if (hit !== undefined) return hit;
    let r: boolean;
    if (i === x.length && j === y.length) r = true;
    else if (i < x.length && x[i] === "*") r = go(i + 1, j) || (j < y.length && go(i, j + 1));
    else if (j < y.length && y[j] === "*") r = go(i, j + 1) || (i < x.length && go(i + 1, j));
    else r = i < x.length && j < y.length && (x[i] === y[j] || x[i] === "?" || y[j] === "?") && go(i + 1, j + 1);
    memo.set(k, r);
    return r;
  };
  return go(0, 0);
}

function isFallbackRole(role: PolicyResource | undefined): boolean {
  return role !== undefined && stringMap((role.props as Props).tags)[FALLBACK_ROLE_TAG.key] === FALLBACK_ROLE_TAG.value;
}

/** The write actions an Allow statement grants on a queue topic, or none. */
function queueWrites(s: Props, topics: readonly string[]): string[] {
  if (s.Effect !== "Allow") return [];
  const actions =
    s.NotAction !== undefined
      ? KAFKA_WRITE_ACTIONS.filter((w) => !oneOrMany(s.NotAction).some((a) => globsOverlap(a, w)))
      : KAFKA_WRITE_ACTIONS.filter((w) => oneOrMany(s.Action).some((a) => globsOverlap(a, w)));
  if (actions.length === 0) return [];
  // NotResource grants everything it does not list: taken as reaching the topic.
  const onTopic = s.NotResource !== undefined || oneOrMany(s.Resource).some((r) => topics.some((t) => globsOverlap(r, t)));
  return onTopic ? actions : [];
}

export const mskQueueWriterOnlyFallback: StackValidationPolicy = {
  name: "msk-queue-writer-only-fallback",
  description:
    "Only the L4 fallback's IAM role (tagged llm-ha.io/identity=fallback, assumable by its ServiceAccount only) may write the L4 queue topic llmha.<cluster>.requests (kafka-cluster:WriteData): no other role, user, group or managed policy grants it, wildcards included (L4 global tier: a request is answered 202 only once it is on that topic, and replay trusts every record on it to be one).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    // The topics the fallback's own policies name (a stack may set another topic name), and any queue topic.
    const topics = [QUEUE_TOPIC_PATTERN];
    const docs: { r: PolicyResource; doc: unknown; fallback: boolean; what: string }[] = [];
    for (const r of args.resources) {
      const p = r.props as Props;
      if (r.type === ROLE_POLICY_TYPE) {
        const role = findReferenced(args.resources, r, "role", str(p.role), ROLE_TYPE);
        docs.push({ r, doc: p.policy, fallback: isFallbackRole(role), what: `Role policy ${r.name}` });
      } else if (r.type === ROLE_TYPE) {
        for (const ip of list(p.inlinePolicies)) docs.push({ r, doc: record(ip)?.policy, fallback: isFallbackRole(r), what: `Inline policy of role ${r.name}` });
      } else if (r.type === "aws:iam/policy:Policy") {
        docs.push({ r, doc: p.policy, fallback: false, what: `Managed policy ${r.name}` });
      } else if (r.type === "aws:iam/userPolicy:UserPolicy" || r.type === "aws:iam/groupPolicy:GroupPolicy") {
        docs.push({ r, doc: p.policy, fallback: false, what: `${r.type === "aws:iam/userPolicy:UserPolicy" ? "User" : "Group"} policy ${r.name}` });
      }
    }
    for (const d of docs.filter((x) => x.fallback)) {
      for (const s of statements(d.doc)) {
        if (oneOrMany(s.Action).some((a) => KAFKA_WRITE_ACTIONS.some((w) => globsOverlap(a, w)))) {
          for (const res of oneOrMany(s.Resource)) if (res.includes(":topic/") && !topics.includes(res)) topics.push(res);
        }
      }
    }
    for (const d of docs) {
      if (d.fallback) continue;
      for (const s of statements(d.doc)) {
        const writes = queueWrites(s, topics);
        if (writes.length) {
          reportViolation(`${d.what} allows ${joinWords(writes)} on the L4 queue topic; only the fallback's role may write it.`, d.r.urn);
          break;
        }
      }
    }
    // The fallback's role itself: assumable by the fallback's ServiceAccount only.
    for (const r of args.resources) {
      if (r.type !== ROLE_TYPE || !isFallbackRole(r)) continue;
      const trust = (r.props as Props).assumeRolePolicy;
      if (trust === undefined) continue; // unknown during a first preview
      for (const s of statements(trust)) {
        if (s.Effect !== "Allow") continue;
        const principal = record(s.Principal);
        const federated = principal ? oneOrMany(principal.Federated) : [];
        const others = principal ? Object.keys(principal).filter((k) => k !== "Federated") : ["*"];
        const subs = Object.entries(record(record(s.Condition)?.StringEquals) ?? {}).filter(([k]) => k.endsWith(":sub"));
        const onlySa = subs.length > 0 && subs.every(([, v]) => oneOrMany(v).length > 0 && oneOrMany(v).every((x) => /^system:serviceaccount:[^:*?]+:/.test(x) && x.endsWith(`:${FALLBACK_SERVICE_ACCOUNT}`)));
        if (others.length > 0 || federated.length === 0 || !onlySa) {
          reportViolation(`Fallback role ${r.name} may be assumed by more than the ${FALLBACK_SERVICE_ACCOUNT} ServiceAccount (its trust must be the cluster's OIDC provider with StringEquals :sub system:serviceaccount:<namespace>:${FALLBACK_SERVICE_ACCOUNT}).`, r.urn);
          break;
        }
      }
    }
  },
};
