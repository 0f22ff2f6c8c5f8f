/**
 * The Kubernetes objects that make llm-ha observable, as plain data: scrape monitors for
 * the agents and the L1 proxies, the alert rules (PrometheusRule and a plain ConfigMap)
 * and the Grafana dashboard ConfigMap the Grafana sidecar picks up.
 */
import { type ConfigMap } from "../workloads/common";
import { type RuleGroup } from "./alerts";
import { DASHBOARD_UID, type Dashboard } from "./dashboard";
import { APP, LABELS } from "../names";

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
  /** Namespace of the workloads (and of the monitors). */
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

/**
 * One PodMonitor. `job` comes from the pod's `app.kubernetes.io/name` (`llm-ha-agent`,
 * `l1-proxy`). The agent labels its own series with `node` and `az`, so its scrape
 * honours them (the AZ series carry the AZ they describe, not the scraped pod's); the
 * relabelings give the same labels to `up` and to HAProxy's series.
 */
function podMonitor(s: MonitorSpec, app: string, port: string): OperatorObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PodMonitor",
    metadata: { name: app, namespace: s.namespace, labels: { ...PART_OF, ...s.selectorLabels } },
    spec: {
      jobLabel: "app.kubernetes.io/name",
      namespaceSelector: { matchNames: [s.namespace] },
      selector: { matchLabels: { "app.kubernetes.io/name": app } },
      podMetricsEndpoints: [
        {
          port,
          path: "/metrics",
          interval: "15s",
          honorLabels: true,
          relabelings: [
            { sourceLabels: ["__meta_kubernetes_pod_node_name"], targetLabel: "node" },
            { sourceLabels: [podLabelMeta(LABELS.az)], targetLabel: "az" },
            { targetLabel: "cluster", replacement: s.clusterName },
          ],
        },
      ],
    },
  };
}

/** PodMonitors of the agent DaemonSets (port `http`, 9400) and the L1 proxies (port `monitor`, 8404). */
export function podMonitors(s: MonitorSpec): OperatorObject[] {
  return [podMonitor(s, APP.agent, "http"), podMonitor(s, APP.l1, "monitor")];
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
export function rulesFileText(groups: RuleGroup[]): string {
  return JSON.stringify({ groups }, null, 2) + "\n";
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
