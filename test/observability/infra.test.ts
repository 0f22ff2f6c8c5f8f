/**
 * The stack's observability switches (`llm-ha:observability`) under Pulumi's mocks: on by
 * default, off entirely, ConfigMaps only without prometheus-operator, thresholds and
 * selector labels from config, bad values named. The per-environment suites check the
 * default objects themselves (`stack-checks.ts`).
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { captureStack, type CapturedResource } from "../../infra/capture";

type P = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const OBS = "llm-ha:observability";
const mine = (rs: CapturedResource[]) => rs.filter((r) => r.name.startsWith("obs-")).map((r) => `${(r.props as P).kind} ${(r.props as P).metadata.name}`).sort();

describe("observability in the stack", () => {
  it("ships rules, dashboard and monitors by default, and nothing when switched off", async () => {
    const on = await captureStack("dev");
    expect(mine(on)).toEqual(["ConfigMap llm-ha-alert-rules", "ConfigMap llm-ha-dashboard", "PodMonitor l1-proxy", "PodMonitor llm-ha-agent", "PrometheusRule llm-ha"]);
    const off = await captureStack("dev", { [OBS]: JSON.stringify({ enabled: false }) });
    expect(mine(off)).toEqual([]);
    expect(on.length - off.length).toBe(6); // the component and its five objects
  });

  it("without prometheus-operator ships the ConfigMaps only; thresholds, labels and namespace come from config", async () => {
    const rs = await captureStack("dev", {
      [OBS]: JSON.stringify({ prometheusOperator: false, probeLatencyP95Seconds: 3, grafanaNamespace: "monitoring" }),
    });
    expect(mine(rs)).toEqual(["ConfigMap llm-ha-alert-rules", "ConfigMap llm-ha-dashboard"]);
    const cm = (name: string) => rs.find((r) => (r.props as P).metadata?.name === name)!.props as P;
    expect(cm("llm-ha-dashboard").metadata.namespace).toBe("monitoring");
    const rules = JSON.parse(cm("llm-ha-alert-rules").data["alerts.rules.yml"] as string) as { groups: unknown };
    expect(rules.groups).toEqual(alertRuleGroups({ probeLatencyP95Seconds: 3, standbyAz: "us-east-1b" }));
    expect(JSON.stringify(rules)).toContain('llmha_az_healthy_capacity{az!=\\"us-east-1b\\"}');
    expect(JSON.stringify(rules)).toContain("le) (rate(llmha_probe_latency_seconds_bucket[5m]))) > 3");

    const labelled = await captureStack("dev", { [OBS]: JSON.stringify({ selectorLabels: { release: "kube-prometheus-stack" } }) });
    for (const r of labelled.filter((x) => (x.props as P).apiVersion === "monitoring.coreos.com/v1")) {
      expect((r.props as P).metadata.labels.release, r.name).toBe("kube-prometheus-stack");
    }
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
