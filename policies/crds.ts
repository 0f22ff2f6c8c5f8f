// Custom resources need their CustomResourceDefinition: a stack that creates a
// PrometheusRule on a cluster without prometheus-operator's CRDs fails at apply ("no
// matches for kind"), after everything before it was created. Mocks cannot see that; this
// policy can: every custom resource's group and kind must be installed by the stack itself
// (a CustomResourceDefinition resource, a Helm chart known to ship it, an EKS add-on known
// to ship it) or be one EKS itself provides.
import type { StackValidationPolicy } from "@pulumi/policy";
import { list, record, str, type Props } from "./props";
import { onExistingCluster } from "./conventions";

/** API groups Kubernetes serves without any CRD (Pulumi's type tokens name them as here). */
export const BUILT_IN_GROUPS: readonly string[] = [
  "core",
  "apps",
  "batch",
  "policy",
  "autoscaling",
  "apiextensions.k8s.io",
  "apiregistration.k8s.io",
  "admissionregistration.k8s.io",
  "authentication.k8s.io",
  "authorization.k8s.io",
  "certificates.k8s.io",
  "coordination.k8s.io",
  "discovery.k8s.io",
  "events.k8s.io",
  "flowcontrol.apiserver.k8s.io",
  "internal.apiserver.k8s.io",
  "networking.k8s.io",
  "node.k8s.io",
  "rbac.authorization.k8s.io",
  "resource.k8s.io",
  "scheduling.k8s.io",
  "storage.k8s.io",
  "storagemigration.k8s.io",
];

/** Pulumi's own Kubernetes components (charts, YAML, kustomize): not API objects. */
const PULUMI_COMPONENT_GROUPS = ["helm.sh", "yaml", "kustomize"];

/**
 * The API groups an existing cluster brings that llm-ha's objects use there: Karpenter's (its
 * NodePools and EC2NodeClasses) and the VPC CNI's SecurityGroupPolicy. A stack on a cluster it
 * does not own installs neither; `llm-ha preflight` checks their CRDs on the live cluster.
 */
export const EXISTING_CLUSTER_GROUPS: readonly string[] = ["karpenter.sh", "karpenter.k8s.aws", "vpcresources.k8s.aws"];

/** prometheus-operator's CRDs: what both kube-prometheus-stack and prometheus-operator-crds install. */
const PROMETHEUS_OPERATOR_CRDS: readonly string[] = [
  "Alertmanager", "AlertmanagerConfig", "PodMonitor", "Probe", "Prometheus",
  "PrometheusAgent", "PrometheusRule", "ScrapeConfig", "ServiceMonitor", "ThanosRuler",
].map((kind) => `monitoring.coreos.com/${kind}`);

/** `group/Kind` every Helm chart here is known to install (charts' CRDs, as of their pinned versions). */
export const CHART_CRDS: Readonly<Record<string, readonly string[]>> = {
  "kube-prometheus-stack": PROMETHEUS_OPERATOR_CRDS,
  "prometheus-operator-crds": PROMETHEUS_OPERATOR_CRDS,
  "aws-load-balancer-controller": ["elbv2.k8s.aws/TargetGroupBinding", "elbv2.k8s.aws/IngressClassParams"],
};

/** `group/Kind` EKS managed add-ons install. */
export const ADDON_CRDS: Readonly<Record<string, readonly string[]>> = {
  "vpc-cni": ["crd.k8s.amazonaws.com/ENIConfig", "networking.k8s.aws/PolicyEndpoint", "vpcresources.k8s.aws/SecurityGroupPolicy"],
  "snapshot-controller": ["snapshot.storage.k8s.io/VolumeSnapshot", "snapshot.storage.k8s.io/VolumeSnapshotClass", "snapshot.storage.k8s.io/VolumeSnapshotContent"],
};

const CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition";
const RELEASE_TYPES = ["kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart"];
const ADDON_TYPE = "aws:eks/addon:Addon";

/** `{group, version, kind}` of a Kubernetes resource type token (`kubernetes:monitoring.coreos.com/v1:PrometheusRule`). */
export function kubernetesType(type: string): { group: string; version: string; kind: string } | undefined {
  const m = /^kubernetes:([^/:]+)\/([^:]+):(.+)$/.exec(type);
  return m ? { group: m[1], version: m[2], kind: m[3] } : undefined;
}

/** A chart's name from `chart` (`kube-prometheus-stack`, `prometheus-community/kube-prometheus-stack`, `oci://…/kube-prometheus-stack`). */
function chartName(props: Props): string | undefined {
  const chart = str(props.chart);
  return chart?.replace(/\/+$/, "").split("/").pop();
}

/** `group/Kind` the stack installs. */
export function installedKinds(resources: readonly { type: string; props: Record<string, unknown> }[]): Set<string> {
  const out = new Set<string>();
  for (const r of resources) {
    const props = r.props as Props;
    if (r.type === CRD_TYPE) {
      const spec = record(props.spec);
      const group = str(spec?.group);
      const kind = str(record(spec?.names)?.kind);
      if (group && kind) out.add(`${group}/${kind}`);
    } else if (RELEASE_TYPES.includes(r.type)) {
      for (const k of CHART_CRDS[chartName(props) ?? ""] ?? []) out.add(k);
    } else if (r.type === ADDON_TYPE) {
      for (const k of ADDON_CRDS[str(props.addonName) ?? ""] ?? []) out.add(k);
    }
  }
  return out;
}

export interface CrdsInstalledConfig {
  /** API groups the cluster has without this stack (e.g. installed by a platform team), beyond the built-in ones. */
  preinstalledGroups: string[];
}

export const crdsInstalled: StackValidationPolicy = {
  name: "crds-installed",
  description:
    "Every custom resource the stack creates has its CustomResourceDefinition installed by the stack (a CRD resource, a Helm chart or an EKS add-on known to ship it): " +
    "on a fresh cluster, `pulumi up` otherwise fails at apply with 'no matches for kind', and the L1–L4 alerting (PrometheusRule, PodMonitor) never exists.",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      preinstalledGroups: { type: "array", items: { type: "string" }, default: [] },
    },
  },
  validateStack: (args, reportViolation) => {
    const cfg = args.getConfig<CrdsInstalledConfig>();
    const existing = onExistingCluster(args.resources) ? EXISTING_CLUSTER_GROUPS : [];
    const preinstalled = new Set([...BUILT_IN_GROUPS, ...PULUMI_COMPONENT_GROUPS, ...existing, ...list(cfg.preinstalledGroups).map(String)]);
    const installed = installedKinds(args.resources);
    for (const r of args.resources) {
      const t = kubernetesType(r.type);
      if (!t || preinstalled.has(t.group) || installed.has(`${t.group}/${t.kind}`)) continue;
      const name = str(record(record(r.props)?.metadata)?.name) ?? r.name;
      const charts = Object.entries(CHART_CRDS)
        .filter(([, kinds]) => kinds.includes(`${t.group}/${t.kind}`))
        .map(([c]) => c);
      reportViolation(
        `${t.kind} ${name} (${t.group}/${t.version}) needs a CustomResourceDefinition this stack does not install: ` +
          `add the CRD${charts.length ? ` or a Helm release of ${charts.join(" or ")}` : ""}, list ${t.group} in preinstalledGroups if the cluster already has it, or leave the object out` +
          (t.group === "monitoring.coreos.com" ? " (llm-ha:observability.prometheusOperator: false ships the same rules and scrape jobs as ConfigMaps)." : "."),
        r.urn,
      );
    }
  },
};
