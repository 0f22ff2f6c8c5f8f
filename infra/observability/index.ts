import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "../problems";
import { alertNames, alertRuleGroups } from "./alerts";
import { buildDashboard } from "./dashboard";
import { dashboardConfigMap, podMonitors, prometheusRule, rulesConfigMap } from "./manifests";
import { DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "./thresholds";
import { WORKLOADS_NAMESPACE } from "../names";

export interface ObservabilityArgs {
  /** Kubernetes provider of the cluster. Required. */
  provider: k8s.Provider;
  /** Written as the `cluster` label by the scrape monitors. Required. */
  clusterName: string;
  /** Namespace of the agents and L1 proxies; the monitors and rules go there too. Default `WORKLOADS_NAMESPACE` (`llm-ha`). */
  namespace?: string;
  /** Namespace of the dashboard ConfigMap (where Grafana's sidecar looks). Default: `namespace`. */
  grafanaNamespace?: string;
  /** Ship the `PrometheusRule` and PodMonitors (needs prometheus-operator's CRDs). Default true. */
  prometheusOperator?: boolean;
  /** Extra labels on the PrometheusRule and PodMonitors, for the Prometheus' selectors. Default none. */
  selectorLabels?: Record<string, string>;
  /** Alert thresholds over `DEFAULT_ALERT_THRESHOLDS`. Default none. */
  thresholds?: Partial<AlertThresholds>;
}

/**
 * Alerts, dashboard and scrape monitors for the stack: PodMonitors for the agents and the
 * L1 proxies, the rules as a `PrometheusRule` and as a ConfigMap (for a Prometheus
 * without the operator), and the Grafana dashboard ConfigMap (`grafana_dashboard: "1"`).
 */
export class Observability extends pulumi.ComponentResource {
  /** Names of the alerts shipped. */
  readonly alerts: string[];

  constructor(name: string, args: ObservabilityArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Observability", name, {}, opts);
    this.alerts = createObservability(name, args, this);
    this.registerOutputs({ alerts: this.alerts });
  }
}

function validate(args: ObservabilityArgs): void {
  const p = new Problems();
  for (const [k, why] of thresholdProblems({ ...DEFAULT_ALERT_THRESHOLDS, ...args.thresholds })) p.add(`thresholds.${k}`, why);
  for (const [k, v] of Object.entries(args.selectorLabels ?? {})) {
    if (typeof v !== "string") p.add(`selectorLabels.${k}`, "must be a string");
  }
  p.throwIfAny("Observability arguments");
}

export function createObservability(name: string, args: ObservabilityArgs, parent: pulumi.Resource): string[] {
  validate(args);
  const opts = { parent, provider: args.provider };
  const namespace = args.namespace ?? WORKLOADS_NAMESPACE;
  const groups = alertRuleGroups(args.thresholds);
  new k8s.core.v1.ConfigMap(`${name}-rules`, rulesConfigMap(namespace, groups), opts);
  new k8s.core.v1.ConfigMap(`${name}-dashboard`, dashboardConfigMap(args.grafanaNamespace ?? namespace, buildDashboard(args.thresholds)), opts);
  if (args.prometheusOperator ?? true) {
    const spec = { namespace, clusterName: args.clusterName, selectorLabels: args.selectorLabels ?? {} };
    new k8s.apiextensions.CustomResource(`${name}-prometheus-rule`, prometheusRule(spec, groups), opts);
    for (const m of podMonitors(spec)) new k8s.apiextensions.CustomResource(`${name}-${m.metadata.name}`, m, opts);
  }
  return alertNames(groups);
}
