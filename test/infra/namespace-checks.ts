/**
 * Pod security, "restricted wherever possible": the host's pods (agents, vLLM) in the workloads
 * namespace at Pod Security Admission `privileged`, the L1 tier and the controller in the edge
 * namespace at `restricted`, and everything that crosses the two still named where it is.
 * Called inside `describeStack`, so each runs for dev, staging and prod.
 */
import { expect, it } from "vitest";
import { EDGE_NAMESPACE, WORKLOADS_NAMESPACE } from "../../infra/names";
import { EDGE_POD_SECURITY, POD_READINESS_GATE_LABEL, WORKLOADS_POD_SECURITY } from "../../infra/workloads/namespaces";
import { podStandardViolations } from "../../policies/pod-standards";
import type { CapturedResource, Env } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const WORKLOAD_KINDS = ["Deployment", "DaemonSet"];
const appOf = (o: O): string => o.metadata.labels?.["app.kubernetes.io/name"] ?? "";
const podOf = (o: O): O => o.spec.template.spec;
/** The mocks' ARN of a resource (infra/capture.ts): `arn:aws:iam:us-east-1:123456789012:<name>`. */
const mockArn = (name: string) => `arn:aws:iam:us-east-1:123456789012:${name}`;

/** Every Secret, ConfigMap and ServiceAccount a pod spec names, as `Kind/name`. */
function referencesOf(pod: O): string[] {
  const refs = new Set<string>();
  if (pod.serviceAccountName) refs.add(`ServiceAccount/${pod.serviceAccountName}`);
  for (const v of pod.volumes ?? []) {
    if (v.secret) refs.add(`Secret/${v.secret.secretName}`);
    if (v.configMap) refs.add(`ConfigMap/${v.configMap.name}`);
  }
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    for (const e of c.env ?? []) {
      if (e.valueFrom?.secretKeyRef) refs.add(`Secret/${e.valueFrom.secretKeyRef.name}`);
      if (e.valueFrom?.configMapKeyRef) refs.add(`ConfigMap/${e.valueFrom.configMapKeyRef.name}`);
    }
    for (const e of c.envFrom ?? []) {
      if (e.secretRef) refs.add(`Secret/${e.secretRef.name}`);
      if (e.configMapRef) refs.add(`ConfigMap/${e.configMapRef.name}`);
    }
  }
  return [...refs];
}

export function describeNamespaces(_env: Env, resources: () => CapturedResource[]): void {
  const k8s = (kind: string) => resources().filter((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === kind).map((r) => r.props as O);
  const workloads = () => WORKLOAD_KINDS.flatMap(k8s).filter((w) => w.metadata.namespace !== "kube-system");

  it("labels the workloads namespace privileged and the edge namespace restricted (enforce, audit, warn)", () => {
    const nss = Object.fromEntries(k8s("Namespace").map((n) => [n.metadata.name, n.metadata.labels]));
    expect(nss).toEqual({
      [WORKLOADS_NAMESPACE]: { "app.kubernetes.io/part-of": "llm-ha", ...WORKLOADS_POD_SECURITY },
      // The edge's L1 pods are IP targets of the NLBs: the load balancer controller's readiness gate holds a rollout until they are healthy targets.
      [EDGE_NAMESPACE]: { "app.kubernetes.io/part-of": "llm-ha", ...POD_READINESS_GATE_LABEL, ...EDGE_POD_SECURITY },
    });
    expect(nss[EDGE_NAMESPACE]).toMatchObject({ "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted" });
  });

  it("runs the L1 tier and the controller in the edge namespace, the agents and vLLM in the workloads namespace, nothing else", () => {
    const where = (app: string) => [...new Set(workloads().filter((w) => appOf(w) === app).map((w) => w.metadata.namespace))];
    expect(where("l1-proxy")).toEqual([EDGE_NAMESPACE]);
    expect(where("llm-ha-controller")).toEqual([EDGE_NAMESPACE]);
    expect(where("llm-ha-agent")).toEqual([WORKLOADS_NAMESPACE]);
    expect(where("inference")).toEqual([WORKLOADS_NAMESPACE]);
    expect(new Set(workloads().map(appOf))).toEqual(new Set(["l1-proxy", "llm-ha-controller", "llm-ha-agent", "inference"]));
    // The NLB Services select the L1 pods: they must be in the same namespace; the headless Services stay with vLLM.
    for (const s of k8s("Service")) expect(s.metadata.namespace, s.metadata.name).toBe(s.spec.type === "LoadBalancer" ? EDGE_NAMESPACE : WORKLOADS_NAMESPACE);
    for (const p of k8s("PodDisruptionBudget")) {
      const app = p.spec.selector.matchLabels["app.kubernetes.io/name"];
      expect(p.metadata.namespace, p.metadata.name).toBe(["l1-proxy", "llm-ha-controller"].includes(app) ? EDGE_NAMESPACE : WORKLOADS_NAMESPACE);
    }
  });

  it("passes Pod Security `restricted` with every container of every pod of the edge namespace, init containers and sidecars included", () => {
    const edge = workloads().filter((w) => w.metadata.namespace === EDGE_NAMESPACE);
    // One L1 Deployment per AZ and the controller.
    expect(edge.filter((w) => appOf(w) === "l1-proxy").length).toBeGreaterThanOrEqual(2);
    expect(edge.filter((w) => appOf(w) === "llm-ha-controller")).toHaveLength(1);
    for (const w of edge) {
      expect(podStandardViolations(podOf(w), "restricted"), w.metadata.name).toEqual([]);
      expect(podOf(w).initContainers?.length ?? 0, "the checker sees the init containers").toBe(appOf(w) === "l1-proxy" ? 1 : 0);
      // No port below 1024 in the container: nothing needs NET_BIND_SERVICE.
      for (const c of podOf(w).containers) for (const p of c.ports ?? []) expect(p.containerPort, `${w.metadata.name}/${c.name}`).toBeGreaterThanOrEqual(1024);
    }
    // The workloads namespace is privileged for its host pods, and only those: each of them needs the host.
    for (const w of workloads().filter((x) => x.metadata.namespace === WORKLOADS_NAMESPACE)) {
      expect(podStandardViolations(podOf(w), "restricted").join("; "), w.metadata.name).toMatch(/hostNetwork is set/);
    }
  });

  it("finds every Secret, ConfigMap and ServiceAccount a pod names in the pod's own namespace", () => {
    const have = new Set(resources().filter((r) => r.type.startsWith("kubernetes:")).map((r) => r.props as O).map((o) => `${o.metadata?.namespace}/${o.kind}/${o.metadata?.name}`));
    const missing = workloads().flatMap((w) => referencesOf(podOf(w)).map((ref) => `${w.metadata.namespace}/${ref}`)).filter((ref) => !have.has(ref));
    expect(missing).toEqual([]);
  });

  it("trusts, in each IRSA role, exactly the ServiceAccount that carries it, in that ServiceAccount's namespace", () => {
    const roles = resources().filter((r) => r.type === "aws:iam/role:Role");
    const irsa = k8s("ServiceAccount").filter((sa) => sa.metadata.annotations?.["eks.amazonaws.com/role-arn"]);
    expect(irsa.map((sa) => `${sa.metadata.namespace}/${sa.metadata.name}`)).toEqual(expect.arrayContaining([`${EDGE_NAMESPACE}/llm-ha-controller`, `${EDGE_NAMESPACE}/llmha-fallback`]));
    for (const sa of irsa) {
      const role = roles.find((r) => mockArn(r.name) === sa.metadata.annotations["eks.amazonaws.com/role-arn"]);
      expect(role, sa.metadata.name).toBeDefined();
      const subs = JSON.parse(String((role!.props as O).assumeRolePolicy)).Statement.flatMap((s: O) => Object.entries(s.Condition?.StringEquals ?? {}).filter(([k]) => k.endsWith(":sub")).map(([, v]) => v));
      expect(subs, role!.name).toEqual([`system:serviceaccount:${sa.metadata.namespace}:${sa.metadata.name}`]);
    }
  });

  it("keeps the cross-namespace names: HAProxy's servers in the workloads namespace, the pod security groups where their pods are", () => {
    const headless = new Set(k8s("Service").filter((s) => s.spec.clusterIP === "None").map((s) => `${s.metadata.name}.${s.metadata.namespace}.svc.cluster.local`));
    for (const cm of k8s("ConfigMap").filter((c) => c.data?.["haproxy.cfg"])) {
      expect(cm.metadata.namespace).toBe(EDGE_NAMESPACE);
      const fqdns = [...String(cm.data["haproxy.cfg"]).matchAll(/server-template \S+ \S+ (\S+):8000/g)].map((m) => m[1]);
      expect(fqdns.length).toBeGreaterThanOrEqual(2);
      for (const f of fqdns) expect(headless.has(f), f).toBe(true);
    }
    for (const sgp of k8s("SecurityGroupPolicy")) expect(sgp.metadata.namespace, sgp.metadata.name).toBe(EDGE_NAMESPACE);
    // Default deny in both; the L1 pods' and the controller's own policies in the edge namespace.
    const nps = k8s("NetworkPolicy");
    for (const ns of [WORKLOADS_NAMESPACE, EDGE_NAMESPACE]) expect(nps.some((n) => n.metadata.namespace === ns && JSON.stringify(n.spec) === JSON.stringify({ podSelector: {}, policyTypes: ["Ingress", "Egress"] })), ns).toBe(true);
    for (const n of nps.filter((x) => /^(l1-|controller-|llmha-fallback)/.test(x.metadata.name))) expect(n.metadata.namespace, n.metadata.name).toBe(EDGE_NAMESPACE);
  });
}
