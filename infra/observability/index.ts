import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "../problems";
import { alertNames } from "./alerts";
import { observabilityObjects } from "./objects";
import { DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "./thresholds";
import { WORKLOADS_NAMESPACE } from "../names";

export interface ObservabilityArgs {
  /** Kubernetes provider of the cluster. Required. */
  provider: k8s.Provider;
  /** Written as the `cluster` label by the scrape monitors. Required. */
  clusterName: string;
  /** Namespace of the agents and L1 proxies; the monitors and rules go there too. Default `WORKLOADS_NAMESPACE` (`llm-ha`). */
  namespace?: string;
  /** What creates that namespace: every object here is created after it. Default none (an existing namespace). */
  namespaceResource?: pulumi.Resource;
  /** Namespace of the dashboard ConfigMap (where Grafana's sidecar looks). Default: `namespace`. */
  grafanaNamespace?: string;
  /**
   * Also ship the `PrometheusRule` and PodMonitors. They need prometheus-operator's CRDs,
   * which this stack does not install: default false (the ConfigMaps carry the same rules and
   * scrape jobs for any Prometheus). Policy `crds-installed` refuses a stack that sets it
   * without installing the CRDs.
   */
  prometheusOperator?: boolean;
  /** Extra labels on the PrometheusRule and PodMonitors, for the Prometheus' selectors. Default none. */
  selectorLabels?: Record<string, string>;
  /** Alert thresholds over `DEFAULT_ALERT_THRESHOLDS`. Default none. */
  thresholds?: Partial<AlertThresholds>;
  /** Scrape the L4 fallback beside the L1 proxies (port `fb-metrics`, job `llm-ha-fallback`). Default true. */
  fallback?: boolean;
}

/**
 * Alerts, dashboard and scrapes for the stack: ConfigMaps with the rules, the scrape jobs
 * (agents, L1 proxies, inference servers), Alertmanager's inhibition rules and the Grafana
 * dashboard (`grafana_dashboard: "1"`); with `prometheusOperator`, also a `PrometheusRule`
 * and PodMonitors.
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
  const opts = { parent, provider: args.provider, dependsOn: args.namespaceResource ? [args.namespaceResource] : [] };
  const namespace = args.namespace ?? WORKLOADS_NAMESPACE;
  const o = observabilityObjects({
    namespace,
    grafanaNamespace: args.grafanaNamespace,
    clusterName: args.clusterName,
    prometheusOperator: args.prometheusOperator ?? false,
    selectorLabels: args.selectorLabels ?? {},
    thresholds: args.thresholds,
    fallback: args.fallback,
  });
  // Resource names in the order of `configMaps` (rules, dashboard, scrape jobs, inhibitions).
  const cmNames = ["rules", "dashboard", "scrape-configs", "alertmanager-inhibit"];
  o.configMaps.forEach((cm, i) => new k8s.core.v1.ConfigMap(`${name}-${cmNames[i]}`, cm, opts));
  for (const x of o.operator) {
    new k8s.apiextensions.CustomResource(x.kind === "PrometheusRule" ? `${name}-prometheus-rule` : `${name}-${x.metadata.name}`, x, opts);
  }
  return alertNames(o.groups);
}
