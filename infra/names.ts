/** Kubernetes names the infrastructure's components share: labels, taints, app names, the namespace. A leaf: it imports nothing. */

/** Node labels the workloads select on. */
export const LABELS = Object.freeze({
  gpuClass: "llm-ha.io/gpu-class",
  az: "llm-ha.io/az",
  azRole: "llm-ha.io/az-role",
  zone: "topology.kubernetes.io/zone",
});

/** Node label (and tag) of a standby AZ's fallback group: another instance type of the class, woken only when the standby group cannot launch. */
export const STANDBY_FALLBACK_LABEL = "llm-ha.io/standby-fallback";

/** Tag on the standby groups carrying `llm-ha:standbyCapacityWaiver` (policy standby-capacity-fallback reads it). */
export const CAPACITY_WAIVER_TAG = "llm-ha.io/capacity-waiver";

/** The taint that keeps everything but GPU workloads off GPU nodes. */
export const GPU_TAINT = Object.freeze({ key: "nvidia.com/gpu", value: "true", effect: "NoSchedule" });

/** `app.kubernetes.io/name` of each workload. */
export const APP = Object.freeze({ inference: "inference", agent: "llm-ha-agent", controller: "llm-ha-controller", l1: "l1-proxy", devicePlugin: "nvidia-device-plugin", dcgmExporter: "dcgm-exporter" });

/**
 * Namespace of what needs the host (the agents, vLLM) and their headless Services, unless
 * `namespace` says otherwise. Pod Security Admission `privileged` (infra/workloads/namespaces.ts).
 */
export const WORKLOADS_NAMESPACE = "llm-ha";

/**
 * Namespace of what needs nothing from the host: the L1 tier (HAProxy, key sync, fallback,
 * continuation relay) and the controller, next to the workloads namespace it is named after.
 * Pod Security Admission `restricted`.
 */
export function edgeNamespaceOf(workloadsNamespace: string): string {
  return `${workloadsNamespace}-edge`;
}
export const EDGE_NAMESPACE = edgeNamespaceOf(WORKLOADS_NAMESPACE);

/** A Kubernetes namespace name: a DNS-1123 label (at most 63 characters). */
export const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Pod label that puts a pod behind its role's security group (security groups for pods,
 * infra/fences.ts): `l1` the L1 proxies, `controller` the controller.
 */
export const NET_ROLE_LABEL = "llm-ha.io/net-role";
export const NET_ROLES = Object.freeze(["l1", "controller"] as const);
export type NetRole = (typeof NET_ROLES)[number];
