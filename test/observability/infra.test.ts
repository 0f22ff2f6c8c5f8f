/**
 * The stack's observability switches (`llm-ha:observability`) under Pulumi's mocks: on by
 * default with ConfigMaps only (no stack installs prometheus-operator, so
 * none references its CRDs), the operator objects when asked for (and then the policy
 * `crds-installed` refuses the stack), off entirely, thresholds and selector labels from
 * config, bad values named. The per-environment suites check the
 * default objects themselves (`stack-checks.ts`).
 */
import { parse as parseYaml } from "yaml";
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { crdsInstalled } from "../../policies/crds";
import { runPolicies } from "../../policies/runner";
import { operatorObject } from "./stack-checks";

type P = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const OBS = "llm-ha:observability";
const mine = (rs: CapturedResource[]) => rs.filter((r) => r.name.startsWith("obs-")).map((r) => `${(r.props as P).kind} ${(r.props as P).metadata.name}`).sort();

describe("observability in the stack", () => {
  it("ships ConfigMaps only by default (rules, dashboard, scrape jobs, inhibitions), and nothing when switched off", async () => {
    const on = await captureStack("dev");
    expect(mine(on)).toEqual([
      "ConfigMap llm-ha-alert-rules",
      "ConfigMap llm-ha-alertmanager-inhibit",
      "ConfigMap llm-ha-dashboard",
      "ConfigMap llm-ha-scrape-configs",
    ]);
    expect(await runPolicies([crdsInstalled], on)).toEqual([]);
    const off = await captureStack("dev", { [OBS]: JSON.stringify({ enabled: false }) });
    expect(mine(off)).toEqual([]);
    expect(on.length - off.length).toBe(5); // the component and its four objects
  });

  it("with prometheusOperator: the PrometheusRule and seven PodMonitors (the fallback's and the continuation relay's their own jobs, the controller's, the DCGM exporter's), labelled for the selectors; crds-installed refuses them without the CRDs", async () => {
    const rs = await captureStack("dev", {
      [OBS]: JSON.stringify({ prometheusOperator: true, probeLatencyP95Seconds: 3, grafanaNamespace: "monitoring", selectorLabels: { release: "kube-prometheus-stack" } }),
    });
    expect(mine(rs)).toEqual([
      "ConfigMap llm-ha-alert-rules",
      "ConfigMap llm-ha-alertmanager-inhibit",
      "ConfigMap llm-ha-dashboard",
      "ConfigMap llm-ha-scrape-configs",
      "PodMonitor dcgm-exporter",
      "PodMonitor inference",
      "PodMonitor l1-proxy",
      "PodMonitor llm-ha-agent",
      "PodMonitor llm-ha-continue",
      "PodMonitor llm-ha-controller",
      "PodMonitor llm-ha-fallback",
      "PrometheusRule llm-ha",
    ]);
    const cm = (name: string) => rs.find((r) => (r.props as P).metadata?.name === name)!.props as P;
    expect(cm("llm-ha-dashboard").metadata.namespace).toBe("monitoring");
    const rules = parseYaml(cm("llm-ha-alert-rules").data["alerts.rules.yml"] as string) as { groups: unknown };
    expect(rules.groups).toEqual(alertRuleGroups({ probeLatencyP95Seconds: 3, standbyAz: "us-east-1b" }));
    expect(JSON.stringify(rules)).toContain('cluster_az:llmha_az_healthy_capacity:leader{az!=\\"us-east-1b\\"}');
    expect(JSON.stringify(rules)).toContain("le) (rate(llmha_probe_latency_seconds_bucket[5m]))) > 3");
    const operator = rs.filter((x) => (x.props as P).apiVersion === "monitoring.coreos.com/v1");
    expect(operator).toHaveLength(8);
    for (const r of operator) {
      expect((r.props as P).metadata.labels.release, r.name).toBe("kube-prometheus-stack");
      operatorObject(r.props).validate();
    }
    // The L1 scrape leaves out the unresolved server-template slots and keeps only the names the rules and panels read.
    const l1 = operator.find((r) => (r.props as P).metadata.name === "l1-proxy")!.props as P;
    expect(l1.spec.podMetricsEndpoints[0].params).toEqual({ "no-maint": [""] });
    expect(l1.spec.podMetricsEndpoints[0].metricRelabelings[0]).toMatchObject({ sourceLabels: ["__name__"], action: "keep" });
    const violations = await runPolicies([crdsInstalled], rs);
    expect(violations.map((v) => v.message.split(" needs")[0]).sort()).toEqual(["PodMonitor dcgm-exporter (monitoring.coreos.com/v1)", "PodMonitor inference (monitoring.coreos.com/v1)", "PodMonitor l1-proxy (monitoring.coreos.com/v1)", "PodMonitor llm-ha-agent (monitoring.coreos.com/v1)", "PodMonitor llm-ha-continue (monitoring.coreos.com/v1)", "PodMonitor llm-ha-controller (monitoring.coreos.com/v1)", "PodMonitor llm-ha-fallback (monitoring.coreos.com/v1)", "PrometheusRule llm-ha (monitoring.coreos.com/v1)"]);
  });

  it("names every bad observability key at once", async () => {
    const err: unknown = await captureStack("dev", {
      [OBS]: JSON.stringify({ azCapacityRatio: 1.5, standbyWakeFor: "soon", selectorLabels: { release: 1 }, grafanaNamespace: "Bad_NS" }),
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
    expect((err as pulumi.InputPropertiesError).errors.map((e) => e.propertyPath)).toEqual([
      "llm-ha:observability.azCapacityRatio",
      "llm-ha:observability.standbyWakeFor",
      "llm-ha:observability.selectorLabels",
      "llm-ha:observability.grafanaNamespace",
    ]);
  });
});
