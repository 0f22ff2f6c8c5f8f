import type * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { standbySize, type GpuClassConfig } from "./config";
import { GPU_TAINT, LABELS, STANDBY_FALLBACK_LABEL, WORKLOADS_NAMESPACE } from "./names";
import { GPU_TOLERATION, type Deployment } from "./workloads/common";

/**
 * Karpenter v1 objects for an existing cluster's GPU capacity (`llm-ha:capacity.engine:
 * karpenter`): one NodePool per AZ and GPU class, pinned to its AZ, plus the standby AZ's
 * fallback pools, an EC2NodeClass per class (unless one is adopted), and the standby's
 * placeholder. Plain manifests here; infra/karpenter-resources.ts registers them.
 */

/** `llm-ha.io/role` on a pool and its nodes: what the pool is for (the leader's wake reads the standby and fallback ones). */
export const POOL_ROLE_LABEL = "llm-ha.io/role";
export type PoolRole = "active" | "standby" | "fallback";

/** Karpenter's GPU resource name in `spec.limits`. */
export const GPU_RESOURCE = "nvidia.com/gpu";

/** The standby's placeholder Deployment (the wake scales it; its pending pods are what makes Karpenter provision). */
export const PLACEHOLDER_NAME = "llm-ha-standby-placeholder";
/** Below every other pod: inference pods preempt the placeholder's. */
export const PLACEHOLDER_PRIORITY = -100;
/** Pod label of the placeholder: capacity, not inference (the policy pack's GPU Deployment rules leave it out). */
export const CAPACITY_PLACEHOLDER_LABEL = "llm-ha.io/capacity-placeholder";

/** `llm-ha-<az>-<gpuClass>`, and `-fallback` for the standby AZ's fallback pool of the class. */
export function nodePoolName(az: string, gpuClass: string, fallback = false): string {
  return `llm-ha-${az}-${gpuClass}${fallback ? "-fallback" : ""}`;
}

/** The EC2NodeClass the stack creates for a GPU class (its capacity reservations are the class's). */
export function nodeClassName(gpuClass: string): string {
  return `llm-ha-${gpuClass}`;
}

/** `p5` of `p5.48xlarge`. */
export function instanceFamily(instanceType: string): string {
  return instanceType.split(".")[0];
}

export interface NodePoolSpec {
  name: string;
  az: string;
  gpuClass: GpuClassConfig;
  role: PoolRole;
  /** `spec.limits["nvidia.com/gpu"]` as created: the active pools' ceiling, "0" for standby and fallback (asleep). */
  gpuLimit: number;
  /** GPUs the leader raises the limit to on a wake (standby and fallback pools). */
  wakeGpus: number;
  instanceTypes: string[];
  nodeClass: string;
}

export interface KarpenterPlan {
  pools: NodePoolSpec[];
  /** `LLMHA_STANDBY_NODEPOOLS`: the standby pools, then the fallback pools, `pool=gpus,…`; undefined without a standby AZ. */
  standbyNodePools?: string;
  /** The placeholder: GPUs per pod, replicas on a wake. Undefined without a standby AZ. */
  placeholder?: { gpusPerPod: number; replicas: number };
}

/**
 * The pools of a stack: per AZ and class, `active` (limit the AZ's ceiling) or `standby` (limit 0,
 * woken by the leader to the standby's size); per class with fallback instance types, a
 * `fallback` pool in the standby AZ (limit 0, raised only when the standby pool cannot launch).
 */
export function karpenterPlan(a: { azs: string[]; standbyAz?: string; standbyCapacityRatio: number; gpuClasses: GpuClassConfig[]; standbyFallback: Partial<Record<string, string[]>>; nodeClass?: string }): KarpenterPlan {
  const pools: NodePoolSpec[] = [];
  for (const az of a.azs) {
    for (const g of a.gpuClasses) {
      const nodeClass = a.nodeClass ?? nodeClassName(g.name);
      if (az !== a.standbyAz) {
        pools.push({ name: nodePoolName(az, g.name), az, gpuClass: g, role: "active", gpuLimit: g.maxPerAz * g.gpusPerNode, wakeGpus: 0, instanceTypes: g.instanceTypes, nodeClass });
        continue;
      }
      const wakeGpus = Math.max(1, standbySize(g, a.standbyCapacityRatio).desired) * g.gpusPerNode;
      pools.push({ name: nodePoolName(az, g.name), az, gpuClass: g, role: "standby", gpuLimit: 0, wakeGpus, instanceTypes: g.instanceTypes, nodeClass });
      const fb = a.standbyFallback[g.name] ?? [];
      if (fb.length) pools.push({ name: nodePoolName(az, g.name, true), az, gpuClass: g, role: "fallback", gpuLimit: 0, wakeGpus, instanceTypes: fb, nodeClass });
    }
  }
  if (a.standbyAz === undefined) return { pools };
  const waking = [...pools.filter((p) => p.role === "standby"), ...pools.filter((p) => p.role === "fallback")];
  const first = a.gpuClasses[0];
  return {
    pools,
    standbyNodePools: waking.map((p) => `${p.name}=${p.wakeGpus}`).join(","),
    placeholder: first ? { gpusPerPod: first.gpusPerNode, replicas: pools.filter((p) => p.role === "standby").reduce((n, p) => n + p.wakeGpus / p.gpuClass.gpusPerNode, 0) } : undefined,
  };
}

/** Karpenter's capacity types for a pool: `reserved` on a Capacity Block, reserved then on-demand where the AZ has a reservation. */
export function capacityTypes(g: GpuClassConfig, az: string): string[] {
  if (g.capacityType === "CAPACITY_BLOCK") return ["reserved"];
  return g.capacityReservations[az] !== undefined ? ["reserved", "on-demand"] : ["on-demand"];
}

/** The labels llm-ha's workloads select on, on the pool and in its node template. */
export function poolLabels(p: Pick<NodePoolSpec, "az" | "gpuClass" | "role">): Record<string, string> {
  return {
    [LABELS.gpuClass]: p.gpuClass.name,
    [LABELS.az]: p.az,
    // The agent DaemonSet and the inference Deployment read az-role (active|standby) as on node groups.
    [LABELS.azRole]: p.role === "active" ? "active" : "standby",
    [POOL_ROLE_LABEL]: p.role,
    ...(p.role === "fallback" ? { [STANDBY_FALLBACK_LABEL]: "true" } : {}),
  };
}

/** A `karpenter.sh/v1` NodePool. */
export function nodePoolManifest(p: NodePoolSpec): { apiVersion: string; kind: string; metadata: { name: string; labels: Record<string, string> }; spec: Record<string, unknown> } {
  const labels = poolLabels(p);
  return {
    apiVersion: "karpenter.sh/v1",
    kind: "NodePool",
    metadata: { name: p.name, labels: { ...labels, "app.kubernetes.io/part-of": "llm-ha" } },
    spec: {
      template: {
        metadata: { labels },
        spec: {
          nodeClassRef: { group: "karpenter.k8s.aws", kind: "EC2NodeClass", name: p.nodeClass },
          requirements: [
            // One AZ per pool: losing the AZ takes out exactly its pools, and Karpenter cannot move an AZ's capacity elsewhere.
            { key: LABELS.zone, operator: "In", values: [p.az] },
            // The class's families at the class's GPU count: a p5.4xlarge (one H100) is not a p5.48xlarge node.
            { key: "karpenter.k8s.aws/instance-family", operator: "In", values: [...new Set(p.instanceTypes.map(instanceFamily))] },
            { key: "node.kubernetes.io/instance-type", operator: "In", values: p.instanceTypes },
            { key: "karpenter.sh/capacity-type", operator: "In", values: capacityTypes(p.gpuClass, p.az) },
          ],
          taints: [{ key: GPU_TAINT.key, value: GPU_TAINT.value, effect: GPU_TAINT.effect }],
          // A GPU node serving a model is not rolled on a timer; AMI updates go through drift.
          expireAfter: "Never",
        },
      },
      // Empty nodes go (a released standby); busy ones are never consolidated away under a model.
      disruption: { consolidationPolicy: "WhenEmpty", consolidateAfter: "5m", budgets: [{ nodes: "1" }] },
      limits: { [GPU_RESOURCE]: String(p.gpuLimit) },
    },
  };
}

/** IMDSv2 only, one hop: a pod off the host network cannot reach the node role's credentials (as the node groups' launch templates). */
export const NODE_METADATA_OPTIONS = Object.freeze({ httpEndpoint: "enabled", httpProtocolIPv6: "disabled", httpPutResponseHopLimit: 1, httpTokens: "required" });

/** A `karpenter.k8s.aws/v1` EC2NodeClass for one GPU class: the private subnets, the GPU nodes' fence, the class's reservations. */
export function ec2NodeClassManifest(a: {
  name: string;
  role: pulumi.Input<string>;
  amiAlias: string;
  subnetIds: string[];
  securityGroupId: pulumi.Input<string>;
  reservations: string[];
  clusterName: string;
}): { apiVersion: string; kind: string; metadata: { name: string; labels: Record<string, string> }; spec: Record<string, unknown> } {
  return {
    apiVersion: "karpenter.k8s.aws/v1",
    kind: "EC2NodeClass",
    metadata: { name: a.name, labels: { "app.kubernetes.io/part-of": "llm-ha" } },
    spec: {
      role: a.role,
      amiSelectorTerms: [{ alias: a.amiAlias }],
      subnetSelectorTerms: a.subnetIds.map((id) => ({ id })),
      // The GPU nodes' only group (infra/fences.ts): vLLM and the agent's ports from the L1 pods and the scrapers only.
      securityGroupSelectorTerms: [{ id: a.securityGroupId }],
      ...(a.reservations.length ? { capacityReservationSelectorTerms: a.reservations.map((id) => ({ id })) } : {}),
      metadataOptions: { ...NODE_METADATA_OPTIONS },
      blockDeviceMappings: [{ deviceName: "/dev/xvda", ebs: { volumeSize: "200Gi", volumeType: "gp3", encrypted: true, throughput: 1000, iops: 16000 } }],
      tags: { "llm-ha.io/cluster": a.clusterName, "app.kubernetes.io/part-of": "llm-ha" },
    },
  };
}

/** The placeholder's PriorityClass: negative, never preempting, so any inference pod takes its node. */
export function placeholderPriorityClass(): k8s.types.input.scheduling.v1.PriorityClass & { apiVersion: "scheduling.k8s.io/v1"; kind: "PriorityClass"; metadata: { name: string }; value: number } {
  return {
    apiVersion: "scheduling.k8s.io/v1",
    kind: "PriorityClass",
    metadata: { name: PLACEHOLDER_NAME, labels: { "app.kubernetes.io/part-of": "llm-ha" } },
    value: PLACEHOLDER_PRIORITY,
    preemptionPolicy: "Never",
    globalDefault: false,
    description: "llm-ha's standby placeholder: GPU-requesting pause pods that make Karpenter provision the standby AZ; every inference pod preempts them",
  };
}

/**
 * The placeholder Deployment, created at 0 replicas: pause pods (the agent image, already on every
 * GPU node, sleeping) that request a node's GPUs in the standby AZ. The wake scales it up and
 * its pending pods make Karpenter launch into the raised pool; release scales it back to 0.
 */
export function placeholderDeployment(a: { standbyAz: string; gpusPerPod: number; image: pulumi.Input<string>; namespace?: string }): Deployment {
  const labels = { "app.kubernetes.io/name": PLACEHOLDER_NAME, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: PLACEHOLDER_NAME, namespace: a.namespace ?? WORKLOADS_NAMESPACE, labels },
    spec: {
      replicas: 0,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels: { ...labels, [CAPACITY_PLACEHOLDER_LABEL]: "true" } },
        spec: {
          priorityClassName: PLACEHOLDER_NAME,
          nodeSelector: { [LABELS.zone]: a.standbyAz },
          tolerations: [GPU_TOLERATION],
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 0,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "pause",
              image: a.image,
              command: ["node", "-e", "setInterval(() => {}, 1 << 30)"],
              resources: { requests: { cpu: "10m", memory: "32Mi", [GPU_RESOURCE]: String(a.gpusPerPod) }, limits: { memory: "64Mi", [GPU_RESOURCE]: String(a.gpusPerPod) } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
            },
          ],
        },
      },
    },
  };
}
