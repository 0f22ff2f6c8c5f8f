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
}

/** The statements of a policy document given as JSON text or as an object. */
function statements(doc: unknown): Props[] {
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
const oneOrMany = (v: unknown): string[] => (typeof v === "string" ? [v] : strings(list(v)));

function isAgentRole(role: PolicyResource | undefined): boolean {
  return role !== undefined && stringMap((role.props as Props).tags)[AGENT_ROLE_TAG.key] === AGENT_ROLE_TAG.value;
}

export const agentRoleLeastPrivilege: StackValidationPolicy = {
  name: "agent-role-least-privilege",
  description:
    "The agent's IAM role grants only the actuator's actions, and no write action on Resource \"*\" (L2 cluster and L3 zone tiers: the leader may wake the standby AZ and shift a zone's load balancers, nothing else, on every GPU node).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      allowedActions: {
        type: "array",
        items: { type: "string" },
        default: [
          "autoscaling:DescribeAutoScalingGroups",
          "autoscaling:DescribeScheduledActions",
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
        ],
        description: "Every action the agent's role may allow.",
      },
      readOnlyActions: {
        type: "array",
        items: { type: "string" },
        default: ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScheduledActions", "arc-zonal-shift:ListZonalShifts"],
        description: "Actions that may be allowed on Resource \"*\" (IAM cannot scope them by resource).",
      },
    },
  },
  validateStack: (args, reportViolation) => {
    const { allowedActions, readOnlyActions } = args.getConfig<AgentRoleConfig>();
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
        if (oneOrMany(s.Resource).includes("*")) {
          const writes = actions.filter((a) => allowed.has(a.toLowerCase()) && !readOnly.has(a.toLowerCase()));
          if (writes.length > 0) {
            reportViolation(`Agent role policy ${rp.name} allows ${joinWords(writes)} on Resource "*"; name the standby groups and load balancers.`, rp.urn);
          }
        }
      }
    }
  },
};
