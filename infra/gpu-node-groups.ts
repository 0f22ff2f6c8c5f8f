import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig } from "./config";
import { GPU_TAINT, LABELS } from "./names";
import { Problems } from "./problems";
import { tagged } from "./tags";

/** Where nodeadm mounts the RAID0 array of the instance-store NVMe (AL2023 `localStorage`). */
export const NVME_MOUNT = "/mnt/k8s-disks/0";

/**
 * AL2023 nodeadm NodeConfig, MIME multipart as EKS merges it with its own for managed node
 * groups: the instance-store NVMe disks become one RAID0 array at `NVME_MOUNT`.
 */
export const NVME_RAID0_USER_DATA = [
  "MIME-Version: 1.0",
  'Content-Type: multipart/mixed; boundary="LLMHA"',
  "",
  "--LLMHA",
  "Content-Type: application/node.eks.aws",
  "",
  "---",
  "apiVersion: node.eks.aws/v1alpha1",
  "kind: NodeConfig",
  "spec:",
  "  instance:",
  "    localStorage:",
  "      strategy: RAID0",
  "",
  "--LLMHA--",
  "",
].join("\n");
const NVME_RAID0_USER_DATA_B64 = Buffer.from(NVME_RAID0_USER_DATA).toString("base64");

export interface GpuNodeGroupsArgs {
  /** EKS cluster name. Required. */
  clusterName: pulumi.Input<string>;
  /** Node IAM role ARN. Required. */
  nodeRoleArn: pulumi.Input<string>;
  /** Private subnet per AZ; each node group gets exactly one, which pins it to that AZ. Required. */
  subnets: { az: string; subnetId: pulumi.Input<string> }[];
  /** GPU classes, each deployed in every AZ. Required, non-empty. */
  gpuClasses: GpuClassConfig[];
  /** The AZ the standby schedule scales to zero; its groups get `az-role: standby`. Default none. */
  standbyAz?: string;
  /** Root volume size in GiB (vLLM images and model caches are large). Default 500. */
  diskSizeGb?: number;
}

/** One node group: one AZ, one GPU class. */
export interface GpuNodeGroup {
  az: string;
  gpuClass: GpuClassConfig;
  role: "active" | "standby";
  nodeGroup: aws.eks.NodeGroup;
  /** Name of the auto scaling group EKS created for the node group. */
  asgName: pulumi.Output<string>;
}

/**
 * One EKS managed node group per (AZ, GPU class), each pinned to its AZ by a single
 * subnet, so losing an AZ takes out exactly one group per class and the scheduler cannot
 * quietly move an AZ's capacity elsewhere.
 */
export class GpuNodeGroups extends pulumi.ComponentResource {
  readonly groups: GpuNodeGroup[];

  constructor(name: string, args: GpuNodeGroupsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:GpuNodeGroups", name, {}, opts);
    this.groups = createGpuNodeGroups(name, args, this);
    this.registerOutputs({ nodeGroups: this.groups.map((g) => g.nodeGroup.nodeGroupName) });
  }
}

function validate(args: GpuNodeGroupsArgs): void {
  const p = new Problems();
  if (args.subnets.length < 2) p.add("subnets", "needs subnets in at least 2 AZs");
  if (args.gpuClasses.length === 0) p.add("gpuClasses", "needs at least one GPU class");
  if (args.standbyAz !== undefined && !args.subnets.some((s) => s.az === args.standbyAz)) p.add("standbyAz", `${args.standbyAz} has no subnet`);
  args.gpuClasses.forEach((c, i) => {
    if (c.maxPerAz < c.desiredPerAz) p.add(`gpuClasses[${i}].maxPerAz`, "must be ≥ desiredPerAz");
  });
  p.throwIfAny("GpuNodeGroups arguments");
}

export function createGpuNodeGroups(name: string, args: GpuNodeGroupsArgs, parent: pulumi.Resource): GpuNodeGroup[] {
  validate(args);
  const groups: GpuNodeGroup[] = [];
  for (const { az, subnetId } of args.subnets) {
    for (const gpuClass of args.gpuClasses) {
      const role = az === args.standbyAz ? "standby" : "active";
      const id = `${name}-${az}-${gpuClass.name}`;
      const reservation = gpuClass.capacityReservations[az];
      const block = gpuClass.capacityType === "CAPACITY_BLOCK";
      const lt = new aws.ec2.LaunchTemplate(
        `${id}-lt`,
        {
          // IMDSv2 only. Hop limit 2 lets the agent (hostNetwork) and containers that need
          // their placement read it; with hostNetwork 1 would do, 2 covers bridged pods too.
          metadataOptions: { httpEndpoint: "enabled", httpTokens: "required", httpPutResponseHopLimit: 2 },
          blockDeviceMappings: [
            { deviceName: "/dev/xvda", ebs: { volumeSize: args.diskSizeGb ?? 500, volumeType: "gp3", encrypted: "true", deleteOnTermination: "true" } },
          ],
          // The node's instance-store NVMe (8 × 3.8 TB on p5, 8 × 1 TB on p4d) as one RAID0 array: kubelet,
          // containerd and the model cache (MODEL_CACHE_HOST_PATH) live there, not on the EBS root.
          userData: NVME_RAID0_USER_DATA_B64,
          // A reservation belongs to one AZ: each AZ's group targets its own (none: On-Demand, open).
          capacityReservationSpecification: reservation ? { capacityReservationTarget: { capacityReservationId: reservation } } : undefined,
          // Capacity Blocks for ML: the market type and the instance type live in the launch template.
          instanceMarketOptions: block ? { marketType: "capacity-block" } : undefined,
          instanceType: block ? gpuClass.instanceType : undefined,
          tagSpecifications: [{ resourceType: "instance", tags: tagged({ "llm-ha.io/az": az, "llm-ha.io/gpu-class": gpuClass.name }) }],
          tags: tagged(),
        },
        { parent },
      );
      const nodeGroup = new aws.eks.NodeGroup(
        id,
        {
          clusterName: args.clusterName,
          nodeRoleArn: args.nodeRoleArn,
          subnetIds: [subnetId],
          // In order of preference; EKS launches whichever type has capacity (none with a block: the template's).
          instanceTypes: block ? undefined : gpuClass.instanceTypes,
          amiType: "AL2023_x86_64_NVIDIA",
          capacityType: gpuClass.capacityType,
          launchTemplate: { id: lt.id, version: pulumi.interpolate`${lt.latestVersion}` },
          labels: { [LABELS.gpuClass]: gpuClass.name, [LABELS.az]: az, [LABELS.azRole]: role },
          taints: [{ key: GPU_TAINT.key, value: GPU_TAINT.value, effect: "NO_SCHEDULE" }],
          scalingConfig: { minSize: 0, desiredSize: gpuClass.desiredPerAz, maxSize: gpuClass.maxPerAz },
          // One node at a time: an AZ keeps all but one node serving during an AMI roll.
          updateConfig: { maxUnavailable: 1 },
          nodeRepairConfig: { enabled: true },
          tags: tagged({ "llm-ha.io/az": az, "llm-ha.io/gpu-class": gpuClass.name, "llm-ha.io/az-role": role }),
        },
        // The standby schedule and the controller's wake-up change the desired size.
        { parent, ignoreChanges: ["scalingConfig.desiredSize"] },
      );
      const asgName = nodeGroup.resources.apply((r) => r[0]?.autoscalingGroups?.[0]?.name ?? "");
      groups.push({ az, gpuClass, role, nodeGroup, asgName });
    }
  }
  return groups;
}
