/** Kubernetes names the infrastructure's components share: labels, taints, app names, the namespace. A leaf: it imports nothing. */

/** Node labels the workloads select on. */
export const LABELS = Object.freeze({
  gpuClass: "llm-ha.io/gpu-class",
  az: "llm-ha.io/az",
  azRole: "llm-ha.io/az-role",
  zone: "topology.kubernetes.io/zone",
});

/** The taint that keeps everything but GPU workloads off GPU nodes. */
export const GPU_TAINT = Object.freeze({ key: "nvidia.com/gpu", value: "true", effect: "NoSchedule" });

/** `app.kubernetes.io/name` of each workload. */
export const APP = Object.freeze({ inference: "inference", agent: "llm-ha-agent", l1: "l1-proxy", devicePlugin: "nvidia-device-plugin" });

/** Namespace of everything but the device plugin, unless `namespace` says otherwise. */
export const WORKLOADS_NAMESPACE = "llm-ha";
