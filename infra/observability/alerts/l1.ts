import type { AlertThresholds } from "../thresholds";
import { type RuleGroupSpec } from "./common";
import { L1_BACKEND } from "../../../contracts/names";

/**
 * The L1 proxies' own data: scraped at all, and each with a server to send to. What users
 * see through them (errors, latency) is the SLO group's (`slo.ts`).
 */
export function l1Rules(t: AlertThresholds): RuleGroupSpec {
  const servers = (kind: "active" | "backup") => `haproxy_backend_${kind}_servers{proxy="${L1_BACKEND}"}`;
  return {
    name: "llm-ha.l1",
    rules: [
      {
        alert: "LlmHaL1ProxiesMissing",
        expr: `absent(up{job="${t.l1Job}"} == 1)`,
        for: "5m",
        labels: { severity: "critical" },
        annotations: {
          summary: "Prometheus scrapes no L1 proxy that answers",
          description: "No L1 proxy target is up: the availability SLO, its burn-rate alerts and the missing-server alert are blind.",
          runbook: "kubectl -n llm-ha-edge get pods -l app.kubernetes.io/name=l1-proxy; the l1-proxy PodMonitor (or scrape job) and Prometheus' targets page.",
        },
      },
      {
        alert: "LlmHaL1ProxyDown",
        expr: `up{job="${t.l1Job}"} == 0`,
        for: "2m",
        labels: { severity: "warning" },
        annotations: {
          summary: "The L1 proxy {{ $labels.instance }} in {{ $labels.az }} is not answering scrapes",
          description:
            "A proxy that does not answer its monitor port may not serve either: its last measured request rate counts as failing in the availability SLO for l1LostFor, then no longer (DNS should have moved its clients by then).",
          runbook: "kubectl describe and logs of the l1-proxy pod; the NLB target health of the AZ.",
        },
      },
      {
        alert: "LlmHaL1NoUsableServers",
        expr: `max by (cluster, az, instance) (${servers("active")} + ${servers("backup")}) == 0`,
        for: "1m",
        labels: { severity: "critical" },
        annotations: {
          summary: "The L1 proxy {{ $labels.instance }} in {{ $labels.az }} has no usable server, own-AZ or backup",
          description: `HAProxy sees no server UP in ${L1_BACKEND}: every request it gets fails with 503 (its /az/health fails too, so DNS moves away if every replica is so).`,
          runbook: "HAProxy stats (:8404/stats): servers in MAINT (DNS resolution of the headless Services), DOWN (checks), or none at all; the agents' /readyz; the resolvers section.",
        },
      },
    ],
  };
}
