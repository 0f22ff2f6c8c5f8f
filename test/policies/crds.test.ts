/**
 * crds-installed: a stack may not reference a CRD it does not install.
 * Starts from the valid fixture stack, adds one custom resource, then what installs it.
 */
import { describe, expect, it } from "vitest";
import { crdsInstalled, installedKinds, kubernetesType } from "../../policies/crds";
import { happyStack, messages } from "./fixtures";
import type { CapturedResource } from "../../policies/runner";

function res(type: string, name: string, props: Record<string, unknown>): CapturedResource {
  return { type, name, urn: `urn:pulumi:test::llm-ha::${type}::${name}`, props };
}

const rule = res("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "obs-prometheus-rule", {
  apiVersion: "monitoring.coreos.com/v1",
  kind: "PrometheusRule",
  metadata: { name: "llm-ha", namespace: "llm-ha" },
  spec: { groups: [] },
});
const crd = res("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "prometheusrules-crd", {
  metadata: { name: "prometheusrules.monitoring.coreos.com" },
  spec: { group: "monitoring.coreos.com", names: { kind: "PrometheusRule", plural: "prometheusrules" }, scope: "Namespaced", versions: [] },
});
const release = (chart: string) => res("kubernetes:helm.sh/v3:Release", "monitoring", { chart, version: "79.5.0", namespace: "monitoring" });

describe("crds-installed", () => {
  it("passes the fixture stack (built-in kinds only)", async () => {
    expect(await messages(crdsInstalled, happyStack())).toEqual([]);
  });

  it("fails a PrometheusRule without prometheus-operator's CRDs", async () => {
    expect(await messages(crdsInstalled, [...happyStack(), rule])).toEqual([
      "PrometheusRule llm-ha (monitoring.coreos.com/v1) needs a CustomResourceDefinition this stack does not install: add the CRD or a Helm release of " +
        "kube-prometheus-stack or prometheus-operator-crds, list monitoring.coreos.com in preinstalledGroups if the cluster already has it, or leave the object out " +
        "(llm-ha:observability.prometheusOperator: false ships the same rules and scrape jobs as ConfigMaps).",
    ]);
  });

  it("passes with the CRD itself, a chart that ships it (any chart reference form), or the group declared preinstalled", async () => {
    expect(await messages(crdsInstalled, [...happyStack(), crd, rule])).toEqual([]);
    expect(await messages(crdsInstalled, [...happyStack(), release("kube-prometheus-stack"), rule])).toEqual([]);
    expect(await messages(crdsInstalled, [...happyStack(), release("oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack"), rule])).toEqual([]);
    expect(await messages(crdsInstalled, [...happyStack(), rule], { "crds-installed": { preinstalledGroups: ["monitoring.coreos.com"] } })).toEqual([]);
  });

  it("a CRD of another kind or a chart that ships other CRDs does not count", async () => {
    const other = structuredClone(crd);
    (other.props.spec as { names: { kind: string } }).names.kind = "ServiceMonitor";
    expect(await messages(crdsInstalled, [...happyStack(), other, rule])).toHaveLength(1);
    expect(await messages(crdsInstalled, [...happyStack(), release("aws-load-balancer-controller"), rule])).toHaveLength(1);
  });

  it("reads type tokens and what installs kinds", () => {
    expect(kubernetesType("kubernetes:monitoring.coreos.com/v1:PodMonitor")).toEqual({ group: "monitoring.coreos.com", version: "v1", kind: "PodMonitor" });
    expect(kubernetesType("aws:eks/addon:Addon")).toBeUndefined();
    const kinds = installedKinds([res("aws:eks/addon:Addon", "vpc-cni", { addonName: "vpc-cni" }), release("aws-load-balancer-controller")]);
    expect([...kinds]).toEqual(expect.arrayContaining(["networking.k8s.aws/PolicyEndpoint", "elbv2.k8s.aws/TargetGroupBinding"]));
  });
});
