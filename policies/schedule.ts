// Standby scale-to-zero: the L2 tier wakes the standby AZ when an active one degrades.
// A schedule that parks an active group, or parks a standby with no way back, removes
// the capacity L2 and L3 fail over to.
import { type PolicyResource, type StackValidationPolicy } from "@pulumi/policy";
import { NODE_GROUP_TYPE, azRole, findReferenced, isGpuNodeGroup } from "./conventions";
import { num, str, type Props } from "./props";

const SCHEDULE_TYPE = "aws:autoscaling/schedule:Schedule";

function isScaleDown(p: Props): boolean {
  return num(p.desiredCapacity) === 0 || num(p.maxSize) === 0;
}

function isScaleUp(p: Props): boolean {
  return (num(p.desiredCapacity) ?? 0) > 0 || (num(p.minSize) ?? 0) > 0;
}

/**
 * The node group whose auto scaling group a schedule targets. EKS names a managed group's
 * ASG `eks-<nodeGroupName>-<uuid>`; the engine records the output dependency, mocks do not,
 * so the longest node group name inside the ASG name wins (`gpu-a` must not claim `gpu-a2`'s ASG).
 */
function targetGroup(resources: readonly PolicyResource[], schedule: PolicyResource): PolicyResource | undefined {
  const asg = str((schedule.props as Props).autoscalingGroupName);
  const byRef = findReferenced(resources, schedule, "autoscalingGroupName", asg, NODE_GROUP_TYPE);
  if (byRef || asg === undefined) return byRef;
  let best: PolicyResource | undefined;
  let bestLen = 0;
  for (const g of resources) {
    if (g.type !== NODE_GROUP_TYPE) continue;
    for (const n of [str((g.props as Props).nodeGroupName), g.name]) {
      if (n && asg.includes(n) && n.length > bestLen) {
        best = g;
        bestLen = n.length;
      }
    }
  }
  return best;
}

export const standbyScheduleRules: StackValidationPolicy = {
  name: "standby-schedule-rules",
  description:
    "Scheduled scaling only parks standby GPU node groups, and every scale-down has a matching scale-up on the same group; no schedule touches an active group or a group on a Capacity Block (L2 cluster tier: the active AZs keep their capacity and the standby AZ always comes back; a block ends and AWS scales it down itself, which a recurring scale-up would fight).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const downs = new Map<string, PolicyResource>();
    const ups = new Set<string>();
    for (const s of args.resources) {
      if (s.type !== SCHEDULE_TYPE) continue;
      const p = s.props as Props;
      const group = targetGroup(args.resources, s);
      const asg = str(p.autoscalingGroupName) ?? "(unset)";
      if (!group) {
        if (isScaleDown(p)) {
          reportViolation(`Schedule ${s.name} scales ${asg} down but no standby GPU node group in the stack owns that group.`, s.urn);
        }
        continue;
      }
      const gp = group.props as Props;
      const role = azRole(gp);
      if (isGpuNodeGroup(gp) && role !== "standby") {
        reportViolation(`Schedule ${s.name} targets ${role ?? "unlabelled"} GPU node group ${group.name}; only standby groups may be scheduled.`, s.urn);
        continue;
      }
      if (str(gp.capacityType) === "CAPACITY_BLOCK") {
        reportViolation(
          `Schedule ${s.name} targets ${group.name}, which runs on a Capacity Block: the block is paid for whether it runs or not, and it ends (≤ 182 days; EC2 scales it down and takes the instances back), so a recurring schedule saves nothing and outlives it. Leave block groups unscheduled.`,
          s.urn,
        );
        continue;
      }
      if (isScaleDown(p)) {
        if (!isGpuNodeGroup(gp)) {
          reportViolation(`Schedule ${s.name} scales non-GPU node group ${group.name} down; only standby GPU groups may be parked.`, s.urn);
          continue;
        }
        downs.set(group.urn, group);
      }
      if (isScaleUp(p)) ups.add(group.urn);
    }
    for (const [urn, group] of downs) {
      if (!ups.has(urn)) {
        reportViolation(`Standby node group ${group.name} has a scale-down schedule but no scale-up schedule.`, urn);
      }
    }
  },
};
