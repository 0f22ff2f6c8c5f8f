// EKS control-plane logs are how an L2/L3 incident is reconstructed afterwards (who
// drained, which node went NotReady when). Advisory: they do not move traffic.
import * as aws from "@pulumi/aws";
import { validateResourceOfType, type PolicyResource, type ResourceValidationPolicy, type StackValidationPolicy } from "@pulumi/policy";
import { findReferenced } from "./conventions";
import { dependsOnTransitively } from "./create-order";
import { EKS_CLUSTER_TYPE } from "./deployability";
import { list, num, record, str, strings, type Props } from "./props";

export interface ControlPlaneLoggingConfig {
  requiredLogTypes: string[];
}

export const eksControlPlaneLogging: ResourceValidationPolicy = {
  name: "eks-control-plane-logging",
  description:
    "EKS clusters send the api, audit and authenticator control-plane logs to CloudWatch (L2 cluster and L3 zone tiers: a failover can be reconstructed from what the control plane saw).",
  enforcementLevel: "advisory",
  configSchema: {
    properties: {
      requiredLogTypes: {
        type: "array",
        items: { type: "string", enum: ["api", "audit", "authenticator", "controllerManager", "scheduler"] },
        default: ["api", "audit", "authenticator"],
        description: "Control-plane log types that must be enabled.",
      },
    },
  },
  validateResource: validateResourceOfType(aws.eks.Cluster, (cluster, args, reportViolation) => {
    const { requiredLogTypes } = args.getConfig<ControlPlaneLoggingConfig>();
    const enabled = strings(cluster.enabledClusterLogTypes);
    const missing = requiredLogTypes.filter((t) => !enabled.includes(t));
    if (missing.length > 0) {
      reportViolation(`EKS cluster ${args.name} does not enable the ${missing.join(", ")} control-plane log${missing.length > 1 ? "s" : ""}.`);
    }
  }),
};

const KMS_KEY_TYPE = "aws:kms/key:Key";
const ROLE_TYPE = "aws:iam/role:Role";
const ROLE_POLICY_TYPE = "aws:iam/rolePolicy:RolePolicy";
const LOG_GROUP_TYPE = "aws:cloudwatch/logGroup:LogGroup";

/** What the EKS user guide asks the cluster role to hold on a Secrets key (envelope encryption). */
export const EKS_SECRETS_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"] as const;

interface Statement {
  Effect?: unknown;
  Action?: unknown;
  Resource?: unknown;
  Principal?: unknown;
}

function statements(doc: unknown): Statement[] {
  let d = doc;
  if (typeof d === "string") {
    try {
      d = JSON.parse(d);
    } catch {
      return [];
    }
  }
  const s = record(d)?.Statement;
  return (Array.isArray(s) ? s : s === undefined ? [] : [s]).map((x) => (record(x) ?? {}) as Statement);
}

const asList = (v: unknown): string[] => (typeof v === "string" ? [v] : strings(v));

/** The actions of `wanted` that the Allow statements (filtered by `applies`) leave out. */
function missingActions(sts: Statement[], applies: (s: Statement) => boolean): string[] {
  const allowed = sts.filter((s) => s.Effect === "Allow" && applies(s)).flatMap((s) => asList(s.Action).map((a) => a.toLowerCase()));
  return EKS_SECRETS_KEY_ACTIONS.filter((a) => !allowed.some((x) => x === "*" || x === "kms:*" || x === a.toLowerCase()));
}

export const eksSecretsKeyGrantsClusterRole: StackValidationPolicy = {
  name: "eks-secrets-key-grants-cluster-role",
  description:
    "An EKS cluster that encrypts its Secrets with a KMS key of the stack lets its cluster role use that key (kms:Encrypt, kms:Decrypt, kms:ListGrants, kms:DescribeKey), by an inline policy on the role naming the key or by the key's policy naming the role, and is created after that grant (L2 cluster tier: without it the cluster cannot be created, and a control plane that loses it cannot read a Secret).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const rs = args.resources;
    for (const c of rs.filter((r) => r.type === EKS_CLUSTER_TYPE)) {
      const p = c.props as Props;
      for (const e of list(p.encryptionConfig).concat(record(p.encryptionConfig) ? [p.encryptionConfig] : []).map(record)) {
        const keyArn = str(record(e?.provider)?.keyArn);
        const key = findReferenced(rs, c, "encryptionConfig", keyArn, KMS_KEY_TYPE);
        const role = findReferenced(rs, c, "roleArn", str(p.roleArn), ROLE_TYPE);
        // A key or role from outside the stack: its policies are not here to judge.
        if (key === undefined || role === undefined) continue;
        const roleArn = str(p.roleArn);
        const byKeyPolicy = missingActions(statements((key.props as Props).policy), (s) => {
          const principals = asList(record(s.Principal)?.AWS);
          return (roleArn !== undefined && principals.includes(roleArn)) || (key.propertyDependencies.policy ?? []).some((d) => d.urn === role.urn);
        });
        const roleName = str((role.props as Props).name) ?? role.name;
        const grants = rs.filter(
          (a) =>
            a.type === ROLE_POLICY_TYPE &&
            ((a.propertyDependencies.role ?? []).some((d) => d.urn === role.urn) || str((a.props as Props).role) === roleName),
        );
        const namesKey = (a: PolicyResource, s: Statement) =>
          asList(s.Resource).some((r) => r === "*" || (keyArn !== undefined && r === keyArn)) || (a.propertyDependencies.policy ?? []).some((d) => d.urn === key.urn);
        const byRole = grants.map((a) => ({ a, missing: missingActions(statements((a.props as Props).policy), (s) => namesKey(a, s)) }));
        const granted = byRole.find((g) => g.missing.length === 0);
        if (byKeyPolicy.length === 0) continue;
        if (granted === undefined) {
          const missing = byRole.length ? byRole.reduce((m, g) => (g.missing.length < m.length ? g.missing : m), byRole[0].missing) : byKeyPolicy;
          reportViolation(
            `EKS cluster ${c.name} encrypts its Secrets with key ${key.name}, but its role ${role.name} is not granted ${missing.join(", ")} on it (an inline policy on the role naming the key, or the key's policy naming the role): EKS cannot create the cluster, or read a Secret.`,
            c.urn,
          );
        } else if (!dependsOnTransitively(c, granted.a)) {
          reportViolation(`EKS cluster ${c.name} does not depend on ${granted.a.name}, the grant of its Secrets key: the engine may create the cluster first, and EKS then refuses the key. Add it to dependsOn.`, c.urn);
        }
      }
    }
  },
};

export interface ControlPlaneLogRetentionConfig {
  minRetentionDays: number;
}

export const eksControlPlaneLogRetention: StackValidationPolicy = {
  name: "eks-control-plane-log-retention",
  description:
    "An EKS cluster that sends control-plane logs has its log group /aws/eks/<name>/cluster in the stack, with a retention, and is created after it (L2/L3: otherwise EKS creates the group itself on the first log line, with no retention: kept and billed forever, and a later `pulumi up` that adds it fails with ResourceAlreadyExistsException until it is imported).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      minRetentionDays: { type: "integer", minimum: 1, default: 1, description: "Fewest days the control-plane logs are kept." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { minRetentionDays } = args.getConfig<ControlPlaneLogRetentionConfig>();
    for (const c of args.resources.filter((r) => r.type === EKS_CLUSTER_TYPE)) {
      const p = c.props as Props;
      if (strings(p.enabledClusterLogTypes).length === 0) continue;
      const name = str(p.name) ?? c.name;
      const groupName = `/aws/eks/${name}/cluster`;
      const group = args.resources.find((r) => r.type === LOG_GROUP_TYPE && str((r.props as Props).name) === groupName);
      if (group === undefined) {
        reportViolation(`EKS cluster ${c.name} sends control-plane logs, but the stack has no log group ${groupName}: EKS creates it with no retention (kept forever). Create it with retentionInDays, and make the cluster depend on it.`, c.urn);
        continue;
      }
      const days = num((group.props as Props).retentionInDays);
      if (days === undefined || days < minRetentionDays) {
        reportViolation(`Log group ${groupName} of EKS cluster ${c.name} has ${days === undefined ? "no retentionInDays (never expires)" : `retentionInDays ${days}`}; set at least ${minRetentionDays}.`, c.urn);
      }
      if (!dependsOnTransitively(c, group)) {
        reportViolation(`EKS cluster ${c.name} does not depend on its log group ${groupName}: EKS may create the group first (without retention) and the stack's create then fails with ResourceAlreadyExistsException.`, c.urn);
      }
    }
  },
};
