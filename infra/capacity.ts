import type * as pulumi from "@pulumi/pulumi";
import { adoptNodeGroups } from "./adopted-node-groups";
import type { StackConfig } from "./config";
import type { Foundation } from "./foundation";
import { GpuNodeGroups, type CapacityGroup, type GpuNodeGroup } from "./gpu-node-groups";
import { karpenterPlan, PLACEHOLDER_NAME } from "./karpenter";
import { Karpenter } from "./karpenter-resources";
import { WORKLOADS_NAMESPACE } from "./names";
import type { WorkloadsArgs } from "./workloads";

/** The GPU capacity of a stack, whichever engine gives it. */
export interface GpuCapacity {
  /** Auto scaling groups the leader sizes and the standby schedule acts on (own or adopted node groups); empty with Karpenter. */
  groups: CapacityGroup[];
  /** The stack's own node groups (what `gpuScaleUp` lists); empty on an existing cluster. */
  own: GpuNodeGroup[];
  /** The Karpenter engine: the controller's settings and RBAC, and the placeholder to create. */
  karpenter?: { workloads: NonNullable<WorkloadsArgs["karpenter"]>; placeholder?: { gpusPerPod: number } };
}

/**
 * The GPU nodes: the stack's own managed node groups on its own cluster; on an existing cluster
 * the operator's node groups adopted by name, or Karpenter NodePools per AZ and class. The
 * leader's decisions are the same; what it acts on differs (ASG sizes, or NodePool limits and
 * the placeholder).
 */
export async function gpuCapacity(c: StackConfig, base: Foundation, gpuSecurityGroupId: pulumi.Input<string>): Promise<GpuCapacity> {
  const cap = c.capacity;
  if (base.own !== undefined) {
    const cluster = base.own.cluster;
    const gpu = new GpuNodeGroups(
      "gpu",
      {
        clusterName: cluster.cluster.name,
        nodeRoleArn: cluster.gpuNodeRole.arn,
        securityGroupId: gpuSecurityGroupId,
        subnets: base.own.network.subnets.map((s) => ({ az: s.az, subnetId: s.privateSubnet.id })),
        gpuClasses: c.gpuClasses,
        fastImagePull: c.gpuFastImagePull,
        standbyAz: c.standbyAz,
        standbyCapacityRatio: c.standbyCapacityRatio,
        standbyFallback: c.standbyFallback,
        standbyCapacityWaiver: c.standbyCapacityWaiver,
        dependsOn: cluster.gpuNodesNeed,
      },
      { dependsOn: [cluster] },
    );
    return { groups: gpu.groups, own: gpu.groups };
  }
  const sizes = { azs: c.azs, standbyAz: c.standbyAz, standbyCapacityRatio: c.standbyCapacityRatio, gpuClasses: c.gpuClasses };
  if (cap.engine === "nodeGroups") return { groups: await adoptNodeGroups(c.clusterName, cap, sizes), own: [] };
  if (cap.engine !== "karpenter") throw new Error(`llm-ha:capacity: an existing cluster needs engine karpenter or nodeGroups, got ${cap.engine}`);
  const plan = karpenterPlan({ ...sizes, standbyFallback: c.standbyFallback, nodeClass: cap.nodeClass });
  new Karpenter("karpenter", {
    clusterName: c.clusterName,
    region: c.region,
    provider: base.provider,
    plan,
    gpuClasses: c.gpuClasses,
    nodeClass: cap.nodeClass,
    nodeRole: cap.nodeRole,
    amiAlias: cap.amiAlias,
    subnetIds: (base.existing?.azs ?? []).flatMap((a) => a.privateSubnetIds),
    securityGroupId: gpuSecurityGroupId,
  });
  const waking = plan.pools.filter((p) => p.role !== "active").map((p) => p.name);
  return {
    groups: [],
    own: [],
    karpenter: {
      workloads: {
        env: {
          standbyNodePools: plan.standbyNodePools,
          placeholder: plan.placeholder ? `${WORKLOADS_NAMESPACE}/${PLACEHOLDER_NAME}=${plan.placeholder.replicas}` : undefined,
          // Karpenter has no scheduled scaling: the leader parks and wakes the standby on the stack's schedule.
          schedule: c.schedule,
        },
        pools: waking,
        placeholder: plan.placeholder ? PLACEHOLDER_NAME : undefined,
      },
      placeholder: plan.placeholder ? { gpusPerPod: plan.placeholder.gpusPerPod } : undefined,
    },
  };
}
