import * as pulumi from "@pulumi/pulumi";
import { AgentIam, azIdsSetting } from "./agent-iam";
import { repairSpareSetting, type StackConfig } from "./config";
import type { CapacityGroup } from "./gpu-node-groups";
import { EDGE_NAMESPACE } from "./names";
import type { WorkloadsArgs } from "./workloads";
import { CONTROLLER_SERVICE_ACCOUNT } from "./workloads/controller";

/** `asg=wakeSize,…` of the groups (`LLMHA_STANDBY_ASGS`, `LLMHA_STANDBY_FALLBACK`), in their order; undefined for none. */
function asgSetting(groups: CapacityGroup[]): pulumi.Output<string> | undefined {
  if (groups.length === 0) return undefined;
  return pulumi.all(groups.map((g) => g.asgName)).apply((names) => names.map((n, i) => `${n}=${groups[i].wakeSize}`).join(","));
}

/**
 * The groups the leader sizes once their reservation is active (`LLMHA_RESERVED_GROUPS`): an
 * active AZ's group on a capacity reservation or Capacity Block, created at zero. A standby
 * group on a Capacity Block is left to the wake (its AZ sleeps by design).
 */
export function reservedGroups(groups: CapacityGroup[]): CapacityGroup[] {
  return groups.filter((g) => g.role === "active" && !g.fallback && g.createSize < g.desiredSize && g.gpuClass.capacityReservations[g.az] !== undefined);
}

function reservedSetting(groups: CapacityGroup[]): pulumi.Output<string> | undefined {
  if (groups.length === 0) return undefined;
  return pulumi.all(groups.map((g) => g.asgName)).apply((names) => names.map((n, i) => `${n}=${groups[i].gpuClass.capacityReservations[groups[i].az]}:${groups[i].desiredSize}`).join(","));
}

/** What the controller may do, for the workloads: its AWS actuator (when it has one) and its repair ladder. */
export interface ControllerActuation {
  agentActuator: WorkloadsArgs["agentActuator"];
  repair: NonNullable<WorkloadsArgs["repair"]>;
  /** The reserved groups the leader sizes (not left for a person to scale). */
  reserved: CapacityGroup[];
}

/**
 * The controller's AWS actuator (IRSA, the controller Deployment's ServiceAccount only; GPU-node
 * agents hold no AWS role): it wakes the standby groups, sizes the reserved ones and, when the
 * repair ladder acts (`llm-ha:repair.mode: act`), reboots the stack's own GPU instances. No
 * role without one of those jobs. No zonal shift: the per-AZ NLBs are single-AZ, which ARC does
 * not shift; DNS's weighted records take a lost AZ out.
 */
export function controllerActuation(c: StackConfig, oidcProvider: { arn: pulumi.Input<string>; url: pulumi.Input<string> }, groups: CapacityGroup[]): ControllerActuation {
  const standby = groups.filter((g) => g.role === "standby" && !g.fallback);
  const fallbacks = groups.filter((g) => g.fallback);
  const reserved = reservedGroups(groups);
  const act = c.repair.mode === "act";
  const repair = { mode: c.repair.mode, spare: c.repair.spare ? repairSpareSetting(c.repair.spare, c.azs) : undefined, predictiveBudget: c.repair.predictiveBudget };
  if (standby.length === 0 && reserved.length === 0 && !act) return { agentActuator: undefined, repair, reserved };
  const iam = new AgentIam("agent", {
    clusterName: c.clusterName,
    region: c.region,
    oidcProviderArn: oidcProvider.arn,
    oidcProviderUrl: oidcProvider.url,
    // The controller's ServiceAccount, in the edge namespace with its pods.
    namespace: EDGE_NAMESPACE,
    serviceAccountName: CONTROLLER_SERVICE_ACCOUNT,
    // The fallback groups too: a wake of one must not be AccessDenied (and nothing else is named);
    // each resize bounded by the group's own maximum.
    standbyGroups: [...standby, ...fallbacks].map((g) => ({ name: g.asgName, maxSize: g.maxSize })),
    reservedGroups: reserved.map((g) => ({ name: g.asgName, maxSize: g.maxSize })),
    // Advise and off never reboot or replace: no grant (least privilege as without the ladder).
    rebootGpuInstances: act,
    repairGroups: act ? groups.map((g) => ({ name: g.asgName, maxSize: g.maxSize })) : [],
  });
  const agentActuator = {
    roleArn: iam.roleArn,
    region: c.region,
    azIds: azIdsSetting(c.azs),
    // A standby group wakes to its daytime size, at least one node; a fallback group to the same size.
    standbyAsgs: asgSetting(standby),
    standbyFallback: asgSetting(fallbacks),
    reservedGroups: reservedSetting(reserved),
  };
  return { agentActuator, repair, reserved };
}
