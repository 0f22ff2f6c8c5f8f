import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "./problems";
import { tagged } from "./tags";

/**
 * What the agent's actuator may call (docs/actuators.md), and nothing else. The policy pack
 * (policies/iam.ts) holds the agent role to this list.
 */
export const AGENT_ACTIONS = Object.freeze({
  /** Reads; Auto Scaling has no resource-level permission for Describe, and ARC none for List. */
  anyResource: ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScheduledActions", "autoscaling:DescribeScalingActivities", "arc-zonal-shift:ListZonalShifts"],
  /** Writes on the standby AZ's groups only. */
  standbyGroups: [
    "autoscaling:UpdateAutoScalingGroup",
    "autoscaling:SuspendProcesses",
    "autoscaling:ResumeProcesses",
    "autoscaling:CreateOrUpdateTags",
    "autoscaling:DeleteTags",
  ],
  /** Shifts on the configured load balancers only. */
  shiftResources: [
    "arc-zonal-shift:StartZonalShift",
    "arc-zonal-shift:UpdateZonalShift",
    "arc-zonal-shift:CancelZonalShift",
    "arc-zonal-shift:GetManagedResource",
  ],
});

/** Tag that marks the role as the agent's, for the policy pack. */
export const AGENT_ROLE_TAG = Object.freeze({ key: "llm-ha.io/identity", value: "agent" });

export interface AgentIamArgs {
  /** EKS cluster name; the role is `<clusterName>-agent`. Required. */
  clusterName: string;
  /** Region of the groups and load balancers. Required. */
  region: string;
  /** The cluster's OIDC provider (IRSA). Required. */
  oidcProviderArn: pulumi.Input<string>;
  /** Its issuer URL (`https://oidc.eks.<region>.amazonaws.com/id/…`). Required. */
  oidcProviderUrl: pulumi.Input<string>;
  /** Namespace and name of the agent's ServiceAccount. Required. */
  namespace: string;
  serviceAccountName: string;
  /** Names of the standby AZ's Auto Scaling groups (wake/release). Default none. */
  standbyAsgNames?: pulumi.Input<string>[];
  /** Load balancer ARNs the agent may zonal-shift. Default none. */
  shiftResources?: string[];
}

/**
 * The agent's AWS identity through IRSA: an IAM role only the agent's ServiceAccount can
 * assume (trust: the cluster's OIDC provider, `sub` = `system:serviceaccount:<ns>:<sa>`,
 * `aud` = `sts.amazonaws.com`), with one inline policy granting the actuator's calls on
 * exactly the standby groups and the configured load balancers.
 */
export class AgentIam extends pulumi.ComponentResource {
  readonly role: aws.iam.Role;
  readonly roleArn: pulumi.Output<string>;

  constructor(name: string, args: AgentIamArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:AgentIam", name, {}, opts);
    this.role = createAgentIam(name, args, this);
    this.roleArn = this.role.arn;
    this.registerOutputs({ roleArn: this.roleArn });
  }
}

/** The IRSA trust policy for one ServiceAccount. */
export function irsaTrustPolicy(providerArn: string, providerUrl: string, namespace: string, serviceAccount: string): string {
  const issuer = providerUrl.replace(/^https:\/\//, "");
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Federated: providerArn },
        Action: "sts:AssumeRoleWithWebIdentity",
        Condition: {
          StringEquals: { [`${issuer}:sub`]: `system:serviceaccount:${namespace}:${serviceAccount}`, [`${issuer}:aud`]: "sts.amazonaws.com" },
        },
      },
    ],
  });
}

/** The permission policy: one statement per resource scope, none with a write on `*`. */
export function agentPolicy(account: string, region: string, asgNames: string[], shiftResources: string[]): string {
  const statements: Record<string, unknown>[] = [
    // Describe/List cannot be scoped by resource in IAM; they only read.
    { Sid: "ReadState", Effect: "Allow", Action: [...AGENT_ACTIONS.anyResource], Resource: "*" },
  ];
  if (asgNames.length > 0) {
    statements.push({
      Sid: "WakeStandbyGroups",
      Effect: "Allow",
      Action: [...AGENT_ACTIONS.standbyGroups],
      // The `*` is the group's id (a UUID the ARN carries); the name pins the group.
      Resource: asgNames.map((n) => `arn:aws:autoscaling:${region}:${account}:autoScalingGroup:*:autoScalingGroupName/${n}`),
    });
  }
  if (shiftResources.length > 0) {
    statements.push({ Sid: "ShiftZoneLoadBalancers", Effect: "Allow", Action: [...AGENT_ACTIONS.shiftResources], Resource: [...shiftResources] });
  }
  return JSON.stringify({ Version: "2012-10-17", Statement: statements });
}

export function createAgentIam(name: string, args: AgentIamArgs, parent: pulumi.Resource): aws.iam.Role {
  const p = new Problems();
  const asgs = args.standbyAsgNames ?? [];
  const lbs = args.shiftResources ?? [];
  if (asgs.length === 0 && lbs.length === 0) p.add("standbyAsgNames", "the agent needs standby groups or load balancers to act on, else no role");
  p.throwIfAny("AgentIam arguments");
  const opts = { parent };
  const role = new aws.iam.Role(
    `${name}-role`,
    {
      name: `${args.clusterName}-agent`,
      description: "llm-ha agent (IRSA): wakes the standby AZ's GPU groups and zonal-shifts the zones' load balancers",
      assumeRolePolicy: pulumi
        .all([args.oidcProviderArn, args.oidcProviderUrl])
        .apply(([arn, url]) => irsaTrustPolicy(arn, url, args.namespace, args.serviceAccountName)),
      tags: tagged({ [AGENT_ROLE_TAG.key]: AGENT_ROLE_TAG.value }),
    },
    opts,
  );
  const account = aws.getCallerIdentityOutput({}, opts).accountId;
  new aws.iam.RolePolicy(
    `${name}-actuator`,
    {
      role: role.name,
      policy: pulumi.all([account, pulumi.all(asgs)]).apply(([acct, names]) => agentPolicy(acct, args.region, names, lbs)),
    },
    opts,
  );
  return role;
}

export class AzIdLookupError extends Error {
  constructor(missing: string[]) {
    super(`the region reports no AZ id for ${missing.join(", ")} (aws.getAvailabilityZones)`);
    this.name = "AzIdLookupError";
  }
}

/**
 * `LLMHA_AZ_IDS` for the stack's AZs: names are shuffled per account, ARC wants the id
 * (`us-east-1a=use1-az4,…`), so it is read from the account at deploy time.
 */
export function azIdsSetting(azs: string[], opts?: pulumi.InvokeOutputOptions): pulumi.Output<string> {
  return aws.getAvailabilityZonesOutput({ allAvailabilityZones: false }, opts).apply((r) => {
    const ids = new Map((r.names ?? []).map((n, i) => [n, r.zoneIds?.[i]]));
    const missing = azs.filter((az) => !ids.get(az));
    if (missing.length) throw new AzIdLookupError(missing);
    return azs.map((az) => `${az}=${ids.get(az)}`).join(",");
  });
}
