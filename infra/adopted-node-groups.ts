import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { standbySize, type CapacityConfig, type GpuClassConfig } from "./config";
import type { CapacityGroup } from "./gpu-node-groups";

/** A managed node group the operator runs, as the stack reads it (`aws eks describe-nodegroup`). */
export interface AdoptedGroupInfo {
  name: string;
  asgName: string;
  desiredSize: number;
  maxSize: number;
  labels: Record<string, string>;
}

/**
 * The operator's node groups of `llm-ha:capacity.engine: nodeGroups`, read by name: their auto
 * scaling groups are what the leader sizes (`LLMHA_STANDBY_ASGS`, `LLMHA_STANDBY_FALLBACK`) and
 * what the standby schedule acts on, as with the stack's own groups. llm-ha does not own them,
 * so it cannot label or taint them (a node group's labels belong to whoever manages it): the
 * operator labels them per AZ, class and role, and `llm-ha preflight` checks the labels.
 */
export async function adoptNodeGroups(
  clusterName: string,
  capacity: Extract<CapacityConfig, { engine: "nodeGroups" }>,
  a: { azs: string[]; standbyAz?: string; standbyCapacityRatio: number; gpuClasses: GpuClassConfig[] },
): Promise<CapacityGroup[]> {
  const read = async (name: string): Promise<AdoptedGroupInfo> => {
    const g = await aws.eks.getNodeGroup({ clusterName, nodeGroupName: name });
    const asgName = g.resources[0]?.autoscalingGroups[0]?.name;
    if (!asgName) throw new Error(`llm-ha:capacity.nodeGroups: node group ${name} of ${clusterName} has no auto scaling group yet (aws eks describe-nodegroup --cluster-name ${clusterName} --nodegroup-name ${name})`);
    return { name, asgName, desiredSize: g.scalingConfigs[0]?.desiredSize ?? 0, maxSize: g.scalingConfigs[0]?.maxSize ?? 0, labels: g.labels ?? {} };
  };
  const out: CapacityGroup[] = [];
  for (const az of a.azs) {
    for (const gpuClass of a.gpuClasses) {
      const name = capacity.groups[az]?.[gpuClass.name];
      if (name === undefined) continue;
      const info = await read(name);
      const role = az === a.standbyAz ? "standby" : "active";
      const size = role === "standby" ? standbySize(gpuClass, a.standbyCapacityRatio) : { desired: gpuClass.desiredPerAz, max: gpuClass.maxPerAz };
      const wakeSize = Math.max(1, size.desired);
      out.push({ az, gpuClass, role, fallback: false, desiredSize: size.desired, maxSize: info.maxSize, wakeSize, createSize: info.desiredSize, asgName: pulumi.output(info.asgName) });
      const fb = role === "standby" ? capacity.fallback[gpuClass.name] : undefined;
      if (fb !== undefined) {
        const f = await read(fb);
        out.push({ az, gpuClass, role, fallback: true, desiredSize: 0, maxSize: f.maxSize, wakeSize, createSize: f.desiredSize, asgName: pulumi.output(f.asgName) });
      }
    }
  }
  return out;
}
