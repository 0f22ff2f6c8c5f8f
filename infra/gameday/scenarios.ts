/**
 * What each game-day template does: its FIS targets and actions, which stop alarm holds it, and
 * the IAM statements its role needs (nothing else). Plain data over resolved values, so the
 * shapes are read and tested without Pulumi; infra/gameday/index.ts turns them into resources.
 */
import { FIS_ACTIONS, FIS_RESOURCE_TYPES, type GamedayScenario } from "../../contracts/gameday";
import { APP, EDGE_NAMESPACE, WORKLOADS_NAMESPACE } from "../names";

/** The Kubernetes ServiceAccount FIS's pod runs as, and the user its access entry maps the role to (FIS's documented name). */
export const FIS_SERVICE_ACCOUNT = "llm-ha-fis";
export const FIS_KUBERNETES_USER = "fis-experiment";

/** Which stop alarm holds a template (infra/gameday/alarms.ts). */
export type StopAlarm = "anyActiveAz" | "beyondOneAz";

export interface FisTarget {
  name: string;
  resourceType: string;
  selectionMode: string;
  resourceTags?: Record<string, string>;
  resourceArns?: string[];
  filters?: { path: string; values: string[] }[];
  parameters?: Record<string, string>;
}

export interface FisAction {
  name: string;
  actionId: string;
  parameters: Record<string, string>;
  /** FIS's key for the action's target (`Instances`, `Roles`, …) and the target's name. */
  target: [string, string];
  startAfter?: string[];
}

export type Statement = Record<string, unknown>;

export interface ScenarioSpec {
  description: string;
  targets: FisTarget[];
  actions: FisAction[];
  stopAlarm: StopAlarm;
  /** The role's permissions: the actions' own, scoped to the stack's resources where IAM can. */
  statements: Statement[];
  /** Namespaces where FIS's pod runs (its ServiceAccount and RBAC go there); empty for non-pod scenarios. */
  podNamespaces: string[];
  /** What the operator must know before starting it (the plan prints it). */
  caveat?: string;
}

/** What a scenario is built from: the stack's own names and ids, resolved. */
export interface ScenarioContext {
  region: string;
  account: string;
  project: string;
  environment: string;
  clusterName: string;
  /** The AZ the AZ-wide scenarios take, and the one `redis-failover` interrupts. */
  az: string;
  redisAz: string;
  durationMinutes: number;
  gpuClasses: string[];
  vpcId: string;
  /** The private subnet of `az` (the stack's own). */
  subnetId: string;
  replicationGroupId: string;
  redisEndpoint: string;
}

const duration = (m: number): string => `PT${m}M`;

/** The stack's own resources: the tags every resource of it carries (infra/tags.ts). */
const stackTags = (c: ScenarioContext): Record<string, string> => ({ Project: c.project, Environment: c.environment });
const tagCondition = (c: ScenarioContext, prefix = "aws:ResourceTag"): Record<string, string> => ({ [`${prefix}/Project`]: c.project, [`${prefix}/Environment`]: c.environment });
const running = { path: "State.Name", values: ["running"] };
const inAz = (az: string) => ({ path: "Placement.AvailabilityZone", values: [az] });

/** A GPU class's instances in one AZ: the launch template's instance tags (infra/gpu-node-groups.ts). */
function gpuInstances(c: ScenarioContext, name: string, gpuClass: string, selectionMode: string): FisTarget {
  return { name, resourceType: FIS_RESOURCE_TYPES.instance, selectionMode, resourceTags: { ...stackTags(c), "llm-ha.io/az": c.az, "llm-ha.io/gpu-class": gpuClass }, filters: [running, inAz(c.az)] };
}

/** Stop (and, after the duration, start) the stack's instances; `gpuOnly` holds it to those with a GPU class tag. */
function stopStatements(c: ScenarioContext, gpuOnly: boolean): Statement[] {
  return [
    {
      Sid: "StopStackInstances",
      Effect: "Allow",
      Action: ["ec2:StopInstances", "ec2:StartInstances"],
      Resource: `arn:aws:ec2:${c.region}:${c.account}:instance/*`,
      Condition: { StringEquals: tagCondition(c), ...(gpuOnly ? { Null: { "aws:ResourceTag/llm-ha.io/gpu-class": "false" } } : {}) },
    },
    { Sid: "FindInstances", Effect: "Allow", Action: ["ec2:DescribeInstances"], Resource: "*" },
  ];
}

const stopAction = (c: ScenarioContext, name: string, target: string): FisAction => ({
  name,
  actionId: FIS_ACTIONS.stopInstances,
  // The node group's auto scaling group may replace a stopped node: the action completes then.
  parameters: { startInstancesAfterDuration: duration(c.durationMinutes), completeIfInstancesTerminated: "true" },
  target: ["Instances", target],
});

/** Launches refused in the AZ for every node group of the stack's cluster (`eks:cluster-name`, which EKS puts on each group's ASG). */
function launchFailures(c: ScenarioContext): { target: FisTarget; action: FisAction; statements: Statement[] } {
  return {
    target: { name: "ClusterNodeGroups", resourceType: FIS_RESOURCE_TYPES.autoScalingGroup, selectionMode: "ALL", resourceTags: { "eks:cluster-name": c.clusterName } },
    action: {
      name: "RefuseLaunches",
      actionId: FIS_ACTIONS.insufficientCapacity,
      parameters: { availabilityZoneIdentifiers: c.az, percentage: "100", duration: duration(c.durationMinutes) },
      target: ["AutoScalingGroups", "ClusterNodeGroups"],
    },
    statements: [
      { Sid: "InjectLaunchFailures", Effect: "Allow", Action: ["ec2:InjectApiError"], Resource: "*", Condition: { "ForAnyValue:StringEquals": { "ec2:FisActionId": [FIS_ACTIONS.insufficientCapacity] } } },
      { Sid: "FindNodeGroups", Effect: "Allow", Action: ["autoscaling:DescribeAutoScalingGroups"], Resource: "*" },
    ],
  };
}

/** Power to the Redis node(s) in `az` interrupted; a primary there is replaced by a promoted replica. */
function redisPower(c: ScenarioContext, az: string): { target: FisTarget; action: FisAction; statements: Statement[] } {
  return {
    // FIS finds replication groups by tag only (no ARNs); the stack's tags name its one group.
    target: { name: "StackRedis", resourceType: FIS_RESOURCE_TYPES.replicationGroup, selectionMode: "ALL", resourceTags: stackTags(c), parameters: { availabilityZoneIdentifier: az } },
    action: { name: "InterruptRedisAzPower", actionId: FIS_ACTIONS.redisAzPower, parameters: { duration: duration(c.durationMinutes) }, target: ["ReplicationGroups", "StackRedis"] },
    statements: [
      {
        Sid: "InterruptStackRedis",
        Effect: "Allow",
        Action: ["elasticache:InterruptClusterAzPower"],
        Resource: [`arn:aws:elasticache:${c.region}:${c.account}:replicationgroup:${c.replicationGroupId}`, `arn:aws:elasticache:${c.region}:${c.account}:cluster:${c.replicationGroupId}-*`],
      },
      { Sid: "FindRedis", Effect: "Allow", Action: ["elasticache:DescribeReplicationGroups", "tag:GetResources"], Resource: "*" },
    ],
  };
}

/** The AZ's private subnet cut off (a network ACL FIS makes, tagged `managedByFIS`, swapped in and back). */
function subnetCut(c: ScenarioContext): { target: FisTarget; action: FisAction; statements: Statement[] } {
  const acl = `arn:aws:ec2:${c.region}:${c.account}:network-acl/*`;
  const inVpc = { "ec2:Vpc": `arn:aws:ec2:${c.region}:${c.account}:vpc/${c.vpcId}` };
  return {
    target: { name: "AzPrivateSubnet", resourceType: FIS_RESOURCE_TYPES.subnet, selectionMode: "ALL", resourceArns: [`arn:aws:ec2:${c.region}:${c.account}:subnet/${c.subnetId}`] },
    action: { name: "CutSubnet", actionId: FIS_ACTIONS.disruptConnectivity, parameters: { scope: "all", duration: duration(c.durationMinutes) }, target: ["Subnets", "AzPrivateSubnet"] },
    statements: [
      { Sid: "CreateFisAcl", Effect: "Allow", Action: ["ec2:CreateNetworkAcl"], Resource: acl, Condition: { StringEquals: { "aws:RequestTag/managedByFIS": "true" } } },
      { Sid: "CreateFisAclInStackVpc", Effect: "Allow", Action: ["ec2:CreateNetworkAcl"], Resource: `arn:aws:ec2:${c.region}:${c.account}:vpc/${c.vpcId}` },
      { Sid: "TagFisAcl", Effect: "Allow", Action: ["ec2:CreateTags"], Resource: acl, Condition: { StringEquals: { "ec2:CreateAction": "CreateNetworkAcl" } } },
      { Sid: "EditFisAcl", Effect: "Allow", Action: ["ec2:CreateNetworkAclEntry", "ec2:DeleteNetworkAcl"], Resource: acl, Condition: { StringEquals: { "aws:ResourceTag/managedByFIS": "true", ...inVpc } } },
      { Sid: "SwapStackSubnetAcl", Effect: "Allow", Action: ["ec2:ReplaceNetworkAclAssociation"], Resource: acl, Condition: { StringEquals: inVpc } },
      { Sid: "SwapOnStackSubnet", Effect: "Allow", Action: ["ec2:ReplaceNetworkAclAssociation"], Resource: `arn:aws:ec2:${c.region}:${c.account}:subnet/${c.subnetId}` },
      {
        Sid: "FindNetwork",
        Effect: "Allow",
        Action: ["ec2:DescribeNetworkAcls", "ec2:DescribeSubnets", "ec2:DescribeVpcs", "ec2:DescribeManagedPrefixLists", "ec2:GetManagedPrefixListEntries"],
        Resource: "*",
      },
    ],
  };
}

/** Pods of one app in one namespace of the stack's cluster: FIS takes no ARN or tag for a pod. */
function pods(c: ScenarioContext, name: string, namespace: string, app: string, selectionMode: string): FisTarget {
  return { name, resourceType: FIS_RESOURCE_TYPES.pod, selectionMode, parameters: { clusterIdentifier: c.clusterName, namespace, selectorType: "labelSelector", selectorValue: `app.kubernetes.io/name=${app}` } };
}

/** What FIS needs in AWS for a pod action: the cluster, to reach its API (the rest is Kubernetes RBAC). */
const podStatements = (c: ScenarioContext): Statement[] => [
  { Sid: "ReachStackCluster", Effect: "Allow", Action: ["eks:DescribeCluster"], Resource: `arn:aws:eks:${c.region}:${c.account}:cluster/${c.clusterName}` },
  { Sid: "FindPodSubnets", Effect: "Allow", Action: ["ec2:DescribeSubnets"], Resource: "*" },
];

/** Every scenario's template, for the stack `c`. */
export function scenarioSpec(scenario: GamedayScenario, c: ScenarioContext): ScenarioSpec {
  switch (scenario) {
    case "gpu-lost": {
      const target = gpuInstances(c, "OneGpuInstance", c.gpuClasses[0], "COUNT(1)");
      return {
        description: `llm-ha gpu-lost: one ${c.gpuClasses[0]} GPU instance of ${c.environment} in ${c.az} stopped for ${c.durationMinutes} min`,
        targets: [target],
        actions: [stopAction(c, "StopOneGpuInstance", target.name)],
        stopAlarm: "anyActiveAz",
        statements: stopStatements(c, true),
        podNamespaces: [],
      };
    }
    case "az-gpu-loss": {
      const targets = c.gpuClasses.map((g) => gpuInstances(c, `GpuInstances-${g}`, g, "ALL"));
      const launches = launchFailures(c);
      return {
        description: `llm-ha az-gpu-loss: every GPU instance of ${c.environment} in ${c.az} stopped, launches there refused, for ${c.durationMinutes} min`,
        targets: [...targets, launches.target],
        actions: [...targets.map((t) => stopAction(c, `Stop${t.name}`, t.name)), launches.action],
        stopAlarm: "beyondOneAz",
        statements: [...stopStatements(c, true), ...launches.statements],
        podNamespaces: [],
      };
    }
    case "az-power-interruption": {
      const instances: FisTarget = { name: "AzInstances", resourceType: FIS_RESOURCE_TYPES.instance, selectionMode: "ALL", resourceTags: stackTags(c), filters: [running, inAz(c.az)] };
      const parts = [launchFailures(c), redisPower(c, c.az), subnetCut(c)];
      return {
        description: `llm-ha az-power-interruption: ${c.environment}'s instances, launches, Redis node and private subnet in ${c.az} lost for ${c.durationMinutes} min`,
        targets: [instances, ...parts.map((p) => p.target)],
        actions: [stopAction(c, "StopAzInstances", instances.name), ...parts.map((p) => p.action)],
        stopAlarm: "beyondOneAz",
        statements: [...stopStatements(c, false), ...parts.flatMap((p) => p.statements)],
        podNamespaces: [],
      };
    }
    case "redis-failover": {
      const r = redisPower(c, c.redisAz);
      return {
        description: `llm-ha redis-failover: ${c.environment}'s Redis node in ${c.redisAz} (the primary's AZ) without power for ${c.durationMinutes} min: a replica is promoted`,
        targets: [r.target],
        actions: [r.action],
        stopAlarm: "anyActiveAz",
        statements: r.statements,
        podNamespaces: [],
      };
    }
    case "leader-kill": {
      const target = pods(c, "OneController", EDGE_NAMESPACE, APP.controller, "COUNT(1)");
      return {
        description: `llm-ha leader-kill: one controller pod of ${c.environment} deleted without grace`,
        targets: [target],
        actions: [{ name: "DeleteController", actionId: FIS_ACTIONS.podDelete, parameters: { kubernetesServiceAccount: FIS_SERVICE_ACCOUNT, gracePeriodSeconds: "0", maxErrorsPercent: "0" }, target: ["Pods", target.name] }],
        stopAlarm: "anyActiveAz",
        statements: podStatements(c),
        podNamespaces: [EDGE_NAMESPACE],
        caveat: "FIS deletes one controller pod at random: with two replicas it is the leader about half the time. The game day's report says when the leader did not change; run it again.",
      };
    }
    case "redis-latency": {
      const target = pods(c, "Agents", WORKLOADS_NAMESPACE, APP.agent, "ALL");
      return {
        description: `llm-ha redis-latency: 300 ms more per round trip from ${c.environment}'s agents to Redis for ${c.durationMinutes} min`,
        targets: [target],
        actions: [
          {
            name: "DelayRedis",
            actionId: FIS_ACTIONS.podNetworkLatency,
            // FIS delays what leaves the target: 300 ms a round trip, the drill's 150 ms each way.
            parameters: { kubernetesServiceAccount: FIS_SERVICE_ACCOUNT, delayMilliseconds: "300", jitterMilliseconds: "0", sources: c.redisEndpoint, duration: duration(c.durationMinutes), maxErrorsPercent: "0" },
            target: ["Pods", target.name],
          },
        ],
        stopAlarm: "anyActiveAz",
        statements: podStatements(c),
        podNamespaces: [WORKLOADS_NAMESPACE],
        caveat: "FIS adds latency from an ephemeral container that inherits the target pod's security context and needs root; the agent pod runs as user 10001 (runAsNonRoot), so the action fails at start and the experiment ends failed. The drill's redis-latency measures the same fault locally.",
      };
    }
  }
}

/** What a scenario needs whatever the stack's ids: its stop alarm and the namespaces FIS's pod runs in. */
export function scenarioNeeds(scenario: GamedayScenario): Pick<ScenarioSpec, "stopAlarm" | "podNamespaces"> {
  const placeholder: ScenarioContext = { region: "", account: "", project: "", environment: "", clusterName: "", az: "", redisAz: "", durationMinutes: 1, gpuClasses: [""], vpcId: "", subnetId: "", replicationGroupId: "", redisEndpoint: "" };
  const { stopAlarm, podNamespaces } = scenarioSpec(scenario, placeholder);
  return { stopAlarm, podNamespaces };
}
