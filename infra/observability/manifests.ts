/**
 * The Kubernetes objects that make llm-ha observable, as plain data: the scrapes of the
 * agents, the L1 proxies and the inference servers (as `scrape_configs` in a ConfigMap, or
 * PodMonitors with prometheus-operator), the rules (a ConfigMap, or a PrometheusRule),
 * Alertmanager's inhibition rules and the Grafana dashboard ConfigMap its sidecar picks up.
 */
import { stringify } from "yaml";
import { type ConfigMap } from "../workloads/common";
import { type RuleGroup } from "./alerts";
import { DASHBOARD_UID, type Dashboard } from "./dashboard";
import { APP, edgeNamespaceOf, LABELS } from "../names";
import { FALLBACK_METRICS_PORT_NAME, FALLBACK_SCRAPE_JOB } from "../workloads/fallback-names";
import { CONTINUE_METRICS_PORT_NAME, CONTINUE_SCRAPE_JOB } from "../workloads/continuation-names";
import { DCGM_EXPORTER_NAMESPACE, DCGM_EXPORTER_PORT_NAME } from "../workloads/dcgm-exporter";

/** Label Grafana's dashboard sidecar watches (kube-prometheus-stack's default). */
export const GRAFANA_DASHBOARD_LABEL = Object.freeze({ grafana_dashboard: "1" });
/** File name of the rules in the ConfigMap and in `npm run observability`'s output. */
export const RULES_FILE = "alerts.rules.yml";
export const DASHBOARD_FILE = "dashboard.json";

const PART_OF = { "app.kubernetes.io/part-of": "llm-ha" };

/** A prometheus-operator object (`monitoring.coreos.com/v1`); kubernetes-models has no schema for it. */
export interface OperatorObject {
  apiVersion: "monitoring.coreos.com/v1";
  kind: "PrometheusRule" | "PodMonitor";
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: Record<string, unknown>;
}

export interface MonitorSpec {
  /** Namespace of the workloads (and of the monitors); the edge tier's pods are in `<namespace>-edge`. */
  namespace: string;
  /** Written as the `cluster` label of every scraped series. */
  clusterName: string;
  /** Extra labels on the operator objects, e.g. `release: kube-prometheus-stack` for its selectors. */
  selectorLabels: Record<string, string>;
}

/** Prometheus meta label of a pod label (`llm-ha.io/az` → `__meta_kubernetes_pod_label_llm_ha_io_az`). */
function podLabelMeta(label: string): string {
  return `__meta_kubernetes_pod_label_${label.replace(/[^A-Za-z0-9]/g, "_")}`;
}

/** One kind of pod Prometheus scrapes; rendered as a PodMonitor or as a plain `scrape_configs` job. */
export interface ScrapeTarget {
  /** The pods' `app.kubernetes.io/name`, also the `job` label unless `job` is given. */
  app: string;
  /** `job` label (and job / PodMonitor name) when several scrapes read the same pods. Default `app`. */
  job?: string;
  /** Container port name. */
  port: string;
  /** Keep the target's own `node`/`az` labels (the agent's AZ series carry the AZ they describe). */
  honorLabels: boolean;
  /** Query parameters of the scrape. */
  params?: Record<string, string[]>;
  /** Metric names kept (everything else is dropped at ingestion); omitted keeps all. */
  keep?: readonly string[];
  /** The pods run in the edge namespace (the L1 tier, the controller), not the workloads one. */
  edge?: boolean;
  /** The pods run in this namespace of their own (the DCGM exporter in kube-system), whatever the workloads one. */
  namespace?: string;
}

/** The namespace a target's pods run in, from the workloads namespace (infra/workloads/namespaces.ts). */
export function targetNamespace(workloadsNamespace: string, t: Pick<ScrapeTarget, "edge" | "namespace">): string {
  if (t.namespace !== undefined) return t.namespace;
  return t.edge ? edgeNamespaceOf(workloadsNamespace) : workloadsNamespace;
}

/** HAProxy's exporter without the `server-template` slots in MAINT (unresolved): 2,640 of a prod pod's 2,926 series. */
export const L1_SCRAPE_PARAMS = Object.freeze({ "no-maint": [""] });

/**
 * The scrapes: agents (port `http`, 9400), L1 proxies (HAProxy's exporter on port
 * `monitor`, 8404, only the names `l1Keep` lists), inference servers (vLLM's `/metrics`
 * on port `http`, 8000: the TTFT and end-to-end latency histograms), the continuation relay
 * in every L1 pod (port `ct-metrics`, 9421, job `llm-ha-continue`) and, unless
 * `fallback: false`, the L4 fallback in the L1 pods (port `fb-metrics`, 9411, job `llm-ha-fallback`).
 */
export function scrapeTargets(l1Keep: readonly string[], opts: { fallback?: boolean } = {}): ScrapeTarget[] {
  return [
    { app: APP.agent, port: "http", honorLabels: true },
    // The controller Deployment: the leader's series come from here; its own `node` (the pod) wins.
    { app: APP.controller, port: "http", honorLabels: true, edge: true },
    { app: APP.l1, port: "monitor", honorLabels: false, params: { ...L1_SCRAPE_PARAMS }, keep: l1Keep, edge: true },
    { app: APP.inference, port: "http", honorLabels: false },
    // NVIDIA's DCGM exporter on each GPU node (infra/workloads/dcgm-exporter.ts): the GPUs' own DCGM_FI_* series.
    { app: APP.dcgmExporter, port: DCGM_EXPORTER_PORT_NAME, honorLabels: false, namespace: DCGM_EXPORTER_NAMESPACE },
    // The continuation relay, in every L1 pod (l1ProxyManifests), on its own metrics listener (9421), as its own job.
    { app: APP.l1, job: CONTINUE_SCRAPE_JOB, port: CONTINUE_METRICS_PORT_NAME, honorLabels: false, edge: true },
    // The L4 fallback beside HAProxy in the same pods, on its own metrics listener (9411), as its own job.
    ...(opts.fallback === false ? [] : [{ app: APP.l1, job: FALLBACK_SCRAPE_JOB, port: FALLBACK_METRICS_PORT_NAME, honorLabels: false, edge: true }]),
  ];
}

/** A regex matching exactly the names (anchored by Prometheus). */
export const keepRegex = (names: readonly string[]): string => [...names].sort().map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");

/**
 * One PodMonitor. `job` comes from the pod's `app.kubernetes.io/name`. The relabelings
 * give `node`, `az` and `cluster` to every series (the agent's own `node`/`az` win where
 * it sets them: `honorLabels`).
 */
function podMonitor(s: MonitorSpec, t: ScrapeTarget): OperatorObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PodMonitor",
    metadata: { name: t.job ?? t.app, namespace: s.namespace, labels: { ...PART_OF, ...s.selectorLabels } },
    spec: {
      // A job of its own is set by a relabeling (after the operator's own `job`).
      ...(t.job ? {} : { jobLabel: "app.kubernetes.io/name" }),
      // The monitor lives in the workloads namespace; the edge tier's pods are next door.
      namespaceSelector: { matchNames: [targetNamespace(s.namespace, t)] },
      selector: { matchLabels: { "app.kubernetes.io/name": t.app } },
      podMetricsEndpoints: [
        {
          port: t.port,
          path: "/metrics",
          interval: "15s",
          honorLabels: t.honorLabels,
          ...(t.params ? { params: t.params } : {}),
          relabelings: [
            ...(t.job ? [{ targetLabel: "job", replacement: t.job }] : []),
            { sourceLabels: ["__meta_kubernetes_pod_node_name"], targetLabel: "node" },
            { sourceLabels: [podLabelMeta(LABELS.az)], targetLabel: "az" },
            { targetLabel: "cluster", replacement: s.clusterName },
          ],
          ...(t.keep ? { metricRelabelings: [{ sourceLabels: ["__name__"], regex: keepRegex(t.keep), action: "keep" }] } : {}),
        },
      ],
    },
  };
}

/** PodMonitors of the agents, the L1 proxies and the inference servers. */
export function podMonitors(s: MonitorSpec, l1Keep: readonly string[], opts: { fallback?: boolean } = {}): OperatorObject[] {
  return scrapeTargets(l1Keep, opts).map((t) => podMonitor(s, t));
}

/** The same scrapes as `scrape_configs` jobs for a Prometheus without the operator. */
export function scrapeConfigs(s: { namespace: string; clusterName: string }, l1Keep: readonly string[], opts: { fallback?: boolean } = {}): Record<string, unknown>[] {
  return scrapeTargets(l1Keep, opts).map((t) => ({
    job_name: t.job ?? t.app,
    honor_labels: t.honorLabels,
    scrape_interval: "15s",
    metrics_path: "/metrics",
    ...(t.params ? { params: t.params } : {}),
    kubernetes_sd_configs: [{ role: "pod", namespaces: { names: [targetNamespace(s.namespace, t)] } }],
    relabel_configs: [
      { source_labels: [podLabelMeta("app.kubernetes.io/name")], regex: t.app, action: "keep" },
      { source_labels: ["__meta_kubernetes_pod_container_port_name"], regex: t.port, action: "keep" },
      { source_labels: ["__meta_kubernetes_pod_node_name"], target_label: "node" },
      { source_labels: [podLabelMeta(LABELS.az)], target_label: "az" },
      { target_label: "cluster", replacement: s.clusterName },
    ],
    ...(t.keep ? { metric_relabel_configs: [{ source_labels: ["__name__"], regex: keepRegex(t.keep), action: "keep" }] } : {}),
  }));
}

export const SCRAPE_FILE = "scrape-configs.yml";
export const INHIBIT_FILE = "alertmanager-inhibit.yml";

/** The scrape jobs for a plain Prometheus (`scrape_config_files:` or pasted under `scrape_configs:`). */
export function scrapeConfigMap(s: { namespace: string; clusterName: string }, l1Keep: readonly string[], opts: { fallback?: boolean } = {}): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "llm-ha-scrape-configs", namespace: s.namespace, labels: { ...PART_OF } },
    data: { [SCRAPE_FILE]: yamlText({ scrape_configs: scrapeConfigs(s, l1Keep, opts) }) },
  };
}

/** Alertmanager's `inhibit_rules` for the shipped alerts, to merge into `alertmanager.yml`. */
export function inhibitConfigMap(namespace: string, inhibitText: string): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "llm-ha-alertmanager-inhibit", namespace, labels: { ...PART_OF } },
    data: { [INHIBIT_FILE]: inhibitText },
  };
}

/** The rule groups as a `PrometheusRule` for prometheus-operator. */
export function prometheusRule(s: MonitorSpec, groups: RuleGroup[]): OperatorObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: { name: "llm-ha", namespace: s.namespace, labels: { ...PART_OF, ...s.selectorLabels } },
    spec: { groups },
  };
}

/** The rules file `promtool` and a plain Prometheus read (JSON is YAML). */
/**
 * A file Prometheus or Alertmanager reads, as block YAML (as they are written by hand and in
 * their docs); long expressions stay on one line (no folding), so that a diff shows the change.
 */
export function yamlText(doc: unknown): string {
  return stringify(doc, { lineWidth: 0 });
}

export function rulesFileText(groups: RuleGroup[]): string {
  return yamlText({ groups });
}

export function dashboardText(d: Dashboard): string {
  return JSON.stringify(d, null, 2) + "\n";
}

/** The rules for a Prometheus without the operator: mount the ConfigMap and list the file in `rule_files`. */
export function rulesConfigMap(namespace: string, groups: RuleGroup[]): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "llm-ha-alert-rules", namespace, labels: { ...PART_OF, "llm-ha.io/prometheus-rules": "true" } },
    data: { [RULES_FILE]: rulesFileText(groups) },
  };
}

/** The dashboard, labelled for Grafana's sidecar. */
export function dashboardConfigMap(namespace: string, d: Dashboard): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "llm-ha-dashboard", namespace, labels: { ...PART_OF, ...GRAFANA_DASHBOARD_LABEL } },
    data: { [`${DASHBOARD_UID}.json`]: dashboardText(d) },
  };
}
