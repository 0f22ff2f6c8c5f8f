// The standby AZ is only a fallback if it can be woken on the day it is needed. The common
// failure is capacity: p4d/p5 InsufficientInstanceCapacity in that AZ. A standby GPU class
// therefore needs a second way to get GPUs there, or a written reason why it does not.
import { type PolicyResource, type StackValidationPolicy } from "@pulumi/policy";
import {
  AZ_LABEL,
  CAPACITY_WAIVER_TAG,
  GPU_CLASS_LABEL,
  LAUNCH_TEMPLATE_TYPE,
  NODE_GROUP_TYPE,
  STANDBY_FALLBACK_LABEL,
  azRole,
  findReferenced,
  isGpuNodeGroup,
  nodeGroupAzs,
} from "./conventions";
import { record, str, stringMap, strings, type Props } from "./props";

/** The AZ a node group is pinned to: its subnet's, else its AZ label. */
function groupAz(resources: readonly PolicyResource[], g: PolicyResource): string | undefined {
  const resolved = nodeGroupAzs(resources, g);
  return resolved.azs[0] ?? stringMap((g.props as Props).labels)[AZ_LABEL] ?? resolved.unresolved[0];
}

const isFallbackGroup = (p: Props): boolean => stringMap(p.labels)[STANDBY_FALLBACK_LABEL] === "true";

/** How the standby group `g` gets GPUs when its first instance type has none in its AZ; undefined when it cannot. */
function fallbackOf(resources: readonly PolicyResource[], g: PolicyResource): string | undefined {
  const p = g.props as Props;
  const types = strings(p.instanceTypes);
  if (types.length > 1) return `a second instance type (${types.slice(1).join(", ")})`;
  if (str(p.capacityType) === "CAPACITY_BLOCK") return "a capacity block";
  const ref = record(p.launchTemplate);
  const lt = ref ? findReferenced(resources, g, "launchTemplate", str(ref.id) ?? str(ref.name), LAUNCH_TEMPLATE_TYPE) : undefined;
  const target = record(record((lt?.props as Props | undefined)?.capacityReservationSpecification)?.capacityReservationTarget);
  const reservation = str(target?.capacityReservationId) ?? str(target?.capacityReservationResourceGroupArn);
  if (reservation) return `capacity reservation ${reservation}`;
  const az = groupAz(resources, g);
  const cls = stringMap(p.labels)[GPU_CLASS_LABEL];
  const other = resources.find((f) => {
    if (f === g || f.type !== NODE_GROUP_TYPE) return false;
    const fp = f.props as Props;
    if (!isFallbackGroup(fp) || stringMap(fp.labels)[GPU_CLASS_LABEL] !== cls || groupAz(resources, f) !== az) return false;
    // A fallback that launches only what the standby group already tries is no fallback.
    return strings(fp.instanceTypes).some((t) => !types.includes(t)) || str(fp.capacityType) === "CAPACITY_BLOCK";
  });
  return other ? `fallback group ${other.name}` : undefined;
}

export const standbyCapacityFallback: StackValidationPolicy = {
  name: "standby-capacity-fallback",
  description:
    `Every standby GPU node group has a way to get GPUs when its instance type has no capacity in its AZ — a second instance type, a fallback node group of the class in the same AZ (${STANDBY_FALLBACK_LABEL}=true) with another type, a capacity reservation in that AZ, or a capacity block — or an explicit waiver (tag ${CAPACITY_WAIVER_TAG}, from llm-ha:standbyCapacityWaiver) (L2 cluster tier: a standby that cannot launch on the day it is woken is no standby).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const g of args.resources) {
      if (g.type !== NODE_GROUP_TYPE) continue;
      const p = g.props as Props;
      if (!isGpuNodeGroup(p) || azRole(p) !== "standby" || isFallbackGroup(p)) continue;
      if (fallbackOf(args.resources, g) !== undefined) continue;
      const waiver = stringMap(p.tags)[CAPACITY_WAIVER_TAG];
      if (waiver !== undefined && waiver.trim().length > 0) continue;
      const types = strings(p.instanceTypes);
      reportViolation(
        `Standby GPU node group ${g.name} (${stringMap(p.labels)[GPU_CLASS_LABEL] ?? "no class"} in ${groupAz(args.resources, g) ?? "an unknown AZ"}) launches only ${types.join(", ") || "its launch template's type"} with no capacity fallback: ` +
          `add a second instance type or a fallback group (llm-ha:standbyFallback), a capacity reservation in that AZ or a capacity block, or waive it with llm-ha:standbyCapacityWaiver "<reason>".`,
        g.urn,
      );
    }
  },
};
