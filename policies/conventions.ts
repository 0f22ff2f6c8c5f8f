// The names the infrastructure and the policies agree on, and the lookups several
// policies share (which node group is a GPU one, which resource an id points at).
import type { PolicyResource } from "@pulumi/policy";
import { list, record, str, stringMap, strings, type Props } from "./props";

export const GPU_RESOURCE = "nvidia.com/gpu";
/** The taint key on GPU nodes; only pods that tolerate it land there. */
export const GPU_TAINT_KEY = "nvidia.com/gpu";
export const GPU_CLASS_LABEL = "llm-ha.io/gpu-class";
export const AZ_LABEL = "llm-ha.io/az";
export const AZ_ROLE_LABEL = "llm-ha.io/az-role";
/** Label (and tag) of a standby AZ's fallback node group: another instance type of the class, at zero until the agent wakes it. */
export const STANDBY_FALLBACK_LABEL = "llm-ha.io/standby-fallback";
/** Tag of a standby node group that may go without a capacity fallback: the reason (`llm-ha:standbyCapacityWaiver`). */
export const CAPACITY_WAIVER_TAG = "llm-ha.io/capacity-waiver";
export const HOSTNAME_KEY = "kubernetes.io/hostname";
export const ZONE_KEY = "topology.kubernetes.io/zone";

export const NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup";
/** Karpenter v1's NodePool, as the Kubernetes provider registers it. */
export const NODEPOOL_TYPE = "kubernetes:karpenter.sh/v1:NodePool";
/** `llm-ha.io/role` of a NodePool and its nodes: `active`, `standby` or `fallback`. */
export const POOL_ROLE_LABEL = "llm-ha.io/role";
/** Pod label of the standby's placeholder (GPU-requesting pause pods that make Karpenter provision): capacity, not inference. */
export const CAPACITY_PLACEHOLDER_LABEL = "llm-ha.io/capacity-placeholder";

/**
 * A stack on a cluster it does not own ("bring your own cluster"): it applies Kubernetes objects
 * but creates no EKS cluster. Its VPC, system nodes, load balancer controller and (adopted) node
 * groups are the operator's, which `llm-ha preflight` checks against the live cluster instead.
 */
export function onExistingCluster(resources: readonly PolicyResource[]): boolean {
  return !resources.some((r) => r.type === "aws:eks/cluster:Cluster") && resources.some((r) => r.type.startsWith("kubernetes:"));
}

/** The zones a NodePool's template requires (`topology.kubernetes.io/zone In [...]`); empty when it does not pin any. */
export function nodePoolAzs(pool: Props): string[] {
  const reqs = list(record(record(record(pool.spec)?.template)?.spec)?.requirements).map(record);
  const zone = reqs.find((r) => str(r?.key) === ZONE_KEY && str(r?.operator) === "In");
  return strings(zone?.values);
}

/** Whether a workload is the standby's placeholder (by its pod template's label). */
export function isCapacityPlaceholder(workload: Props): boolean {
  return stringMap(record(record(record(workload.spec)?.template)?.metadata)?.labels)[CAPACITY_PLACEHOLDER_LABEL] === "true";
}
export const SUBNET_TYPE = "aws:ec2/subnet:Subnet";
export const LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate";

// P and G instance families carry NVIDIA GPUs; the NVIDIA AMI types only make sense on them.
const GPU_INSTANCE_RE = /^(p\d|g\d)[a-z-]*\./;
const GPU_AMI_RE = /NVIDIA|GPU/i;

/** A node group is a GPU group if it says so (class label) or looks like one (instances, AMI). */
export function isGpuNodeGroup(props: Props): boolean {
  if (stringMap(props.labels)[GPU_CLASS_LABEL] !== undefined) return true;
  if (GPU_AMI_RE.test(str(props.amiType) ?? "")) return true;
  return strings(props.instanceTypes).some((t) => GPU_INSTANCE_RE.test(t));
}

export type AzRole = "active" | "standby";

export function azRole(props: Props): AzRole | undefined {
  const role = stringMap(props.labels)[AZ_ROLE_LABEL];
  return role === "active" || role === "standby" ? role : undefined;
}

/**
 * The resource of `type` that `ref` (an id, ARN or name another resource was given) points at.
 * The engine records property dependencies, which settle it; Pulumi's mocks record none, and
 * the infra harness (infra/capture.ts) hands out ids as `<name>-id`, so those match too.
 */
export function findReferenced(
  resources: readonly PolicyResource[],
  from: PolicyResource,
  property: string,
  ref: string | undefined,
  type: string,
): PolicyResource | undefined {
  const deps = (from.propertyDependencies[property] ?? []).filter((r) => r.type === type);
  if (deps.length === 1) return deps[0];
  if (ref === undefined) return undefined;
  return resources.find((r) => {
    if (r.type !== type) return false;
    const p = r.props as Props;
    return p.id === ref || p.arn === ref || p.name === ref || `${r.name}-id` === ref;
  });
}

/** A GPU node group with its launch template (when the stack has it) and the reservation that template targets. */
export interface GpuGroupWithTemplate {
  group: PolicyResource;
  props: Props;
  launchTemplate?: PolicyResource;
  /** The launch template's props, `{}` without one. */
  ltProps: Props;
  reservation?: string;
}

/** Every GPU node group of the stack, each with its launch template and reservation resolved. */
export function gpuNodeGroupsWithTemplates(resources: readonly PolicyResource[]): GpuGroupWithTemplate[] {
  return resources
    .filter((g) => g.type === NODE_GROUP_TYPE && isGpuNodeGroup(g.props as Props))
    .map((group) => {
      const props = group.props as Props;
      const ref = record(props.launchTemplate);
      const launchTemplate = ref ? findReferenced(resources, group, "launchTemplate", str(ref.id) ?? str(ref.name), LAUNCH_TEMPLATE_TYPE) : undefined;
      const ltProps = (launchTemplate?.props ?? {}) as Props;
      const reservation = str(record(record(ltProps.capacityReservationSpecification)?.capacityReservationTarget)?.capacityReservationId);
      return { group, props, launchTemplate, ltProps, reservation };
    });
}

/** The AZ of a subnet resource: its `availabilityZone`, else the zone id. */
export function subnetAz(subnet: PolicyResource): string | undefined {
  const p = subnet.props as Props;
  return str(p.availabilityZone) ?? str(p.availabilityZoneId);
}

/** The AZs a node group's subnets resolve to; subnets that cannot be resolved are returned as such. */
export function nodeGroupAzs(
  resources: readonly PolicyResource[],
  group: PolicyResource,
): { azs: string[]; unresolved: string[] } {
  const azs = new Set<string>();
  const unresolved: string[] = [];
  const deps = (group.propertyDependencies.subnetIds ?? []).filter((r) => r.type === SUBNET_TYPE);
  const ids = strings((group.props as Props).subnetIds);
  if (deps.length > 0 && deps.length === ids.length) {
    for (const d of deps) {
      const az = subnetAz(d);
      if (az) azs.add(az);
    }
    return { azs: [...azs].sort(), unresolved };
  }
  for (const id of ids) {
    const subnet = findReferenced(resources, group, "subnetIds", id, SUBNET_TYPE);
    const az = subnet ? subnetAz(subnet) : undefined;
    if (az) azs.add(az);
    else unresolved.push(id);
  }
  return { azs: [...azs].sort(), unresolved };
}

/** Kubernetes label selector semantics (matchLabels AND matchExpressions); an empty selector matches nothing here. */
export function selectorMatches(selector: unknown, labels: Record<string, string>): boolean {
  const s = record(selector);
  if (!s) return false;
  const matchLabels = stringMap(s.matchLabels);
  const exprs = list(s.matchExpressions).map(record).filter((e): e is Props => e !== undefined);
  if (Object.keys(matchLabels).length === 0 && exprs.length === 0) return false;
  for (const [k, v] of Object.entries(matchLabels)) if (labels[k] !== v) return false;
  for (const e of exprs) {
    const key = str(e.key) ?? "";
    const values = strings(e.values);
    const has = Object.prototype.hasOwnProperty.call(labels, key);
    switch (e.operator) {
      case "In":
        if (!has || !values.includes(labels[key])) return false;
        break;
      case "NotIn":
        if (has && values.includes(labels[key])) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/** `metadata.namespace`, defaulting as the API server does. */
export function namespaceOf(obj: Props): string {
  return str(record(obj.metadata)?.namespace) ?? "default";
}

export function nameOf(obj: Props, fallback: string): string {
  return str(record(obj.metadata)?.name) ?? fallback;
}
