import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { AL2023_ROOT_DEVICE, FAST_PULL_ROOT_VOLUME } from "../contracts/fast-image-pull";
import { DESIRED_FROM_TAG, gpuGroupCreateSize } from "../contracts/scarce-gpus";
import { SYSTEM_NODE_METADATA } from "./cluster";
import { GpuClassConfig, standbySize } from "./config";
import { GPU_TAINT, LABELS, STANDBY_FALLBACK_LABEL, CAPACITY_WAIVER_TAG } from "./names";
import { liveDesiredSizes } from "./live-sizes";
import { Problems } from "./problems";
import { tagged } from "./tags";

/** Where nodeadm mounts the RAID0 array of the instance-store NVMe (AL2023 `localStorage`). */
export const NVME_MOUNT = "/mnt/k8s-disks/0";

/**
 * AL2023 nodeadm NodeConfig, MIME multipart as EKS merges it with its own for managed node
 * groups: the instance-store NVMe disks become one RAID0 array at `NVME_MOUNT`; with
 * `fastImagePull`, the `FastImagePull` feature gate turns on the SOCI snapshotter's parallel
 * pull and unpack (contracts/fast-image-pull.ts; nodeadm enables it only on instances with
 * at least 4 vCPUs and 7 GiB of memory, which every GPU type here has).
 */
export function gpuNodeUserData(fastImagePull: boolean): string {
  return [
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
    ...(fastImagePull ? ["  featureGates:", "    FastImagePull: true"] : []),
    "  instance:",
    "    localStorage:",
    "      strategy: RAID0",
    "",
    "--LLMHA--",
    "",
  ].join("\n");
}

/** The GPU nodes' user data with fast image pull off (`llm-ha:gpuFastImagePull: false`): RAID0 only. */
export const NVME_RAID0_USER_DATA = gpuNodeUserData(false);
/** The GPU nodes' user data with fast image pull on (the default): RAID0 and the `FastImagePull` gate. */
export const FAST_PULL_USER_DATA = gpuNodeUserData(true);

/**
 * The GPU nodes' EBS root volume. With fast pull, gp3 at 1,000 MiB/s and 16,000 IOPS: the SOCI
 * snapshotter unpacks onto the root volume (`SOCI_ROOT`; `localStorage: RAID0` moves kubelet
 * and containerd to the NVMe, not it), and AWS finds parallel pull slower than the default
 * below about 600 MiB/s, which gp3's baseline 125 MiB/s is far under (policy
 * fast-image-pull-root-throughput). Without: gp3 at its baseline, as before.
 */
export function gpuRootVolume(sizeGb: number, fastImagePull: boolean): aws.types.input.ec2.LaunchTemplateBlockDeviceMappingEbs {
  return {
    volumeSize: sizeGb,
    volumeType: "gp3",
    ...(fastImagePull ? { throughput: FAST_PULL_ROOT_VOLUME.throughput, iops: FAST_PULL_ROOT_VOLUME.iops } : {}),
    encrypted: "true",
    deleteOnTermination: "true",
  };
}

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
  /**
   * nodeadm's `FastImagePull` gate (SOCI parallel pull) and a gp3 root volume at 1,000 MiB/s and
   * 16,000 IOPS for it (`llm-ha:gpuFastImagePull`). Default true; false: no gate, baseline gp3.
   */
  fastImagePull?: boolean;
  /** The standby groups' size relative to an active AZ's, in (0, 1] (partial redundancy). Default 1. */
  standbyCapacityRatio?: number;
  /**
   * Per GPU class, instance types of the standby AZ's fallback group: same AZ, same labels
   * (the agent and inference run there), desired 0, woken by the agent only when the standby
   * group cannot launch (`LLMHA_STANDBY_FALLBACK`). Default none.
   */
  standbyFallback?: Partial<Record<string, string[]>>;
  /** Why the standby needs no capacity fallback: tagged on its groups for the policy pack. Default none. */
  standbyCapacityWaiver?: string;
  /** The GPU nodes' security group (`Fences.gpuNodes`): 8000/9400/9401 fenced. Required. */
  securityGroupId: pulumi.Input<string>;
  /** What every group waits for (the node role's policy attachments). Default none. */
  dependsOn?: pulumi.Resource[];
}

/** One node group: one AZ, one GPU class. */
export interface GpuNodeGroup {
  az: string;
  gpuClass: GpuClassConfig;
  role: "active" | "standby";
  /** A standby AZ's fallback group (another instance type of the class; desired 0, never scheduled). */
  fallback: boolean;
  /** Nodes while up: the class's `desiredPerAz` (scaled by the standby ratio on the standby AZ); 0 for a fallback group. */
  desiredSize: number;
  /** Upper bound (`maxPerAz`, scaled on the standby AZ). */
  maxSize: number;
  /** Nodes the agent wakes the group to: the standby's size, at least 1. */
  wakeSize: number;
  /**
   * Nodes the group is created with: `desiredSize`, or 0 for scarce GPU types
   * (`contracts/scarce-gpus.ts`) and for any group on a capacity reservation or Capacity Block:
   * EKS would end the group in CREATE_FAILED on InsufficientInstanceCapacity, or on a
   * reservation that is not active yet or smaller than the size. The scale-up to `desiredSize`
   * follows (`gpuScaleUp`, docs/infra.md "From an empty account"), and a shortage there only
   * delays nodes.
   */
  createSize: number;
  nodeGroup: aws.eks.NodeGroup;
  /** Name of the auto scaling group EKS created for the node group. */
  asgName: pulumi.Output<string>;
}

/** What the controller's settings and the standby schedule read of a group: the stack's own, or one adopted on an existing cluster. */
export type CapacityGroup = Omit<GpuNodeGroup, "nodeGroup">;

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
  const r = args.standbyCapacityRatio ?? 1;
  if (!(r > 0 && r <= 1)) p.add("standbyCapacityRatio", `${r} must be in (0, 1]`);
  for (const [cls, types] of Object.entries(args.standbyFallback ?? {})) {
    if (args.standbyAz === undefined) p.add(`standbyFallback.${cls}`, "needs standbyAz");
    if (!args.gpuClasses.some((c) => c.name === cls)) p.add(`standbyFallback.${cls}`, "is not one of gpuClasses");
    if ((types ?? []).length === 0) p.add(`standbyFallback.${cls}`, "needs at least one instance type (leave the class out for none)");
  }
  p.throwIfAny("GpuNodeGroups arguments");
}

export function createGpuNodeGroups(name: string, args: GpuNodeGroupsArgs, parent: pulumi.Resource): GpuNodeGroup[] {
  validate(args);
  const specs: { id: string; spec: GroupSpec }[] = [];
  for (const { az, subnetId } of args.subnets) {
    for (const gpuClass of args.gpuClasses) {
      const role = az === args.standbyAz ? "standby" : "active";
      const size = role === "standby" ? standbySize(gpuClass, args.standbyCapacityRatio ?? 1) : { desired: gpuClass.desiredPerAz, max: gpuClass.maxPerAz };
      const wakeSize = Math.max(1, size.desired);
      const id = `${name}-${az}-${gpuClass.name}`;
      specs.push({ id, spec: { az, subnetId, gpuClass, role, types: gpuClass.instanceTypes, desired: size.desired, max: size.max, wakeSize, fallback: false } });
      const fallbackTypes = role === "standby" ? args.standbyFallback?.[gpuClass.name] : undefined;
      if (fallbackTypes?.length) {
        // The class's next instance type in the same AZ, at zero: only the agent wakes it, to the standby's wake size.
        specs.push({ id: `${id}-fallback`, spec: { az, subnetId, gpuClass, role, types: fallbackTypes, desired: 0, max: size.max, wakeSize, fallback: true } });
      }
    }
  }
  const live = liveDesiredSizes(args.clusterName, specs.map((s) => s.id), parent);
  return specs.map(({ id, spec }) => nodeGroupOf(id, args, parent, spec, live));
}

interface GroupSpec {
  az: string;
  subnetId: pulumi.Input<string>;
  gpuClass: GpuClassConfig;
  role: "active" | "standby";
  types: string[];
  desired: number;
  max: number;
  wakeSize: number;
  fallback: boolean;
}

function nodeGroupOf(id: string, args: GpuNodeGroupsArgs, parent: pulumi.Resource, g: GroupSpec, live: pulumi.Output<Record<string, number>>): GpuNodeGroup {
  const { az, gpuClass, role } = g;
  // A fallback group launches On-Demand, outside the class's reservation or block: that is its point.
  const reservation = g.fallback ? undefined : gpuClass.capacityReservations[az];
  const block = !g.fallback && gpuClass.capacityType === "CAPACITY_BLOCK";
  const fastImagePull = args.fastImagePull ?? true;
  const lt = new aws.ec2.LaunchTemplate(
    `${id}-lt`,
    {
      // IMDSv2 only, one hop: the agent and vLLM (host network) read their placement; a pod
      // off the host network cannot reach the node role's credentials.
      metadataOptions: { ...SYSTEM_NODE_METADATA },
      // The GPU nodes' own group only (infra/fences.ts): out of the cluster security group,
      // whose members all reach each other on every port.
      vpcSecurityGroupIds: [args.securityGroupId],
      blockDeviceMappings: [{ deviceName: AL2023_ROOT_DEVICE, ebs: gpuRootVolume(args.diskSizeGb ?? 500, fastImagePull) }],
      // The node's instance-store NVMe (8 × 3.8 TB on p5, 8 × 1 TB on p4d) as one RAID0 array: kubelet,
      // containerd and the model cache (MODEL_CACHE_HOST_PATH) live there, not on the EBS root; with
      // fast pull, the FastImagePull gate too (the SOCI root stays on the EBS root: gpuRootVolume).
      userData: Buffer.from(gpuNodeUserData(fastImagePull)).toString("base64"),
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
  // Created at 0 when EC2 may not have the size at creation: a scarce type On-Demand, and any
  // group on a reservation or Capacity Block (which may be scheduled, pending or smaller than
  // the group's size when `pulumi up` runs). `gpuScaleUp` lists them for the scale-up after.
  const createSize = gpuGroupCreateSize(g.types, g.desired, Boolean(reservation || block));
  // What `pulumi up` sends as desiredSize: what the group runs now (read from EKS), so a change
  // of maxSize or anything else in scalingConfig never lowers it; createSize for a new group.
  // Clamped to [0, maxSize]: EKS refuses desired > max (a lowered maxPerAz does shrink the group).
  const desiredSize = live.apply((sizes) => Math.min(sizes[id] ?? createSize, g.max));
  const waiver: Record<string, string> = role === "standby" && !g.fallback && args.standbyCapacityWaiver ? { [CAPACITY_WAIVER_TAG]: args.standbyCapacityWaiver } : {};
  const nodeGroup = new aws.eks.NodeGroup(
    id,
    {
      clusterName: args.clusterName,
      nodeRoleArn: args.nodeRoleArn,
      subnetIds: [g.subnetId],
      // In order of preference; EKS launches whichever type has capacity (none with a block: the template's).
      instanceTypes: block ? undefined : g.types,
      amiType: "AL2023_x86_64_NVIDIA",
      capacityType: g.fallback ? "ON_DEMAND" : gpuClass.capacityType,
      launchTemplate: { id: lt.id, version: pulumi.interpolate`${lt.latestVersion}` },
      // The same class, AZ and role as the group it stands in for: the agent DaemonSet and inference select on them.
      labels: { [LABELS.gpuClass]: gpuClass.name, [LABELS.az]: az, [LABELS.azRole]: role, ...(g.fallback ? { [STANDBY_FALLBACK_LABEL]: "true" } : {}) },
      taints: [{ key: GPU_TAINT.key, value: GPU_TAINT.value, effect: "NO_SCHEDULE" }],
      scalingConfig: { minSize: 0, desiredSize, maxSize: g.max },
      // MINIMAL: an AMI, launch template or version roll replaces a node in place (terminate,
      // then launch) instead of surging an extra p5 first, which a full reservation or block
      // cannot give (policy gpu-node-group-minimal-update). One node at a time: an AZ keeps all
      // but one node serving during the roll.
      updateConfig: { updateStrategy: "MINIMAL", maxUnavailable: 1 },
      nodeRepairConfig: { enabled: true },
      tags: live.apply((sizes) =>
        tagged({
          "llm-ha.io/az": az,
          "llm-ha.io/gpu-class": gpuClass.name,
          "llm-ha.io/az-role": role,
          ...(g.fallback ? { [STANDBY_FALLBACK_LABEL]: "true" } : {}),
          ...waiver,
          [DESIRED_FROM_TAG]: sizes[id] === undefined ? "create" : "running",
        }),
      ),
    },
    // No ignoreChanges on desiredSize: Pulumi would send the create-time input back whenever
    // scalingConfig changes (docs/infra.md "Update behaviour"); the live read above keeps what
    // the schedule, the leader or the scale-up set. The node role's policies are attached
    // first (nodeRoleArn may be its plain ARN): nodes that launch without them cannot join.
    { parent, dependsOn: args.dependsOn },
  );
  const asgName = nodeGroup.resources.apply((r) => r[0]?.autoscalingGroups?.[0]?.name ?? "");
  return { az, gpuClass, role, fallback: g.fallback, desiredSize: g.desired, maxSize: g.max, wakeSize: g.wakeSize, createSize, nodeGroup, asgName };
}
