import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "./problems";
import { tagged } from "./tags";
import { LABELS } from "./names";

/**
 * What the controller's actuator may call (docs/actuators.md), and nothing else. The policy
 * pack (policies/iam.ts) holds the role to this list. Only the controller Deployment on the
 * system nodes holds the role: GPU-node agents hold no AWS credential.
 */
export const AGENT_ACTIONS = Object.freeze({
  /** Reads; Auto Scaling has no resource-level permission for Describe, and ARC none for List. */
  anyResource: [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeScheduledActions",
    "autoscaling:DescribeScalingActivities",
    "arc-zonal-shift:ListZonalShifts",
    "ec2:DescribeCapacityReservations",
  ],
  /** Writes on the standby AZ's groups only (resizes bounded, tags only the pre-wake one: see `agentPolicy`). */
  standbyGroups: [
    "autoscaling:UpdateAutoScalingGroup",
    "autoscaling:SuspendProcesses",
    "autoscaling:ResumeProcesses",
    "autoscaling:CreateOrUpdateTags",
    "autoscaling:DeleteTags",
  ],
  /** The repair ladder's reboot, on the stack's own GPU instances only (tag conditions: see `agentPolicy`). */
  gpuInstances: ["ec2:RebootInstances"],
  /** The repair ladder's replacement, on the stack's GPU groups only: find an instance's group (a read), surge it (bounded resize, one tag), terminate through it. */
  repairGroups: ["autoscaling:DescribeAutoScalingInstances", "autoscaling:UpdateAutoScalingGroup", "autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags", "autoscaling:TerminateInstanceInAutoScalingGroup"],
});

/** The tags `RebootGpuInstances` is conditioned on: infra/tags.ts `commonTags` and the GPU class every GPU instance carries (gpu-node-groups.ts). */
const PROJECT_TAG = "Project";
const ENVIRONMENT_TAG = "Environment";
const GPU_CLASS_TAG = LABELS.gpuClass;

/** Tag that marks the role as the agent's, for the policy pack. */
export const AGENT_ROLE_TAG = Object.freeze({ key: "llm-ha.io/identity", value: "agent" });

/** The one ASG tag the actuator writes (agent/src/fleet/actuators/aws/standby.ts `PRE_WAKE_TAG`; a test holds them equal). */
export const PRE_WAKE_TAG_KEY = "llm-ha:pre-wake";
/** The ASG tag a repair's surge writes (agent/src/fleet/actuators/repair-asg.ts `REPAIR_SURGE_TAG`; a test holds them equal). */
export const REPAIR_SURGE_TAG_KEY = "llm-ha:repair-surge";
/** The ASG tag the reserved-group sizing writes (agent/src/fleet/actuators/aws/reserved.ts `RESERVED_SIZED_TAG`; a test holds them equal). */
export const RESERVED_SIZED_TAG_KEY = "llm-ha:reserved-sized";
/** The tag EKS puts on every managed node group's Auto Scaling group: the grant is scoped to the stack's cluster by it. */
export const EKS_CLUSTER_TAG = "eks:cluster-name";

/** A group the controller may resize, and the largest size it may give it. */
export interface BoundedGroup {
  name: string;
  /** Largest `MinSize`/`MaxSize` the role may set (the group's own `maxSize`). */
  maxSize: number;
}

export class AgentIamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AgentIamError";
  }
}

export interface AgentIamArgs {
  /** EKS cluster name; the role is `<clusterName>-agent`. Required. */
  clusterName: string;
  /** Region of the groups and load balancers. Required. */
  region: string;
  /** The cluster's OIDC provider (IRSA). Required. */
  oidcProviderArn: pulumi.Input<string>;
  /** Its issuer URL (`https://oidc.eks.<region>.amazonaws.com/id/…`). Required. */
  oidcProviderUrl: pulumi.Input<string>;
  /** Namespace and name of the controller's ServiceAccount, the only one trusted (never the GPU-node agents'). Required. */
  namespace: string;
  serviceAccountName: string;
  /** The standby AZ's Auto Scaling groups and their fallbacks (wake/release), each with its size bound. Default none. */
  standbyGroups?: { name: pulumi.Input<string>; maxSize: number }[];
  /** The GPU groups created at zero on a reservation, which the leader sizes once it is active, each with its size bound. Default none. */
  reservedGroups?: { name: pulumi.Input<string>; maxSize: number }[];
  /**
   * The repair ladder's `act` mode reboots GPU nodes (EC2 `RebootInstances`): granted only on
   * instances carrying this stack's `Project` and `Environment` tags and the GPU-class tag (the
   * stack's GPU nodes). Default false (advise mode needs no grant).
   */
  rebootGpuInstances?: boolean;
  /**
   * The repair ladder's `act` mode replaces GPU nodes through their groups (surge, then terminate):
   * every GPU group of the stack, each with its size bound. Default none.
   */
  repairGroups?: { name: pulumi.Input<string>; maxSize: number }[];
}

/**
 * The controller's AWS identity through IRSA: an IAM role only the controller's ServiceAccount can
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

/**
 * The permission policy: one statement per resource scope, none with a write on `*`. What IAM
 * can hold, it holds, so a stolen credential is bounded whatever the code does:
 * - a resize names the group, the cluster's tag (`autoscaling:ResourceTag/eks:cluster-name`)
 *   and bounds `autoscaling:MinSize`/`MaxSize` by the group's own maximum (Auto Scaling refuses
 *   a desired capacity above the max, so it is bounded too). A request without `MaxSize`
 *   carries no key, the numeric condition does not match, and it is refused.
 *   `SetDesiredCapacity` (which has no size key) is not granted;
 * - tags: only `llm-ha:pre-wake` (`aws:TagKeys`), so the role cannot retag a group into or out of
 *   its own scope;
 */
export function agentPolicy(
  account: string, region: string, clusterName: string, groups: BoundedGroup[], reboot?: { project: string; environment: string }, reserved: BoundedGroup[] = [], repair: BoundedGroup[] = [],
): string {
  const statements: Record<string, unknown>[] = [
    // Describe/List cannot be scoped by resource in IAM; they only read.
    { Sid: "ReadState", Effect: "Allow", Action: [...AGENT_ACTIONS.anyResource], Resource: "*" },
  ];
  // The `*` is the group's id (a UUID the ARN carries); the name pins the group.
  const arn = (n: string) => `arn:aws:autoscaling:${region}:${account}:autoScalingGroup:*:autoScalingGroupName/${n}`;
  const inCluster = { StringEquals: { [`autoscaling:ResourceTag/${EKS_CLUSTER_TAG}`]: clusterName } };
  // One tag key only (`aws:TagKeys`): the role cannot retag a group into or out of its own scope.
  const tagOnly = (sid: string, actions: string[], resources: string[], key: string) => ({
    Sid: sid, Effect: "Allow", Action: actions, Resource: resources, Condition: { ...inCluster, "ForAllValues:StringEquals": { "aws:TagKeys": [key] } },
  });
  const resize = (sid: string) => (g: BoundedGroup, i: number) =>
    statements.push({
      Sid: `${sid}${i}`,
      Effect: "Allow",
      Action: ["autoscaling:UpdateAutoScalingGroup"],
      Resource: arn(g.name),
      Condition: { ...inCluster, NumericLessThanEquals: { "autoscaling:MaxSize": String(g.maxSize), "autoscaling:MinSize": String(g.maxSize) } },
    });
  groups.forEach(resize("ResizeStandbyGroup"));
  // The groups created at zero on a reservation: sized once it is active, to zero when it ends.
  reserved.forEach(resize("SizeReservedGroup"));
  if (reserved.length > 0) {
    statements.push(tagOnly("TagReservedSized", ["autoscaling:CreateOrUpdateTags"], reserved.map((g) => arn(g.name)), RESERVED_SIZED_TAG_KEY));
  }
  if (groups.length > 0) {
    const resources = groups.map((g) => arn(g.name));
    statements.push({ Sid: "HoldStandbySchedule", Effect: "Allow", Action: ["autoscaling:SuspendProcesses", "autoscaling:ResumeProcesses"], Resource: resources, Condition: inCluster });
    statements.push(tagOnly("TagPreWakeSizes", ["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"], resources, PRE_WAKE_TAG_KEY));
  }
  if (reboot) {
    // Instance ARNs carry no name to pin: the stack's own tags do (an instance of another stack or project is refused).
    statements.push({
      Sid: "RebootGpuInstances",
      Effect: "Allow",
      Action: ["ec2:RebootInstances"],
      Resource: `arn:aws:ec2:${region}:${account}:instance/*`,
      Condition: {
        StringEquals: { [`aws:ResourceTag/${PROJECT_TAG}`]: reboot.project, [`aws:ResourceTag/${ENVIRONMENT_TAG}`]: reboot.environment },
        Null: { [`aws:ResourceTag/${GPU_CLASS_TAG}`]: "false" },
      },
    });
  }
  if (repair.length > 0) {
    // A replacement: which group holds the instance (a read IAM cannot scope), one more instance
    // within the group's max, the surge's tag, then the termination through the group.
    statements.push({ Sid: "ReadRepairPlacement", Effect: "Allow", Action: ["autoscaling:DescribeAutoScalingInstances"], Resource: "*" });
    repair.forEach(resize("SurgeForRepair"));
    const resources = repair.map((g) => arn(g.name));
    statements.push(tagOnly("TagRepairSurge", ["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"], resources, REPAIR_SURGE_TAG_KEY));
    statements.push({ Sid: "TerminateForRepair", Effect: "Allow", Action: ["autoscaling:TerminateInstanceInAutoScalingGroup"], Resource: resources, Condition: inCluster });
  }
  return JSON.stringify({ Version: "2012-10-17", Statement: statements });
}

export function createAgentIam(name: string, args: AgentIamArgs, parent: pulumi.Resource): aws.iam.Role {
  const p = new Problems();
  const asgs = args.standbyGroups ?? [];
  const reserved = args.reservedGroups ?? [];
  const repair = args.repairGroups ?? [];
  if (asgs.length === 0 && reserved.length === 0 && !args.rebootGpuInstances) p.add("standbyGroups", "the controller needs standby or reserved groups to act on, or the repair ladder's reboot (rebootGpuInstances), else no role");
  for (const [key, list] of [["standbyGroups", asgs], ["reservedGroups", reserved], ["repairGroups", repair]] as const) {
    for (const g of list) if (!(Number.isInteger(g.maxSize) && g.maxSize >= 1)) p.add(key, `maxSize must be a whole number ≥ 1, got ${g.maxSize}`);
  }
  p.throwIfAny("AgentIam arguments");
  const opts = { parent };
  const role = new aws.iam.Role(
    `${name}-role`,
    {
      name: `${args.clusterName}-agent`,
      description: `llm-ha controller (IRSA, the controller Deployment only): wakes the standby AZ's GPU groups, sizes reserved ones${args.rebootGpuInstances ? `, reboots${repair.length ? " and replaces" : ""} the stack's GPU nodes (repair ladder)` : ""}`,
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
      policy: pulumi
        .all([account, pulumi.all(asgs.map((g) => g.name)), pulumi.all(reserved.map((g) => g.name)), pulumi.all(repair.map((g) => g.name))])
        .apply(([acct, names, reservedNames, repairNames]) =>
          agentPolicy(
            acct, args.region, args.clusterName,
            names.map((name, i) => ({ name, maxSize: asgs[i].maxSize })),
            args.rebootGpuInstances ? { project: pulumi.getProject(), environment: pulumi.getStack() } : undefined,
            reservedNames.map((name, i) => ({ name, maxSize: reserved[i].maxSize })),
            repairNames.map((name, i) => ({ name, maxSize: repair[i].maxSize })),
          ),
        ),
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
