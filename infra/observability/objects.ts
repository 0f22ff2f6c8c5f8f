/**
 * Every object the observability part ships, as plain data, for the stack and for
 * `npm run observability` alike: ConfigMaps always (rules, dashboard, scrape jobs,
 * Alertmanager inhibitions), prometheus-operator objects only when asked for — a stack
 * must not reference a CRD it does not install (policy `crds-installed`).
 */
import { type ConfigMap } from "../workloads/common";
import { alertRuleGroups, type RuleGroup } from "./alerts";
import { buildDashboard, dashboardExprs, type Dashboard } from "./dashboard";
import { inhibitText } from "./inhibit";
import { dashboardConfigMap, inhibitConfigMap, podMonitors, prometheusRule, rulesConfigMap, scrapeConfigMap, type OperatorObject } from "./manifests";
import { haproxyKeepList } from "./promql";
import type { AlertThresholds } from "./thresholds";

export interface ObjectsSpec {
  namespace: string;
  grafanaNamespace?: string;
  clusterName: string;
  prometheusOperator: boolean;
  selectorLabels: Record<string, string>;
  thresholds?: Partial<AlertThresholds>;
  /** Scrape the L4 fallback in the L1 pods (job `llm-ha-fallback`). Default true (a stack's fallback is on by default). */
  fallback?: boolean;
}

export interface ObservabilityObjects {
  groups: RuleGroup[];
  dashboard: Dashboard;
  /** HAProxy metric names the L1 scrape keeps: those a rule or a panel reads. */
  l1Keep: string[];
  configMaps: ConfigMap[];
  operator: OperatorObject[];
}

export function observabilityObjects(s: ObjectsSpec): ObservabilityObjects {
  const groups = alertRuleGroups(s.thresholds);
  const dashboard = buildDashboard(s.thresholds);
  const exprs = [...groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExprs(dashboard)];
  const l1Keep = haproxyKeepList(exprs);
  const spec = { namespace: s.namespace, clusterName: s.clusterName, selectorLabels: s.selectorLabels };
  const configMaps = [
    rulesConfigMap(s.namespace, groups),
    dashboardConfigMap(s.grafanaNamespace ?? s.namespace, dashboard),
    scrapeConfigMap(spec, l1Keep, { fallback: s.fallback }),
    inhibitConfigMap(s.namespace, inhibitText()),
  ];
  const operator = s.prometheusOperator ? [prometheusRule(spec, groups), ...podMonitors(spec, l1Keep, { fallback: s.fallback })] : [];
  return { groups, dashboard, l1Keep, configMaps, operator };
}
