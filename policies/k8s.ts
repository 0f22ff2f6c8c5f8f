// Kubernetes workloads on GPU nodes: inference pods spread so one node or one zone takes
// only its share, and the agent that feeds L1 runs on every GPU node.
import * as k8s from "@pulumi/kubernetes";
import {
  validateResourceOfType,
  type ResourceValidationPolicy,
  type StackValidationPolicy,
} from "@pulumi/policy";
import {
  GPU_CLASS_LABEL,
  GPU_RESOURCE,
  GPU_TAINT_KEY,
  HOSTNAME_KEY,
  ZONE_KEY,
  isCapacityPlaceholder,
  nameOf,
  namespaceOf,
  selectorMatches,
} from "./conventions";
import { joinWords, list, num, record, str, stringMap, type Props } from "./props";

const DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment";
const PDB_TYPE = "kubernetes:policy/v1:PodDisruptionBudget";

function podSpec(workload: Props): Props {
  return record(record(record(workload.spec)?.template)?.spec) ?? {};
}

function podLabels(workload: Props): Record<string, string> {
  return stringMap(record(record(record(workload.spec)?.template)?.metadata)?.labels);
}

function containers(spec: Props): Props[] {
  return [...list(spec.containers), ...list(spec.initContainers)]
    .map(record)
    .filter((c): c is Props => c !== undefined);
}

/**
 * True when any container asks for GPUs (limits or requests): an inference workload. The standby's
 * placeholder asks for GPUs only to make Karpenter provision (it serves nothing, holds no model,
 * and any inference pod preempts it), so it is not one.
 */
export function requestsGpu(workload: Props): boolean {
  if (isCapacityPlaceholder(workload)) return false;
  return containers(podSpec(workload)).some((c) => {
    const res = record(c.resources);
    const amount = num(record(res?.limits)?.[GPU_RESOURCE]) ?? num(record(res?.requests)?.[GPU_RESOURCE]);
    return amount !== undefined && amount > 0;
  });
}

function hasHostnameAntiAffinity(spec: Props): boolean {
  const terms = list(record(record(spec.affinity)?.podAntiAffinity)?.requiredDuringSchedulingIgnoredDuringExecution);
  return terms.some((t) => str(record(t)?.topologyKey) === HOSTNAME_KEY);
}

function hasZoneSpread(spec: Props): boolean {
  return list(spec.topologySpreadConstraints).some((c) => str(record(c)?.topologyKey) === ZONE_KEY);
}

export const gpuDeploymentSpread: ResourceValidationPolicy = {
  name: "gpu-deployment-spread",
  description: `Deployments that request ${GPU_RESOURCE} have required pod anti-affinity on ${HOSTNAME_KEY} and a ${ZONE_KEY} topology spread (L1 node tier: one node failing takes one replica; L3 zone tier: one AZ failing leaves replicas elsewhere).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: validateResourceOfType(k8s.apps.v1.Deployment, (_d, args, reportViolation) => {
    const props = args.props as Props;
    if (!requestsGpu(props)) return;
    const spec = podSpec(props);
    const name = nameOf(props, args.name);
    if (!hasHostnameAntiAffinity(spec)) {
      reportViolation(
        `Deployment ${name} requests ${GPU_RESOURCE} but has no requiredDuringScheduling pod anti-affinity on ${HOSTNAME_KEY}.`,
      );
    }
    if (!hasZoneSpread(spec)) {
      reportViolation(`Deployment ${name} requests ${GPU_RESOURCE} but has no topology spread constraint on ${ZONE_KEY}.`);
    }
  }),
};

export const gpuDeploymentPdb: StackValidationPolicy = {
  name: "gpu-deployment-pdb",
  description: `A PodDisruptionBudget selects every Deployment that requests ${GPU_RESOURCE} (L2 cluster tier: node drains and upgrades never take an AZ's inference capacity to zero at once).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const pdbs = args.resources.filter((r) => r.type === PDB_TYPE).map((r) => r.props as Props);
    for (const d of args.resources) {
      const props = d.props as Props;
      if (d.type !== DEPLOYMENT_TYPE || !requestsGpu(props)) continue;
      const labels = podLabels(props);
      const ns = namespaceOf(props);
      const covered = pdbs.some((p) => namespaceOf(p) === ns && selectorMatches(record(p.spec)?.selector, labels));
      if (!covered) {
        reportViolation(
          `Deployment ${nameOf(props, d.name)} requests ${GPU_RESOURCE} but no PodDisruptionBudget in namespace ${ns} selects its pods.`,
          d.urn,
        );
      }
    }
  },
};

export interface AgentDaemonSetConfig {
  /** Pod label that marks the agent DaemonSet. */
  agentLabelKey: string;
  agentLabelValue: string;
  livenessPath: string;
}

function toleratesGpuTaint(spec: Props): boolean {
  return list(spec.tolerations).some((t) => {
    const tol = record(t) ?? {};
    const key = str(tol.key);
    const effect = str(tol.effect);
    const keyOk = key === GPU_TAINT_KEY || (key === undefined && tol.operator === "Exists");
    return keyOk && (effect === undefined || effect === "" || effect === "NoSchedule");
  });
}

function selectsGpuNodes(spec: Props): boolean {
  if (stringMap(spec.nodeSelector)[GPU_CLASS_LABEL] !== undefined) return true;
  const terms = list(
    record(record(record(spec.affinity)?.nodeAffinity)?.requiredDuringSchedulingIgnoredDuringExecution)?.nodeSelectorTerms,
  );
  // Every term must pin GPU nodes: terms are ORed, so one open term lets the pod run anywhere.
  return (
    terms.length > 0 &&
    terms.every((t) =>
      list(record(t)?.matchExpressions).some((e) => {
        const expr = record(e) ?? {};
        return str(expr.key) === GPU_CLASS_LABEL && (expr.operator === "Exists" || expr.operator === "In");
      }),
    )
  );
}

export const agentDaemonSetOnGpuNodes: ResourceValidationPolicy = {
  name: "agent-daemonset-gpu-nodes",
  description: `The llm-ha agent DaemonSet tolerates the ${GPU_TAINT_KEY} taint, selects GPU nodes and has a liveness probe on /livez (L1 node tier: every GPU node reports its health to HAProxy, and a hung agent is restarted).`,
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      agentLabelKey: { type: "string", default: "app.kubernetes.io/name", description: "Pod label key that marks the agent." },
      agentLabelValue: { type: "string", default: "llm-ha-agent", description: "Value of that label on agent pods." },
      livenessPath: { type: "string", default: "/livez", description: "HTTP path of the agent's liveness probe." },
    },
  },
  validateResource: validateResourceOfType(k8s.apps.v1.DaemonSet, (_ds, args, reportViolation) => {
    const cfg = args.getConfig<AgentDaemonSetConfig>();
    const props = args.props as Props;
    if (podLabels(props)[cfg.agentLabelKey] !== cfg.agentLabelValue) return;
    const spec = podSpec(props);
    const name = nameOf(props, args.name);
    const problems: string[] = [];
    if (!toleratesGpuTaint(spec)) problems.push(`does not tolerate the ${GPU_TAINT_KEY} NoSchedule taint`);
    if (!selectsGpuNodes(spec)) problems.push(`does not select GPU nodes (nodeSelector or required node affinity on ${GPU_CLASS_LABEL})`);
    const live = containers(spec).some((c) => str(record(record(c.livenessProbe)?.httpGet)?.path) === cfg.livenessPath);
    if (!live) problems.push(`has no liveness probe on ${cfg.livenessPath}`);
    if (problems.length > 0) reportViolation(`Agent DaemonSet ${name} ${joinWords(problems)}.`);
  }),
};

const NAMESPACE_TYPE = "kubernetes:core/v1:Namespace";
/** The label that makes the AWS Load Balancer Controller inject its pod readiness gate (infra/workloads/namespaces.ts). */
export const READINESS_GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject";

/** Why a resource puts pods of its namespace behind IP targets of a load balancer, or undefined. */
function ipTargets(type: string, obj: Props): string | undefined {
  const annotations = stringMap(record(obj.metadata)?.annotations);
  if (type === "kubernetes:core/v1:Service" && annotations["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] === "ip") return "an NLB with IP targets";
  if (type.startsWith("kubernetes:networking.k8s.io/") && type.endsWith(":Ingress") && annotations["alb.ingress.kubernetes.io/target-type"] === "ip") return "an ALB with IP targets";
  if (type.startsWith("kubernetes:elbv2.k8s.aws/") && type.endsWith(":TargetGroupBinding") && str(record(obj.spec)?.targetType) === "ip") return "a TargetGroupBinding of IP targets";
  return undefined;
}

export const ipTargetsReadinessGate: StackValidationPolicy = {
  name: "ip-targets-readiness-gate",
  description:
    "A namespace whose pods are IP targets of an AWS load balancer (an NLB Service or ALB Ingress with target-type ip, a TargetGroupBinding of targetType ip) carries the label elbv2.k8s.aws/pod-readiness-gate-inject: enabled, so a rollout waits until each new pod is a healthy target before it ends an old one (L1/L3: otherwise a rollout of the L1 pods can leave an AZ's NLB with no healthy target, and Route53 fails the AZ over).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const namespaces = args.resources.filter((r) => r.type === NAMESPACE_TYPE);
    const reported = new Set<string>();
    for (const r of args.resources) {
      const obj = r.props as Props;
      const why = ipTargets(r.type, obj);
      if (why === undefined) continue;
      const ns = namespaceOf(obj);
      if (reported.has(ns)) continue;
      const nsRes = namespaces.find((n) => nameOf(n.props as Props, n.name) === ns);
      const label = nsRes ? stringMap(record((nsRes.props as Props).metadata)?.labels)[READINESS_GATE_LABEL] : undefined;
      if (label === "enabled") continue;
      reported.add(ns);
      reportViolation(
        `Namespace ${ns} holds ${why} (${nameOf(obj, r.name)}) but ${nsRes ? `does not carry ${READINESS_GATE_LABEL}: enabled` : `is not in the stack to carry ${READINESS_GATE_LABEL}: enabled`}: a rollout ends old pods before the load balancer finds the new ones healthy.`,
        nsRes?.urn ?? r.urn,
      );
    }
  },
};
