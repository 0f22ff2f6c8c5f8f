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
 * Nodes a GPU node group is created with: its desired size, or 0 when one of its types is
 * scarce and no reservation or Capacity Block covers it (`covered`). The stack
 * (infra/gpu-node-groups.ts) creates its groups with it; `llm-ha preflight --online` says with it
 * whether a reservation that is not ready yet would fail the group's creation.
 */
export function gpuGroupCreateSize(types: readonly string[], desired: number, covered: boolean): number {
  return covered || !types.some((t) => isScarceGpuType(t)) ? desired : 0;
}
