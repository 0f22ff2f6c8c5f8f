/**
 * What the observability component must have put in an environment's captured stack, and
 * a hand-written shape check of the prometheus-operator objects (kubernetes-models has no
 * schema for `monitoring.coreos.com/v1`). Used by the per-environment infra suites.
 */
import { parse as parseYaml } from "yaml";
import { expect } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { DASHBOARD_UID } from "../../infra/observability/dashboard";
import { INHIBIT_FILE, RULES_FILE, rulesFileText, SCRAPE_FILE } from "../../infra/observability/manifests";
import type { CapturedResource } from "../../infra/capture";

type O = Record<string, unknown>;
const isObj = (v: unknown): v is O => typeof v === "object" && v !== null && !Array.isArray(v);
const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DURATION = /^([0-9]+(ms|s|m|h|d|w|y))+$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export class OperatorShapeError extends Error {
  constructor(kind: string, problems: string[]) {
    super(`${kind}: ${problems.join("; ")}`);
    this.name = "OperatorShapeError";
  }
}

function stringMap(v: unknown, path: string, bad: string[]): void {
  if (v === undefined) return;
  if (!isObj(v) || !Object.values(v).every((x) => typeof x === "string")) bad.push(`${path} must map strings to strings`);
}

function only(o: O, keys: string[], path: string, bad: string[]): void {
  for (const k of Object.keys(o)) if (!keys.includes(k)) bad.push(`${path}.${k} is not a field of the CRD`);
}

function ruleProblems(spec: O, bad: string[]): void {
  const groups = spec.groups;
  if (!Array.isArray(groups) || groups.length === 0) return void bad.push("spec.groups must be a non-empty list");
  const names = new Set<string>();
  groups.forEach((g: unknown, i) => {
    const at = `spec.groups[${i}]`;
    if (!isObj(g) || typeof g.name !== "string" || !g.name) return void bad.push(`${at}.name is required`);
    if (names.has(g.name)) bad.push(`${at}.name ${g.name} is used twice`);
    names.add(g.name);
    only(g, ["name", "interval", "rules", "partial_response_strategy", "limit"], at, bad);
    if (!Array.isArray(g.rules) || g.rules.length === 0) return void bad.push(`${at}.rules must be a non-empty list`);
    g.rules.forEach((r: unknown, j) => {
      const rat = `${at}.rules[${j}]`;
      if (!isObj(r)) return void bad.push(`${rat} must be an object`);
      only(r, ["alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"], rat, bad);
      if ((r.alert === undefined) === (r.record === undefined)) bad.push(`${rat} needs exactly one of alert and record`);
      if (typeof r.expr !== "string" || !r.expr.trim()) bad.push(`${rat}.expr must be a non-empty string`);
      if (r.for !== undefined && (typeof r.for !== "string" || !DURATION.test(r.for))) bad.push(`${rat}.for must be a duration`);
      stringMap(r.labels, `${rat}.labels`, bad);
      stringMap(r.annotations, `${rat}.annotations`, bad);
    });
  });
}

function podMonitorProblems(spec: O, bad: string[]): void {
  only(spec, ["jobLabel", "podTargetLabels", "podMetricsEndpoints", "selector", "namespaceSelector", "sampleLimit"], "spec", bad);
  if (!isObj(spec.selector)) bad.push("spec.selector is required");
  else stringMap(spec.selector.matchLabels, "spec.selector.matchLabels", bad);
  const eps = spec.podMetricsEndpoints;
  if (!Array.isArray(eps) || eps.length === 0) return void bad.push("spec.podMetricsEndpoints must be a non-empty list");
  eps.forEach((e: unknown, i) => {
    const at = `spec.podMetricsEndpoints[${i}]`;
    if (!isObj(e)) return void bad.push(`${at} must be an object`);
    only(e, ["port", "path", "params", "interval", "scrapeTimeout", "honorLabels", "relabelings", "metricRelabelings", "scheme"], at, bad);
    if (e.params !== undefined && (!isObj(e.params) || !Object.values(e.params).every((v) => Array.isArray(v) && v.every((x) => typeof x === "string")))) {
      bad.push(`${at}.params must map names to lists of strings`);
    }
    for (const [k, r] of ((e.metricRelabelings ?? []) as unknown[]).entries()) {
      if (!isObj(r)) bad.push(`${at}.metricRelabelings[${k}] must be an object`);
      else only(r, ["sourceLabels", "targetLabel", "replacement", "action", "regex", "separator"], `${at}.metricRelabelings[${k}]`, bad);
    }
    if (typeof e.port !== "string" || !e.port) bad.push(`${at}.port must name a container port`);
    if (e.interval !== undefined && (typeof e.interval !== "string" || !DURATION.test(e.interval))) bad.push(`${at}.interval must be a duration`);
    if (e.honorLabels !== undefined && typeof e.honorLabels !== "boolean") bad.push(`${at}.honorLabels must be a boolean`);
    for (const [k, r] of ((e.relabelings ?? []) as unknown[]).entries()) {
      if (!isObj(r)) {
        bad.push(`${at}.relabelings[${k}] must be an object`);
        continue;
      }
      only(r, ["sourceLabels", "targetLabel", "replacement", "action", "regex", "separator", "modulus"], `${at}.relabelings[${k}]`, bad);
      if (typeof r.targetLabel !== "string" || !LABEL_NAME.test(r.targetLabel)) bad.push(`${at}.relabelings[${k}].targetLabel must be a label name`);
    }
  });
}

/** A validator for the KINDS table of the infra suites: `validate()` throws `OperatorShapeError`. */
export function operatorObject(o: O): { validate(): void } {
  return {
    validate() {
      const bad: string[] = [];
      if (o.apiVersion !== "monitoring.coreos.com/v1") bad.push("apiVersion must be monitoring.coreos.com/v1");
      const meta = isObj(o.metadata) ? o.metadata : {};
      if (typeof meta.name !== "string" || !DNS1123.test(meta.name)) bad.push("metadata.name must be a DNS-1123 name");
      if (typeof meta.namespace !== "string" || !DNS1123.test(meta.namespace)) bad.push("metadata.namespace is required");
      stringMap(meta.labels, "metadata.labels", bad);
      const spec = isObj(o.spec) ? o.spec : {};
      if (o.kind === "PrometheusRule") ruleProblems(spec, bad);
      else if (o.kind === "PodMonitor") podMonitorProblems(spec, bad);
      else bad.push(`kind ${String(o.kind)} is not checked here`);
      if (bad.length) throw new OperatorShapeError(String(o.kind), bad);
    },
  };
}

// Captured props are untyped JSON.
type P = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The alerts, dashboard and scrapes of one environment's stack, with its default settings:
 * ConfigMaps only (no stack installs prometheus-operator's CRDs, so none references them).
 */
export function expectObservability(rs: CapturedResource[], clusterName: string, standbyAz: string | null): void {
  const k8s = (kind: string) => rs.filter((r) => r.type.startsWith("kubernetes:") && (r.props as P).kind === kind).map((r) => r.props as P);
  expect(rs.filter((r) => r.type.startsWith("kubernetes:monitoring.coreos.com/")).map((r) => r.type)).toEqual([]);
  const cms = k8s("ConfigMap");
  const cm = (name: string) => cms.find((c) => c.metadata.name === name);
  // The stack's standby AZ is left out of the AZ capacity alert (scaled to zero on purpose).
  expect(cm("llm-ha-alert-rules")?.data[RULES_FILE]).toBe(rulesFileText(alertRuleGroups({ standbyAz })));
  const dash = cms.find((c) => c.metadata.labels?.grafana_dashboard === "1");
  expect(JSON.parse(dash?.data[`${DASHBOARD_UID}.json`] as string).uid).toBe(DASHBOARD_UID);
  expect(parseYaml(cm("llm-ha-alertmanager-inhibit")?.data[INHIBIT_FILE] as string).inhibit_rules.length).toBeGreaterThan(5);

  // Each scrape job selects pods the stack runs, on a port they name, and labels the cluster.
  const jobs = parseYaml(cm("llm-ha-scrape-configs")?.data[SCRAPE_FILE] as string).scrape_configs as P[];
  expect(jobs.map((j) => j.job_name).sort()).toEqual(["dcgm-exporter", "inference", "l1-proxy", "llm-ha-agent", "llm-ha-continue", "llm-ha-controller", "llm-ha-fallback"]);
  const workloads = [...k8s("DaemonSet"), ...k8s("Deployment")];
  for (const j of jobs) {
    const [app, port] = j.relabel_configs.filter((r: P) => r.action === "keep").map((r: P) => r.regex);
    const selected = workloads.filter((w) => w.spec.template.metadata.labels["app.kubernetes.io/name"] === app);
    expect(selected.length, j.job_name).toBeGreaterThan(0);
    // The port may be any container's (the fallback's and the relay's metrics ports are on their own containers in the L1 pods).
    for (const w of selected) expect(w.spec.template.spec.containers.flatMap((c: P) => (c.ports ?? []).map((p: P) => p.name))).toContain(port);
    // …in the namespace the job discovers pods in (the DCGM exporter in kube-system, beside the device plugin).
    for (const w of selected) expect(j.kubernetes_sd_configs[0].namespaces.names, j.job_name).toContain(w.metadata.namespace);
    expect(j.relabel_configs).toContainEqual({ target_label: "cluster", replacement: clusterName });
  }
  // The L1 proxies serve HAProxy's exporter on the monitor port the scrape reads.
  for (const c of cms.filter((x) => x.metadata.name.startsWith("l1-"))) {
    expect(c.data["haproxy.cfg"]).toContain("http-request use-service prometheus-exporter if { path /metrics }");
  }
}
