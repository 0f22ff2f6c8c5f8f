import * as k8s from "@pulumi/kubernetes";
import { GPU_TAINT, LABELS } from "../names";

export type Deployment = k8s.types.input.apps.v1.Deployment;
export type DaemonSet = k8s.types.input.apps.v1.DaemonSet;
export type Service = k8s.types.input.core.v1.Service;
export type PodDisruptionBudget = k8s.types.input.policy.v1.PodDisruptionBudget;
export type ConfigMap = k8s.types.input.core.v1.ConfigMap;
export type ClusterRole = k8s.types.input.rbac.v1.ClusterRole;
export type ClusterRoleBinding = k8s.types.input.rbac.v1.ClusterRoleBinding;
export type Role = k8s.types.input.rbac.v1.Role;
export type RoleBinding = k8s.types.input.rbac.v1.RoleBinding;
export type ServiceAccount = k8s.types.input.core.v1.ServiceAccount;

/** Annotation that tells Pulumi's Kubernetes provider not to wait for the object to become ready. */
export const SKIP_AWAIT = "pulumi.com/skipAwait";

export const GPU_TOLERATION = Object.freeze({ key: GPU_TAINT.key, operator: "Exists", effect: GPU_TAINT.effect });

/** Node affinity to every GPU node, of any class and AZ (the class label the GPU node groups set): with
 *  GPU_TOLERATION, what keeps a per-node GPU DaemonSet (device plugin, DCGM exporter) off every other node. */
export const ANY_GPU_NODE_AFFINITY = Object.freeze({
  nodeAffinity: {
    requiredDuringSchedulingIgnoredDuringExecution: {
      nodeSelectorTerms: [{ matchExpressions: [{ key: LABELS.gpuClass, operator: "Exists" }] }],
    },
  },
});

/** Labels of one workload instance in one AZ (and GPU class, for GPU workloads). */
export function appLabels(app: string, az: string, gpuClass?: string): Record<string, string> {
  return {
    "app.kubernetes.io/name": app,
    "app.kubernetes.io/part-of": "llm-ha",
    [LABELS.az]: az,
    ...(gpuClass ? { [LABELS.gpuClass]: gpuClass } : {}),
  };
}

/** Node selector of one AZ's GPU node group of one class (the labels the node group sets). */
export function gpuNodeSelector(az: string, gpuClass: string): Record<string, string> {
  return { [LABELS.az]: az, [LABELS.gpuClass]: gpuClass };
}

/** A PDB that lets one pod of the selection go at a time (drains, AMI rolls). */
export function onePodAtATime(name: string, namespace: string, matchLabels: Record<string, string>): PodDisruptionBudget {
  return {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: { name, namespace, labels: matchLabels },
    spec: { maxUnavailable: 1, selector: { matchLabels } },
  };
}

/** Kubernetes object names from AZ names (`us-east-1a` is already DNS-safe). */
export function objectName(...parts: string[]): string {
  return parts.join("-").toLowerCase().replace(/[^a-z0-9-]/g, "-").slice(0, 63).replace(/-+$/, "");
}
