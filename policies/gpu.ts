// GPU node groups: the capacity every tier is measured in. One group per AZ is what lets
// L2 reason about an AZ's capacity and L3 lose a zone without losing the service.
import * as aws from "@pulumi/aws";
import {
  validateResourceOfType,
  type ResourceValidationPolicy,
  type StackValidationPolicy,
} from "@pulumi/policy";
import {
  AZ_LABEL,
  AZ_ROLE_LABEL,
  GPU_CLASS_LABEL,
  GPU_TAINT_KEY,
  LAUNCH_TEMPLATE_TYPE,
  NODE_GROUP_TYPE,
  NODEPOOL_TYPE,
  findReferenced,
  nodePoolAzs,
  onExistingCluster,
  isGpuNodeGroup,
  nodeGroupAzs,
} from "./conventions";
import { joinWords, list, record, str, stringMap, strings, type Props } from "./props";

export interface GpuNodeGroupsMultiAzConfig {
  minAzs: number;
}

export const gpuNodeGroupsMultiAz: StackValidationPolicy = {
  name: "gpu-node-groups-multi-az",
  description:
    "GPU node groups span at least two availability zones (L3 zone tier: losing one AZ must leave GPU capacity to fail over to).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      minAzs: { type: "integer", minimum: 1, default: 2, description: "Distinct AZs the GPU node groups must cover." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { minAzs } = args.getConfig<GpuNodeGroupsMultiAzConfig>();
    const groups = args.resources.filter((r) => r.type === NODE_GROUP_TYPE && isGpuNodeGroup(r.props as Props));
    // Karpenter NodePools count by the one AZ each is pinned to (nodepool-single-az checks the pin).
    const poolAzs = args.resources.filter((r) => r.type === NODEPOOL_TYPE).map((r) => nodePoolAzs(r.props as Props)).filter((a) => a.length === 1).map((a) => a[0]);
    if (groups.length === 0 && poolAzs.length === 0) {
      // On an existing cluster with adopted node groups the groups are the operator's: llm-ha preflight checks them.
      if (onExistingCluster(args.resources)) return;
      reportViolation(`The stack has no GPU node groups; it needs GPU node groups in at least ${minAzs} AZs.`);
      return;
    }
    const azs = new Set<string>(poolAzs);
    for (const g of groups) {
      const resolved = nodeGroupAzs(args.resources, g);
      // A subnet the stack does not create (or mocks cannot resolve) still names one AZ:
      // fall back to the group's AZ label, then to the subnet id itself.
      const label = stringMap((g.props as Props).labels)[AZ_LABEL];
      if (resolved.azs.length > 0) resolved.azs.forEach((az) => azs.add(az));
      else if (label) azs.add(label);
      else resolved.unresolved.forEach((id) => azs.add(id));
    }
    if (azs.size < minAzs) {
      const found = [...azs].sort();
      reportViolation(
        `GPU node groups cover ${azs.size} AZ${azs.size === 1 ? "" : "s"} (${found.join(", ") || "none"}); at least ${minAzs} are required.`,
      );
    }
  },
};

export const gpuNodeGroupSingleAz: StackValidationPolicy = {
  name: "gpu-node-group-single-az",
  description:
    "Each GPU node group is pinned to exactly one AZ (L2 cluster tier: an AZ's GPU capacity is one group the controller can count, wake and scale; a multi-AZ group rebalances nodes across zones).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const g of args.resources) {
      if (g.type !== NODE_GROUP_TYPE || !isGpuNodeGroup(g.props as Props)) continue;
      const subnetIds = strings((g.props as Props).subnetIds);
      const { azs, unresolved } = nodeGroupAzs(args.resources, g);
      if (subnetIds.length === 0) {
        reportViolation(`GPU node group ${g.name} has no subnetIds; give it the subnet of exactly one AZ.`, g.urn);
      } else if (azs.length > 1) {
        reportViolation(`GPU node group ${g.name} spans ${azs.length} AZs (${azs.join(", ")}); pin it to one AZ.`, g.urn);
      } else if (unresolved.length > 0 && subnetIds.length > 1) {
        // Without the subnets' AZs, more than one subnet cannot be shown to be one AZ.
        reportViolation(
          `GPU node group ${g.name} has ${subnetIds.length} subnets whose AZs are not in the stack; give it exactly one subnet.`,
          g.urn,
        );
      }
      const label = stringMap((g.props as Props).labels)[AZ_LABEL];
      if (label && azs.length === 1 && label !== azs[0]) {
        reportViolation(`GPU node group ${g.name} is labelled ${AZ_LABEL}=${label} but its subnet is in ${azs[0]}.`, g.urn);
      }
    }
  },
};

export const gpuNodeGroupTaintAndLabels: ResourceValidationPolicy = {
  name: "gpu-node-group-taint-and-labels",
  description: `GPU node groups carry the ${GPU_TAINT_KEY} NoSchedule taint and the ${GPU_CLASS_LABEL}, ${AZ_LABEL} and ${AZ_ROLE_LABEL} labels (L1 node and L2 cluster tiers: only GPU pods land on GPU nodes, and the agent, proxy and controller find nodes by class, AZ and role).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: validateResourceOfType(aws.eks.NodeGroup, (ng, args, reportViolation) => {
    const props = args.props as Props;
    if (!isGpuNodeGroup(props)) return;
    const tainted = list(props.taints).some((t) => {
      const taint = record(t);
      return str(taint?.key) === GPU_TAINT_KEY && str(taint?.effect) === "NO_SCHEDULE";
    });
    if (!tainted) reportViolation(`GPU node group ${args.name} has no ${GPU_TAINT_KEY} taint with effect NO_SCHEDULE.`);
    const labels = stringMap(ng.labels);
    const missing = [GPU_CLASS_LABEL, AZ_LABEL, AZ_ROLE_LABEL].filter((k) => !labels[k]);
    if (missing.length > 0) {
      reportViolation(`GPU node group ${args.name} lacks the label${missing.length > 1 ? "s" : ""} ${joinWords(missing)}.`);
    }
    const role = labels[AZ_ROLE_LABEL];
    if (role && role !== "active" && role !== "standby") {
      reportViolation(`GPU node group ${args.name} has ${AZ_ROLE_LABEL}=${role}; use active or standby.`);
    }
  }),
};

export interface GpuInstanceTypesConfig {
  allowedInstanceTypes: string[];
}

/**
 * GPU instance types a node group (or a capacity block) may use: A100 p4d.24xlarge / p4de.24xlarge, H100 p5.48xlarge,
 * and the H200 p5e.48xlarge / p5en.48xlarge the h100 class's standby falls back to (8 GPUs, more memory).
 */
export const ALLOWED_GPU_INSTANCE_TYPES: readonly string[] = Object.freeze(["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"]);

/** The `allowedInstanceTypes` config property of the policies that check GPU instance types. */
export function allowedInstanceTypesProperty(description: string): Record<string, unknown> {
  return { type: "array", items: { type: "string" }, default: [...ALLOWED_GPU_INSTANCE_TYPES], description };
}

export const gpuInstanceTypesAllowed: ResourceValidationPolicy = {
  name: "gpu-instance-types-allowed",
  description:
    "GPU node groups use only the allowed instance types (L2 cluster tier: AZ capacity is counted in known GPUs per node, and failover sizing assumes them).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      allowedInstanceTypes: allowedInstanceTypesProperty("Instance types a GPU node group may use (A100 p4d.24xlarge / p4de.24xlarge, H100 p5.48xlarge, H200 p5e.48xlarge / p5en.48xlarge)."),
    },
  },
  validateResource: validateResourceOfType(aws.eks.NodeGroup, (ng, args, reportViolation) => {
    if (!isGpuNodeGroup(args.props as Props)) return;
    const { allowedInstanceTypes } = args.getConfig<GpuInstanceTypesConfig>();
    const types = strings(ng.instanceTypes);
    // A capacity block names its type in the launch template: gpu-capacity-settings checks it.
    if (types.length === 0 && ng.capacityType === "CAPACITY_BLOCK") return;
    if (types.length === 0) {
      reportViolation(`GPU node group ${args.name} sets no instanceTypes; allowed: ${allowedInstanceTypes.join(", ")}.`);
      return;
    }
    const bad = types.filter((t) => !allowedInstanceTypes.includes(t));
    if (bad.length > 0) {
      reportViolation(
        `GPU node group ${args.name} uses ${bad.join(", ")}, not in the allowed instance types (${allowedInstanceTypes.join(", ")}).`,
      );
    }
  }),
};

export const gpuLaunchTemplateImdsv2: StackValidationPolicy = {
  name: "gpu-launch-template-imdsv2",
  description:
    "GPU node groups use a launch template that requires IMDSv2 (L1 node tier: the agent learns its AZ from IMDSv2, and pods on GPU nodes must not read node credentials through IMDSv1).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const g of args.resources) {
      if (g.type !== NODE_GROUP_TYPE || !isGpuNodeGroup(g.props as Props)) continue;
      const ref = record((g.props as Props).launchTemplate);
      if (!ref) {
        reportViolation(`GPU node group ${g.name} has no launchTemplate; it needs one with metadataOptions.httpTokens "required".`, g.urn);
        continue;
      }
      const lt = findReferenced(args.resources, g, "launchTemplate", str(ref.id) ?? str(ref.name), LAUNCH_TEMPLATE_TYPE);
      if (!lt) {
        reportViolation(
          `GPU node group ${g.name} uses launch template ${str(ref.id) ?? str(ref.name) ?? "(unnamed)"}, which is not in the stack; IMDSv2 cannot be verified.`,
          g.urn,
        );
        continue;
      }
      const tokens = str(record((lt.props as Props).metadataOptions)?.httpTokens);
      if (tokens !== "required") {
        reportViolation(
          `Launch template ${lt.name} of GPU node group ${g.name} has metadataOptions.httpTokens ${tokens === undefined ? "unset" : `"${tokens}"`}; it must be "required" (IMDSv2).`,
          lt.urn,
        );
      }
    }
  },
};
