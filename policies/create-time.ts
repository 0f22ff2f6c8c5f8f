// What Kubernetes and AWS decide at create time and a mock never sees: whether the kubelet
// can reach a probe, whether EC2 has the GPUs a new node group asks for, whether EKS offers
// an add-on version for the cluster's, whether the principal applying the Kubernetes objects
// may, and whether a wait has a bound somebody chose. Each guards a blocker found by reading
// `pulumi up` on an empty account; test/policies/create-time.test.ts keeps each
// blocker as a regression fixture.
import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { DESIRED_FROM_TAG, isScarceGpuType, SCARCE_GPU_FAMILIES } from "../contracts/scarce-gpus";
import { gpuNodeGroupsWithTemplates } from "./conventions";
import { ACCESS_ENTRY_TYPE, ACCESS_POLICY_ASSOCIATION_TYPE, dependsOnTransitively } from "./create-order";
import { EKS_CLUSTER_TYPE, HELM_RELEASE_TYPE } from "./deployability";
import { list, num, record, str, stringMap, strings, type Props } from "./props";

const WORKLOAD_TYPES = ["kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:StatefulSet"];
const SKIP_AWAIT = "pulumi.com/skipAwait";
const TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds";

/** The container's loopback-only listeners, from the env conventions of the images here (`*_HOST`+`*_PORT`, `*_ADDR`). */
function loopbackPorts(c: Props): Set<number> {
  const env = new Map(list(c.env).map(record).map((e) => [str(e?.name) ?? "", str(e?.value)] as const));
  const out = new Set<number>();
  const loopback = (h: string | undefined) => h === "127.0.0.1" || h === "localhost" || h === "::1";
  for (const [k, v] of env) {
    if (k.endsWith("_HOST") && loopback(v)) {
      const port = num(env.get(`${k.slice(0, -"_HOST".length)}_PORT`));
      if (port !== undefined) out.add(port);
    }
    const m = k.endsWith("_ADDR") && v ? /^(.*):(\d+)$/.exec(v) : null;
    if (m && loopback(m[1].replace(/^\[|\]$/g, ""))) out.add(Number(m[2]));
  }
  return out;
}

/** Problems of one container's probes, as the kubelet on the node would meet them. */
export function probeProblems(c: Props, hostNetwork: boolean): string[] {
  const name = str(c.name) ?? "?";
  const ports = list(c.ports).map(record);
  const byName = new Map(ports.map((p) => [str(p?.name) ?? "", num(p?.containerPort)] as const));
  const served = new Set(ports.map((p) => num(p?.containerPort)).filter((x): x is number => x !== undefined));
  const onLoopback = loopbackPorts(c);
  const out: string[] = [];
  for (const kind of ["readinessProbe", "livenessProbe", "startupProbe"]) {
    const probe = record(c[kind]);
    const target = record(probe?.httpGet) ?? record(probe?.tcpSocket);
    if (!target) continue;
    const host = str(target.host);
    if (host !== undefined && !hostNetwork) {
      out.push(`container ${name}'s ${kind} sets host ${host}: the kubelet probes from the node, so that is the node's address, not the pod's (set host only with hostNetwork)`);
    }
    const port = typeof target.port === "string" && num(target.port) === undefined ? byName.get(target.port) : num(target.port);
    if (port === undefined) out.push(`container ${name}'s ${kind} names port ${String(target.port)}, which the container does not declare`);
    else if (!hostNetwork && !served.has(port)) out.push(`container ${name}'s ${kind} probes port ${port}, which is not one of its containerPorts`);
    else if (!hostNetwork && onLoopback.has(port)) out.push(`container ${name}'s ${kind} probes port ${port}, which it serves on 127.0.0.1 only: the kubelet's request to the pod IP is refused (probe it with exec inside the container)`);
  }
  return out;
}

export const probesReachable: ResourceValidationPolicy = {
  name: "probes-reachable",
  description:
    "A probe's host is set only on host-network pods and its port is one the container serves on the pod IP (L1/L2: the kubelet probes from the node; a probe it cannot reach keeps every pod unready, so no NLB target registers and every Route53 health check fails).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (!WORKLOAD_TYPES.includes(args.type)) return;
    const pod = record(record(record(args.props.spec)?.template)?.spec);
    const hostNetwork = pod?.hostNetwork === true;
    for (const c of [...list(pod?.initContainers), ...list(pod?.containers)].map(record)) {
      if (!c) continue;
      for (const p of probeProblems(c, hostNetwork)) reportViolation(`${args.name}: ${p}.`);
    }
  },
};

export interface GpuScarceConfig {
  scarceInstanceFamilies: string[];
}

export const gpuScarceStartAtZero: StackValidationPolicy = {
  name: "gpu-scarce-start-at-zero",
  description:
    "A GPU node group of a scarce instance type (p4d, p5, …) is created with desiredSize 0 unless a capacity reservation or a Capacity Block covers it (L2: EKS ends a group that cannot launch its size at creation in CREATE_FAILED, which only a replacement fixes, and `pulumi up` stops there).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      scarceInstanceFamilies: { type: "array", items: { type: "string" }, default: [...SCARCE_GPU_FAMILIES], description: "Instance families treated as scarce." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { scarceInstanceFamilies } = args.getConfig<GpuScarceConfig>();
    for (const { group: g, props: p, ltProps: ltp, reservation } of gpuNodeGroupsWithTemplates(args.resources)) {
      if (reservation !== undefined || str(p.capacityType) === "CAPACITY_BLOCK") continue; // gpu-reserved-start-at-zero
      // A group that runs keeps its running size (infra/live-sizes.ts); only creation is at stake.
      if (stringMap(p.tags)[DESIRED_FROM_TAG] === "running") continue;
      const types = [...strings(p.instanceTypes), ...(str(ltp.instanceType) ? [str(ltp.instanceType)!] : [])];
      const scarce = types.filter((t) => isScarceGpuType(t, scarceInstanceFamilies));
      const desired = num(record(p.scalingConfig)?.desiredSize) ?? 0;
      if (scarce.length && desired > 0) {
        reportViolation(
          `GPU node group ${g.name} is created with desiredSize ${desired} of ${scarce.join(", ")} On-Demand with no reservation or Capacity Block: an InsufficientInstanceCapacity at creation leaves it CREATE_FAILED. Create it at 0 and scale up after, or cover it.`,
          g.urn,
        );
      }
    }
  },
};

export const addonVersionsForCluster: StackValidationPolicy = {
  name: "addon-versions-for-cluster",
  description:
    "Every EKS add-on names a version, and one EKS can offer for the cluster's Kubernetes version: kube-proxy's minor is the cluster's (L2/L3: an add-on version EKS does not offer stops `pulumi up` before a node exists). Versions resolved with aws.eks.getAddonVersion satisfy it by construction; pinned ones are checked online by `llm-ha preflight --online`.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const clusters = args.resources.filter((r) => r.type === EKS_CLUSTER_TYPE);
    for (const a of args.resources.filter((r) => r.type === "aws:eks/addon:Addon")) {
      const p = a.props as Props;
      const version = str(p.addonVersion);
      if (!version) {
        reportViolation(`EKS add-on ${a.name} (${str(p.addonName)}) names no version: EKS would install its default at create time and never move it.`, a.urn);
        continue;
      }
      const cluster = clusters.find((c) => (str((c.props as Props).name) ?? c.name) === str(p.clusterName));
      const k8s = str((cluster?.props as Props | undefined)?.version);
      const m = /^v(\d+\.\d+)\./.exec(version);
      if (str(p.addonName) === "kube-proxy" && k8s && m && m[1] !== k8s) {
        reportViolation(`EKS add-on ${a.name}: kube-proxy ${version} is for Kubernetes ${m[1]}, the cluster runs ${k8s}.`, a.urn);
      }
    }
  },
};

/** The kubeconfig's `aws eks get-token` of a Kubernetes provider: cluster and role, when it has one. */
function kubeconfigIdentity(provider: PolicyResource): { cluster?: string; roleArn?: string } | undefined {
  const raw = str((provider.props as Props).kubeconfig);
  if (!raw) return undefined;
  let doc: Props | undefined;
  try {
    doc = record(JSON.parse(raw));
  } catch {
    return undefined;
  }
  const exec = record(record(record(list(doc?.users)[0])?.user)?.exec);
  const a = strings(exec?.args);
  const after = (flag: string) => (a.includes(flag) ? a[a.indexOf(flag) + 1] : undefined);
  return exec ? { cluster: after("--cluster-name"), roleArn: after("--role-arn") } : undefined;
}

/** Access entry types for node roles: EKS grants them the node permissions itself, and refuses an access policy on them. */
const NODE_ACCESS_ENTRY_TYPES = ["EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "HYBRID_LINUX", "EC2"];

export const clusterAccessEntries: StackValidationPolicy = {
  name: "cluster-access-entries",
  description:
    "The principal a Kubernetes provider authenticates as has EKS access before anything is applied: the kubeconfig's role has an access entry and an access policy, the provider depends on them, and an API-mode cluster grants its creator or lists entries (L1–L3: otherwise every Kubernetes resource fails with 401 Unauthorized).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const rs = args.resources;
    const entries = rs.filter((r) => r.type === ACCESS_ENTRY_TYPE);
    const associations = rs.filter((r) => r.type === ACCESS_POLICY_ASSOCIATION_TYPE);
    for (const c of rs.filter((r) => r.type === EKS_CLUSTER_TYPE)) {
      const ac = record((c.props as Props).accessConfig);
      const name = str((c.props as Props).name) ?? c.name;
      if (ac?.bootstrapClusterCreatorAdminPermissions === false && !entries.some((e) => str((e.props as Props).clusterName) === name)) {
        reportViolation(`EKS cluster ${c.name} gives its creator no access (bootstrapClusterCreatorAdminPermissions false) and the stack makes no access entry: nobody could apply the Kubernetes objects.`, c.urn);
      }
    }
    for (const e of entries) {
      // A node role's entry (EC2_LINUX, …) gets EKS's node permissions by its type; it takes no access policy.
      if (NODE_ACCESS_ENTRY_TYPES.includes(str((e.props as Props).type) ?? "STANDARD")) continue;
      const principal = str((e.props as Props).principalArn);
      const granted = associations.some((x) => str((x.props as Props).principalArn) === principal) || strings((e.props as Props).kubernetesGroups).length > 0;
      if (!granted) reportViolation(`Access entry ${e.name} for ${principal} has no access policy association or Kubernetes group: the principal authenticates but may do nothing (403).`, e.urn);
    }
    for (const p of rs.filter((r) => r.type === "pulumi:providers:kubernetes")) {
      const id = kubeconfigIdentity(p);
      if (!id?.roleArn) continue;
      const assoc = associations.filter((x) => str((x.props as Props).principalArn) === id.roleArn && (!id.cluster || str((x.props as Props).clusterName) === id.cluster));
      if (!entries.some((e) => str((e.props as Props).principalArn) === id.roleArn) || assoc.length === 0) {
        reportViolation(`Kubernetes provider ${p.name} authenticates as ${id.roleArn} (kubeconfig --role-arn), which has no access entry with an access policy in the stack: every Kubernetes resource would fail with 401.`, p.urn);
      } else if (!assoc.some((x) => dependsOnTransitively(p, x))) {
        reportViolation(`Kubernetes provider ${p.name} does not depend on the access policy association of ${id.roleArn}: the first objects could be applied before it exists (401).`, p.urn);
      }
    }
  },
};

/** What bounds a resource's wait, if anything: skipAwait, a timeout annotation, customTimeouts or the release's own timeout. */
function waitBound(r: PolicyResource): string | undefined {
  const p = r.props as Props;
  const ann = stringMap(record(p.metadata)?.annotations);
  if (ann[SKIP_AWAIT] === "true") return "skipAwait";
  if (ann[TIMEOUT_ANNOTATION]) return TIMEOUT_ANNOTATION;
  if (r.opts.customTimeouts.createSeconds > 0) return "customTimeouts";
  if (r.type === HELM_RELEASE_TYPE && (p.skipAwait === true || (num(p.timeout) ?? 0) > 0)) return "timeout";
  return undefined;
}

export const waitsBounded: StackValidationPolicy = {
  name: "waits-bounded",
  description:
    "Every Deployment, DaemonSet, StatefulSet, LoadBalancer Service and Helm release — the objects Pulumi waits on for capacity or a controller — has an explicit timeout or skipAwait (L1: the provider's default 10 minutes is nobody's choice; a wait that ends mid-creation fails the step and `pulumi up` starts nothing new).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const r of args.resources) {
      const p = r.props as Props;
      const waits =
        WORKLOAD_TYPES.includes(r.type) || r.type === HELM_RELEASE_TYPE || (r.type === "kubernetes:core/v1:Service" && str(record(p.spec)?.type) === "LoadBalancer");
      if (waits && waitBound(r) === undefined) {
        reportViolation(`${r.type.split(":").pop()} ${r.name} waits with the provider's default timeout: set customTimeouts (create, update) or the ${SKIP_AWAIT} annotation.`, r.urn);
      }
    }
  },
};
