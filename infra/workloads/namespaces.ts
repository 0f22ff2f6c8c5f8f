/**
 * The stack's two namespaces and their Pod Security Admission levels (docs/security.md
 * "Pod security"). Kubernetes can only grant host access per namespace, so what needs the host
 * and what does not live apart:
 * - the workloads namespace (`llm-ha`): the agent DaemonSets (host network: HAProxy reaches
 *   9400/9401 at the node's address; the XID relay reads the kernel log) and vLLM (host network
 *   for the same address; the model cache and the drain file are hostPath). Enforced
 *   `privileged`, because nothing lower admits those pods;
 * - the edge namespace (`llm-ha-edge`): the internet-facing L1 pods (HAProxy, key sync, the L4
 *   fallback, the continuation relay) and the controller, the only holder of the cloud role.
 *   None of them needs anything from the host: enforced `restricted`, so a pod there that asks
 *   for the host, root or a capability is refused by the API server itself.
 * `audit` and `warn` are `restricted` in both: every deviation of the host's pods is named in the
 * audit log and at apply time. No `*-version` label: the levels follow the cluster's Kubernetes
 * version, which the stack pins (`llm-ha:kubernetesVersion`), so their meaning moves only with a
 * deliberate upgrade. Policies `pod-security` and `pods-meet-namespace-level` check both.
 */
import type * as k8s from "@pulumi/kubernetes";

export type PodSecurityLevel = "privileged" | "baseline" | "restricted";

/** The Pod Security Admission labels: `enforce` as given, `audit` and `warn` always `restricted`. */
export function podSecurityLabels(enforce: PodSecurityLevel): Readonly<Record<string, string>> {
  return Object.freeze({
    "pod-security.kubernetes.io/enforce": enforce,
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
  });
}

/** The workloads namespace: the host's pods (agents, vLLM). */
export const WORKLOADS_POD_SECURITY = podSecurityLabels("privileged");
/** The edge namespace: the L1 pods and the controller. */
export const EDGE_POD_SECURITY = podSecurityLabels("restricted");

/**
 * The AWS Load Balancer Controller's pod readiness gate: in a namespace with this label its
 * webhook gives each pod behind an IP-target NLB a readiness gate that holds until the pod's
 * IP is a healthy target. Without it a rollout of the L1 pods counts a new pod ready as soon as
 * its own probe passes and ends the old one while the NLB has not yet sent the new one a health
 * check: every AZ's NLB then has no healthy target for a while, and Route53 fails the AZ over.
 */
export const POD_READINESS_GATE_LABEL = Object.freeze({ "elbv2.k8s.aws/pod-readiness-gate-inject": "enabled" });

/** A Namespace of the stack with its Pod Security Admission labels (and any others, such as `POD_READINESS_GATE_LABEL`). */
export function namespaceManifest(name: string, podSecurity: Readonly<Record<string, string>>, extra: Readonly<Record<string, string>> = {}): k8s.types.input.core.v1.Namespace {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: { "app.kubernetes.io/part-of": "llm-ha", ...extra, ...podSecurity } } };
}
