import * as k8s from "@pulumi/kubernetes";
import { PORTS } from "../../contracts/names";
import { APP, NAMESPACE_NAME, NET_ROLE_LABEL, type NetRole } from "../names";
import { Problems } from "../problems";
import { CONTINUE_SCRAPE_JOB } from "./continuation-names";
import { DEFAULT_PROMETHEUS_NAMESPACE, FALLBACK_METRICS_PORT, FALLBACK_SCRAPE_JOB } from "./fallback-names";

export type NetworkPolicy = k8s.types.input.networking.v1.NetworkPolicy;
type EgressRule = k8s.types.input.networking.v1.NetworkPolicyEgressRule;

const PART_OF = { "app.kubernetes.io/part-of": "llm-ha" };

/** Kubernetes' DNS (CoreDNS in kube-system), UDP and TCP 53. */
const DNS: EgressRule = {
  to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
  ports: [
    { protocol: "UDP", port: 53 },
    { protocol: "TCP", port: 53 },
  ],
};

/** AWS APIs (STS, MSK's IAM signer's endpoints, ECR) and the fallback's providers: HTTPS anywhere. */
const HTTPS: EgressRule = { ports: [{ protocol: "TCP", port: 443 }] };

/**
 * No pod of the namespace takes or sends anything the policies below do not name. The agents
 * and inference servers run on the host network, which NetworkPolicy does not cover: their
 * fence is the GPU nodes' security group (infra/fences.ts). One in each namespace.
 */
export function defaultDeny(namespace: string): NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: "default-deny", namespace, labels: PART_OF },
    spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] },
  };
}

/** A peer: every pod of one namespace (the Prometheus one). */
export const fromNamespace = (name: string): { namespaceSelector: { matchLabels: Record<string, string> } } => ({ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": name } } });

/**
 * Into the L1 proxies: clients (their addresses kept through the NLB) and Route53's checkers on
 * 8080/8081; the monitor port (8404: `/healthz`, `/metrics`) from the NLBs' subnets (their
 * target health checks) and the Prometheus namespace only, not the whole VPC. HAProxy's stats
 * page is on the pod's loopback (`L1_STATS_BIND`).
 */
export function l1Ingress(namespace: string, nlbCidrs: readonly string[], prometheusNamespace: string): NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: "l1-proxy-ingress", namespace, labels: PART_OF },
    spec: {
      podSelector: { matchLabels: { "app.kubernetes.io/name": APP.l1 } },
      policyTypes: ["Ingress"],
      ingress: [
        { ports: [{ protocol: "TCP", port: PORTS.l1 }, { protocol: "TCP", port: PORTS.l1AzHealth }] },
        {
          from: [...nlbCidrs.map((cidr) => ({ ipBlock: { cidr } })), fromNamespace(prometheusNamespace)],
          ports: [{ protocol: "TCP", port: PORTS.l1Monitor }],
        },
      ],
    },
  };
}

/** A metrics-only listener of a container in the L1 pods, on the pod's address for Prometheus. */
export interface L1MetricsListener {
  /** The NetworkPolicy's name. */
  policy: string;
  /** Its `app.kubernetes.io/name` label: the container it opens, not the pods it selects. */
  component: string;
  port: number;
}

/** The L1 pods' metrics listeners beside HAProxy's monitor port: the L4 fallback's (9411) and the continuation relay's (9421). */
export const L1_METRICS_LISTENERS = Object.freeze({
  fallback: Object.freeze({ policy: "llmha-fallback-metrics", component: FALLBACK_SCRAPE_JOB, port: FALLBACK_METRICS_PORT }),
  continuation: Object.freeze({ policy: "llmha-continue-metrics", component: CONTINUE_SCRAPE_JOB, port: PORTS.l1ContinueMetrics }),
} satisfies Record<string, L1MetricsListener>);

/**
 * Ingress to one metrics port of the L1 pods from the Prometheus namespace only
 * (`kubernetes.io/metadata.name`, which Kubernetes sets on every namespace). NetworkPolicies
 * add up: the L1 pods' own policy opens other ports, none of these, and the namespace's default
 * deny holds for everything else (the fallback's API, the relay's completions and HAProxy's
 * continuation listener stay on the pod's loopback anyway).
 */
export function l1MetricsNetworkPolicy(namespace: string, listener: L1MetricsListener, prometheusNamespace: string = DEFAULT_PROMETHEUS_NAMESPACE): NetworkPolicy {
  const p = new Problems();
  if (!NAMESPACE_NAME.test(prometheusNamespace)) p.add("prometheusNamespace", `must be a namespace name (DNS-1123 label), got ${JSON.stringify(prometheusNamespace)}`);
  p.throwIfAny(`${listener.policy} NetworkPolicy`);
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: listener.policy, namespace, labels: { "app.kubernetes.io/name": listener.component, ...PART_OF } },
    spec: {
      podSelector: { matchLabels: { "app.kubernetes.io/name": APP.l1 } },
      policyTypes: ["Ingress"],
      ingress: [{ from: [fromNamespace(prometheusNamespace)], ports: [{ protocol: "TCP", port: listener.port }] }],
    },
  };
}

/** Into the controller: Prometheus on its HTTP port (`/metrics`); its probes are exec probes, so nothing else. */
export function controllerIngress(namespace: string, prometheusNamespace: string): NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: "controller-ingress", namespace, labels: PART_OF },
    spec: {
      podSelector: { matchLabels: { "app.kubernetes.io/name": APP.controller } },
      policyTypes: ["Ingress"],
      ingress: [{ from: [fromNamespace(prometheusNamespace)], ports: [{ protocol: "TCP", port: PORTS.agentHttp }] }],
    },
  };
}

/** What each role's pods may call: the VPC-internal services by port (their own security groups fence them), DNS, HTTPS. */
const EGRESS: Record<NetRole, number[]> = {
  // Redis (key sync, fallback), MSK (the L4 queue), the inference servers and the agents (`/az/health`, agent-check).
  l1: [6379, 9098, PORTS.inference, PORTS.agentHttp, PORTS.agentCheck],
  controller: [6379],
};

/** Egress of the pods of one net role (`llm-ha.io/net-role`). */
export function roleEgress(namespace: string, role: NetRole, vpcCidr: string): NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: `${role}-egress`, namespace, labels: PART_OF },
    spec: {
      podSelector: { matchLabels: { [NET_ROLE_LABEL]: role } },
      policyTypes: ["Egress"],
      egress: [DNS, HTTPS, { to: [{ ipBlock: { cidr: vpcCidr } }], ports: EGRESS[role].map((port) => ({ protocol: "TCP", port })) }],
    },
  };
}

/**
 * Into the inference servers and the agents (workloads namespace): the L1 pods of the edge
 * namespace on 8000/9400/9401, Prometheus on 8000 and 9400. Both run on the host network, which
 * NetworkPolicy does not cover (their fence is the GPU nodes' security group, infra/fences.ts):
 * this names the same clients across the two namespaces, so a pod of theirs on the pod network
 * would be fenced alike and the namespace's default deny keeps no exception unwritten.
 */
export function gpuIngress(namespace: string, edgeNamespace: string, prometheusNamespace: string): NetworkPolicy {
  const tcp = (...ports: number[]) => ports.map((port) => ({ protocol: "TCP", port }));
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: "gpu-ingress", namespace, labels: PART_OF },
    spec: {
      podSelector: { matchExpressions: [{ key: "app.kubernetes.io/name", operator: "In", values: [APP.inference, APP.agent] }] },
      policyTypes: ["Ingress"],
      ingress: [
        { from: [{ ...fromNamespace(edgeNamespace), podSelector: { matchLabels: { [NET_ROLE_LABEL]: "l1" } } }], ports: tcp(PORTS.inference, PORTS.agentHttp, PORTS.agentCheck) },
        { from: [fromNamespace(prometheusNamespace)], ports: tcp(PORTS.inference, PORTS.agentHttp) },
      ],
    },
  };
}

/**
 * Every NetworkPolicy of the two namespaces but the fallback's metrics one, by namespace:
 * default deny in both, the GPU pods' in the workloads namespace, the L1 pods' and the
 * controller's in the edge namespace.
 */
export function workloadNetworkPolicies(s: {
  namespace: string;
  edgeNamespace: string;
  vpcCidr: string;
  nlbCidrs: readonly string[];
  prometheusNamespace: string;
}): { workloads: Record<string, NetworkPolicy>; edge: Record<string, NetworkPolicy> } {
  const edge = s.edgeNamespace;
  return {
    workloads: { "default-deny": defaultDeny(s.namespace), "gpu-ingress": gpuIngress(s.namespace, edge, s.prometheusNamespace) },
    edge: {
      "edge-default-deny": defaultDeny(edge),
      "l1-ingress": l1Ingress(edge, s.nlbCidrs, s.prometheusNamespace),
      "l1-egress": roleEgress(edge, "l1", s.vpcCidr),
      "controller-egress": roleEgress(edge, "controller", s.vpcCidr),
      "controller-ingress": controllerIngress(edge, s.prometheusNamespace),
    },
  };
}
