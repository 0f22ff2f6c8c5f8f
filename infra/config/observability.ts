import { DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "../observability/thresholds";
import { isObj, type Settings } from "./read";

/** Alerts, dashboard and scrape monitors (`llm-ha:observability`). */
export interface ObservabilityConfig {
  /** Ship them at all. Default true. */
  enabled: boolean;
  /** PrometheusRule + PodMonitors (prometheus-operator CRDs must exist; this stack does not install them). Default false. */
  prometheusOperator: boolean;
  /** Namespace of the dashboard ConfigMap. Default: the workloads' (`llm-ha`). */
  grafanaNamespace?: string;
  /** Labels the Prometheus' rule/monitor selectors need, e.g. `release: kube-prometheus-stack`. Default none. */
  selectorLabels: Record<string, string>;
  /** Alert thresholds that differ from the defaults. */
  thresholds: Partial<AlertThresholds>;
}

/** `llm-ha:observability`, validated. */
export function observabilityOf(s: Settings): ObservabilityConfig {
  const { p, key } = s;
  const obs = s.obj("observability");
  const thresholds: Partial<AlertThresholds> = {};
  for (const k of Object.keys(DEFAULT_ALERT_THRESHOLDS) as (keyof AlertThresholds)[]) {
    if (obs[k] !== undefined) Object.assign(thresholds, { [k]: obs[k] });
  }
  for (const [k, why] of thresholdProblems({ ...DEFAULT_ALERT_THRESHOLDS, ...thresholds })) p.add(key(`observability.${k}`), why);
  const selectorLabels = obs.selectorLabels ?? {};
  if (!isObj(selectorLabels) || !Object.values(selectorLabels).every((v) => typeof v === "string")) {
    p.add(key("observability.selectorLabels"), "must be a map of strings");
  }
  const grafanaNamespace = obs.grafanaNamespace;
  if (grafanaNamespace !== undefined && (typeof grafanaNamespace !== "string" || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(grafanaNamespace))) {
    p.add(key("observability.grafanaNamespace"), "must be a Kubernetes namespace name");
  }
  return {
    enabled: obs.enabled !== false,
    prometheusOperator: obs.prometheusOperator === true,
    grafanaNamespace: typeof grafanaNamespace === "string" ? grafanaNamespace : undefined,
    selectorLabels: isObj(selectorLabels) ? (selectorLabels as Record<string, string>) : {},
    thresholds,
  };
}
