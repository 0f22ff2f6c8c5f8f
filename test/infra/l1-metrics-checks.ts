/**
 * Prometheus reaches the L1 pods' metrics ports (HAProxy's 8404 to the fallback's
 * 9411, the continuation relay's 9421) by security group and NetworkPolicy, and nothing opens
 * the relay's loopback ports (its completions on 9420, HAProxy's continuation listener on 9422).
 * Called inside `describeStack`, so it runs for dev, staging and prod.
 */
import { expect, it } from "vitest";
import { ofType, type CapturedResource, type Env } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

export function describeL1MetricsFence(_env: Env, resources: () => CapturedResource[]): void {
  it("lets Prometheus into the L1 pods' metrics ports only (HAProxy 8404 to the fallback's 9411, the relay's 9421), by group and NetworkPolicy; never the relay's loopback ports 9420/9422", () => {
    const rules = ofType(resources(), "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").map((r) => r.props as O);
    const fromScrapers = rules.filter((r) => r.securityGroupId === "fence-l1-pods-id" && r.referencedSecurityGroupId === "fence-scrapers-id");
    expect(fromScrapers.map((r) => [r.fromPort, r.toPort]).sort()).toEqual([[8404, 9411], [9421, 9421]]);
    // Nothing from anywhere opens the relay's completions (9420) or HAProxy's continuation listener (9422) on the L1 pods.
    const l1Rules = rules.filter((r) => r.securityGroupId === "fence-l1-pods-id");
    for (const port of [9420, 9422]) expect(l1Rules.filter((r) => r.fromPort <= port && port <= r.toPort), String(port)).toEqual([]);
    const nps = resources()
      .filter((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === "NetworkPolicy")
      .map((r) => r.props as O)
      .filter((np) => np.metadata.namespace === "llm-ha-edge");
    const metrics = nps.filter((np) => ["llmha-fallback-metrics", "llmha-continue-metrics"].includes(np.metadata.name));
    expect(metrics.map((np) => np.spec.ingress[0].ports[0].port).sort()).toEqual([9411, 9421]);
    for (const np of nps) expect(JSON.stringify(np.spec), np.metadata.name).not.toMatch(/"port":942[02]\b/);
  });
}
