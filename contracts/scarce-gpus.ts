/**
 * GPU instance families EC2 rarely has On-Demand capacity for at a moment's notice (the
 * 8-GPU A100/H100/H200/B200 machines). EKS ends a managed node group that cannot launch
 * its desired size at creation in `CREATE_FAILED` (InsufficientInstanceCapacity), and such a
 * group can only be replaced: so a group of these types starts at zero unless a capacity
 * reservation or a Capacity Block covers it. Shared by the stack (infra/gpu-node-groups.ts)
 * and the policy pack (`gpu-scarce-start-at-zero`).
 */
export const SCARCE_GPU_FAMILIES: readonly string[] = Object.freeze(["p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6e-gb200"]);

/** True when `instanceType` (`p5.48xlarge`) is of one of `families`. */
export function isScarceGpuType(instanceType: string, families: readonly string[] = SCARCE_GPU_FAMILIES): boolean {
  return families.includes(instanceType.split(".")[0]);
}

/**
 * Nodes a GPU node group is created with: its desired size, or 0 when EC2 may not have that
 * size when `pulumi up` runs — one of its types is scarce On-Demand, or it is on a reservation or
 * Capacity Block (`covered`: scheduled, pending or smaller than the group may be at creation).
 * The stack (infra/gpu-node-groups.ts) creates its groups with it, and lists those at 0 in
 * `gpuScaleUp`; `llm-ha preflight --online` says with it what a reservation not ready yet means.
 */
export function gpuGroupCreateSize(types: readonly string[], desired: number, covered: boolean): number {
  return covered || types.some((t) => isScarceGpuType(t)) ? 0 : desired;
}

/**
 * Tag on a GPU node group naming where `pulumi up` took its desiredSize from: `create` (the
 * group does not exist yet: the create-time size, 0 for a scarce or reserved group) or
 * `running` (the size EKS reports it runs now). The create-time policies check only `create`.
 */
export const DESIRED_FROM_TAG = "llm-ha.io/desired-size-from";

/**
 * Families whose capacity AWS sells largely as EC2 Capacity Blocks for ML (p5e, the H200
 * machines): an instance type offering in an AZ (`describe-instance-type-offerings`) says the
 * type exists there, not that On-Demand capacity can be had, and the offerings check cannot
 * tell the two apart. A standby fallback group of such a type may never launch On-Demand.
 */
export const CAPACITY_BLOCK_MOSTLY_FAMILIES: readonly string[] = Object.freeze(["p5e"]);

/** The warning for `types` of a family sold mostly as Capacity Blocks, or undefined when none is. */
export function capacityBlockMostlyNote(types: readonly string[]): string | undefined {
  const these = types.filter((t) => isScarceGpuType(t, CAPACITY_BLOCK_MOSTLY_FAMILIES));
  if (these.length === 0) return undefined;
  return `${these.join(", ")} is offered, but largely sold as Capacity Blocks: an On-Demand launch may find no capacity at all (the offerings cannot tell); reserve a Capacity Block or a capacity reservation for it, or name a type with On-Demand capacity`;
}
