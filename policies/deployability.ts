// What a fresh AWS account needs for `pulumi up` to reach serving traffic, where a mock
// cannot see it: a supported EKS version, capacity settings that match how AWS reserves
// GPUs, and the controller every NLB Service waits for.
import { type StackValidationPolicy } from "@pulumi/policy";
import { chartNameOf } from "../contracts/charts";
import { EKS_SUPPORT_WARNING_DAYS, eksSupportEndingSoon, eksVersionProblem, isoDay } from "../contracts/eks-versions";
import { gpuNodeGroupsWithTemplates, nodeGroupAzs, onExistingCluster, AZ_LABEL } from "./conventions";
import { record, str, stringMap, strings, type Props } from "./props";
import { allowedInstanceTypesProperty } from "./gpu";

export const EKS_CLUSTER_TYPE = "aws:eks/cluster:Cluster";
export const HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release";
export const LB_CONTROLLER_CHART = "aws-load-balancer-controller";
export const NLB_CLASS = "service.k8s.aws/nlb";

export interface EksVersionSupportedConfig {
  /** Judge support on this day (YYYY-MM-DD); empty: today. */
  asOf: string;
  allowExtendedSupport: boolean;
}

export const eksVersionSupported: StackValidationPolicy = {
  name: "eks-version-supported",
  description:
    "EKS clusters run a Kubernetes version in standard support (contracts/eks-versions.ts) with upgradePolicy.supportType STANDARD (L2/L3: a control plane out of support is upgraded by AWS on its own schedule, mid-incident if need be).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      asOf: { type: "string", default: "", description: "Day the support windows are judged on (YYYY-MM-DD); empty means today." },
      allowExtendedSupport: { type: "boolean", default: false, description: "Accept a version in extended support (billed extra)." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { asOf, allowExtendedSupport } = args.getConfig<EksVersionSupportedConfig>();
    const day = asOf || isoDay(new Date());
    for (const c of args.resources.filter((r) => r.type === EKS_CLUSTER_TYPE)) {
      const p = c.props as Props;
      const version = str(p.version);
      if (version === undefined) {
        reportViolation(`EKS cluster ${c.name} sets no version: EKS would pick its default, which no table here vouches for.`, c.urn);
        continue;
      }
      const why = eksVersionProblem(version, day, allowExtendedSupport);
      if (why) reportViolation(`EKS cluster ${c.name}: ${why}.`, c.urn);
      const support = str(record(p.upgradePolicy)?.supportType);
      if (!allowExtendedSupport && support !== "STANDARD") {
        reportViolation(
          `EKS cluster ${c.name} has upgradePolicy.supportType ${support === undefined ? "unset (EKS defaults to EXTENDED)" : `"${support}"`}; set "STANDARD".`,
          c.urn,
        );
      }
    }
  },
};

export interface EksVersionSupportEndingConfig {
  /** Judge on this day (YYYY-MM-DD); empty: today. */
  asOf: string;
  warningDays: number;
}

export const eksVersionSupportEnding: StackValidationPolicy = {
  name: "eks-version-support-ending",
  description: `EKS clusters run a Kubernetes version that stays in standard support for more than ${EKS_SUPPORT_WARNING_DAYS} days (contracts/eks-versions.ts): warned before AWS upgrades the control plane on its own schedule and the next \`pulumi up\` tries to take it back (L2/L3: an upgrade chosen by AWS lands mid-incident if need be).`,
  enforcementLevel: "advisory",
  configSchema: {
    properties: {
      asOf: { type: "string", default: "", description: "Day the support windows are judged on (YYYY-MM-DD); empty means today." },
      warningDays: { type: "integer", minimum: 1, default: EKS_SUPPORT_WARNING_DAYS, description: "Warn this many days before the end of standard support." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { asOf, warningDays } = args.getConfig<EksVersionSupportEndingConfig>();
    const day = asOf || isoDay(new Date());
    for (const c of args.resources.filter((r) => r.type === EKS_CLUSTER_TYPE)) {
      const version = str((c.props as Props).version);
      const soon = version === undefined ? undefined : eksSupportEndingSoon(version, day, warningDays);
      if (soon) reportViolation(`EKS cluster ${c.name}: ${soon}.`, c.urn);
    }
  },
};

export interface GpuCapacitySettingsConfig {
  allowedInstanceTypes: string[];
}

export const gpuCapacitySettings: StackValidationPolicy = {
  name: "gpu-capacity-settings",
  description:
    "GPU capacity settings match how AWS reserves GPUs (L2: a wake-up or a replacement must find capacity): a capacity reservation is targeted from one AZ only, a node group launching into a reservation lists one instance type, and a CAPACITY_BLOCK group's launch template has the capacity-block market type, a reservation and an allowed instance type.",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      allowedInstanceTypes: allowedInstanceTypesProperty("Instance types a capacity block may be for (same as gpu-instance-types-allowed)."),
    },
  },
  validateStack: (args, reportViolation) => {
    const { allowedInstanceTypes } = args.getConfig<GpuCapacitySettingsConfig>();
    const azsOfReservation = new Map<string, Set<string>>();
    for (const { group: g, props: p, launchTemplate: lt, ltProps: ltp, reservation } of gpuNodeGroupsWithTemplates(args.resources)) {
      const resolved = nodeGroupAzs(args.resources, g);
      const az = resolved.azs[0] ?? stringMap(p.labels)[AZ_LABEL] ?? resolved.unresolved[0] ?? g.name;
      if (reservation) {
        const set = azsOfReservation.get(reservation) ?? new Set<string>();
        set.add(az);
        azsOfReservation.set(reservation, set);
      }
      const types = strings(p.instanceTypes);
      if (reservation && types.length > 1) {
        reportViolation(`GPU node group ${g.name} launches into reservation ${reservation} but lists ${types.length} instance types (${types.join(", ")}); a reservation is for one.`, g.urn);
      }
      if (str(p.capacityType) === "CAPACITY_BLOCK") {
        const market = str(record(ltp.instanceMarketOptions)?.marketType);
        const type = str(ltp.instanceType);
        const missing: string[] = [];
        if (!lt) missing.push("a launch template in the stack");
        else {
          if (market !== "capacity-block") missing.push('instanceMarketOptions.marketType "capacity-block"');
          if (!reservation) missing.push("capacityReservationSpecification.capacityReservationTarget");
          if (type === undefined) missing.push("instanceType");
          else if (!allowedInstanceTypes.includes(type)) missing.push(`an allowed instanceType (not ${type}; allowed: ${allowedInstanceTypes.join(", ")})`);
        }
        if (types.length > 0) missing.push("no instanceTypes on the node group (the launch template names it)");
        if (missing.length) reportViolation(`CAPACITY_BLOCK GPU node group ${g.name} needs ${missing.join(", ")}.`, g.urn);
      }
    }
    for (const [cr, azs] of azsOfReservation) {
      if (azs.size > 1) {
        reportViolation(`Capacity reservation ${cr} is targeted from ${azs.size} AZs (${[...azs].sort().join(", ")}); a reservation belongs to one AZ, the others cannot launch.`);
      }
    }
  },
};

export const nlbNeedsLbController: StackValidationPolicy = {
  name: "nlb-needs-lb-controller",
  description:
    "A stack with NLB Services (loadBalancerClass service.k8s.aws/nlb) installs the AWS Load Balancer Controller from a pinned chart version (L1/L3: without it the Services never get an address and the Route53 records have no target).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const nlbs = args.resources.filter(
      (r) => r.type === "kubernetes:core/v1:Service" && str(record((r.props as Props).spec)?.loadBalancerClass) === NLB_CLASS,
    );
    // An existing cluster runs its own load balancer controller (llm-ha preflight checks it is there).
    if (nlbs.length === 0 || onExistingCluster(args.resources)) return;
    // By name, archive path or OCI reference alike (charts-by-digest wants one of the last two).
    const releases = args.resources.filter((r) => r.type === HELM_RELEASE_TYPE && chartNameOf(str((r.props as Props).chart) ?? "", str((r.props as Props).version)) === LB_CONTROLLER_CHART);
    if (releases.length === 0) {
      reportViolation(
        `${nlbs.length} Service${nlbs.length > 1 ? "s" : ""} of class ${NLB_CLASS} (${nlbs.map((s) => s.name).join(", ")}) but no Helm release of ${LB_CONTROLLER_CHART} in the stack: nothing would give them an NLB.`,
      );
      return;
    }
    for (const r of releases) {
      const version = str((r.props as Props).version);
      if (!version || !/^\d+\.\d+\.\d+$/.test(version)) {
        reportViolation(`Helm release ${r.name} of ${LB_CONTROLLER_CHART} has version ${version ?? "unset"}; pin an exact chart version.`, r.urn);
      }
      const sa = record(record((r.props as Props).values)?.serviceAccount);
      if (!str(stringMap(sa?.annotations)["eks.amazonaws.com/role-arn"])) {
        reportViolation(`Helm release ${r.name} of ${LB_CONTROLLER_CHART} gives its ServiceAccount no IAM role (eks.amazonaws.com/role-arn): the controller could not call AWS.`, r.urn);
      }
    }
  },
};
