// What a later `pulumi up` or an EKS roll does to node groups that already run, which a
// create-time check of the graph does not see: how a GPU group rolls a new AMI or launch
// template (surge first needs a GPU the reservation does not have), whether a group on a
// reservation or Capacity Block starts empty (the reservation may not be active yet), and
// whether every AZ has a system node for its zone-pinned L1 pods. docs/infra.md "Update
// behaviour"; test/policies/update-time.test.ts keeps each fault as a fixture.
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { DESIRED_FROM_TAG } from "../contracts/scarce-gpus";
import { gpuNodeGroupsWithTemplates, isGpuNodeGroup, NODE_GROUP_TYPE, nodeGroupAzs, onExistingCluster, ZONE_KEY } from "./conventions";
import { num, record, str, stringMap, strings, type Props } from "./props";

/** Label the system node groups carry and the controller and L1 pods select. */
export const SYSTEM_ROLE_LABEL = "llm-ha.io/node-role";
const DEPLOYMENT = "kubernetes:apps/v1:Deployment";

export const gpuNodeGroupMinimalUpdate: ResourceValidationPolicy = {
  name: "gpu-node-group-minimal-update",
  description:
    'Every GPU node group updates with updateConfig.updateStrategy "MINIMAL" (L2 cluster tier: the DEFAULT strategy launches an extra node before it drains one, so every AMI, launch-template or Kubernetes-version roll needs a p5 more than the reservation or Capacity Block holds, and the update fails on a full one).',
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (args.type !== NODE_GROUP_TYPE || !isGpuNodeGroup(args.props as Props)) return;
    const strategy = str(record((args.props as Props).updateConfig)?.updateStrategy) ?? "DEFAULT";
    if (strategy !== "MINIMAL") {
      reportViolation(
        `GPU node group ${args.name} updates with strategy ${strategy}: each roll first launches an extra GPU node, which a full reservation or block cannot give. Set updateConfig: { updateStrategy: "MINIMAL", maxUnavailable: 1 }.`,
      );
    }
  },
};

export const gpuReservedStartAtZero: StackValidationPolicy = {
  name: "gpu-reserved-start-at-zero",
  description:
    "A GPU node group on a capacity reservation or Capacity Block is created with desiredSize and minSize 0, and sized once the reservation is active (by the leader: `LLMHA_RESERVED_GROUPS`) (L2: a reservation that is scheduled, pending or smaller than the group's size at creation leaves the group CREATE_FAILED, which only a replacement fixes). Groups that already run keep their running size.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const { group: g, props: p, reservation } of gpuNodeGroupsWithTemplates(args.resources)) {
      const block = str(p.capacityType) === "CAPACITY_BLOCK";
      if (reservation === undefined && !block) continue;
      if (stringMap(p.tags)[DESIRED_FROM_TAG] === "running") continue;
      const sc = record(p.scalingConfig);
      const desired = num(sc?.desiredSize) ?? 0;
      const min = num(sc?.minSize) ?? 0;
      if (desired > 0 || min > 0) {
        reportViolation(
          `GPU node group ${g.name} on ${block ? "a Capacity Block" : `reservation ${reservation}`} is created with desiredSize ${desired}, minSize ${min}: a reservation not yet active, or smaller than that, leaves it CREATE_FAILED. Create it at 0 and size it once the reservation is active.`,
          g.urn,
        );
      }
    }
  },
};

/** The AZ an L1-style Deployment is pinned to on system nodes (`nodeSelector` zone and node-role system), if any. */
function pinnedSystemAz(props: Props): string | undefined {
  const sel = stringMap(record(record(record(props.spec)?.template)?.spec)?.nodeSelector);
  return sel[SYSTEM_ROLE_LABEL] === "system" ? sel[ZONE_KEY] : undefined;
}

export const systemNodeGroupPerAz: StackValidationPolicy = {
  name: "system-node-group-per-az",
  description:
    "Each system node group is pinned to one AZ, and every AZ whose L1 pods are pinned to system nodes has a system node group with minSize ≥ 1 (L1 tier: one group across the AZs may leave an AZ without a system node, and that AZ's zone-pinned L1 pods and the controller's DoNotSchedule spread stay Pending).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const systemGroups = args.resources.filter(
      (r) => r.type === NODE_GROUP_TYPE && !isGpuNodeGroup(r.props as Props) && stringMap((r.props as Props).labels)[SYSTEM_ROLE_LABEL] === "system",
    );
    const covered = new Set<string>();
    for (const g of systemGroups) {
      const { azs, unresolved } = nodeGroupAzs(args.resources, g);
      const subnets = strings((g.props as Props).subnetIds);
      if (azs.length > 1 || (unresolved.length > 0 && subnets.length > 1)) {
        reportViolation(
          `System node group ${g.name} spans ${azs.length > 1 ? `${azs.length} AZs (${azs.join(", ")})` : `${subnets.length} subnets`}: EKS may leave an AZ without a system node, and its zone-pinned L1 pods Pending. Make one system node group per AZ, each with one subnet and minSize ≥ 1.`,
          g.urn,
        );
        continue;
      }
      if ((num(record((g.props as Props).scalingConfig)?.minSize) ?? 0) >= 1) azs.forEach((az) => covered.add(az));
    }
    // On an existing cluster the system nodes are the operator's (labelled llm-ha.io/node-role=system): llm-ha preflight checks each AZ has one.
    if (onExistingCluster(args.resources)) return;
    const pinned = new Set(args.resources.filter((r) => r.type === DEPLOYMENT).map((r) => pinnedSystemAz(r.props as Props)).filter((az): az is string => az !== undefined));
    for (const az of [...pinned].sort()) {
      if (!covered.has(az)) reportViolation(`AZ ${az} has L1 pods pinned to system nodes but no single-AZ system node group there with minSize ≥ 1: they stay Pending.`);
    }
  },
};
