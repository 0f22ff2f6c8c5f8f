/**
 * The L4 fallback's queue, from its own metrics listener (job `llm-ha-fallback`,
 * one target per L1 pod; every one reads the same topic and replay group, so the lag is
 * taken as the highest any of them reports). L4 itself is `LlmHaGlobalOutage` (fleet.ts):
 * the controller's tier, the one signal every part acts on, is not alerted on twice.
 */
import type { AlertThresholds } from "../thresholds";
import { pct, type RuleGroupSpec } from "./common";
import { TIER } from "./leader-view";

/** The replay group's lag on the queue topic, per cluster (-1 = unreadable is below any threshold). */
export const FALLBACK_LAG = "max by (cluster) (llmha_fallback_consumer_lag)";

export function fallbackRules(t: AlertThresholds): RuleGroupSpec {
  return {
    name: "llm-ha.fallback",
    rules: [
      {
        alert: "LlmHaFallbackQueueLag",
        // Accepted requests wait in Kafka while the fleet can serve again (tier below L4) and the
        // replay makes no progress: nothing replayed (done, failed or a redelivery skipped) in 5 m.
        // A backlog being worked off at the replay rate does not fire, however long it is.
        expr:
          `(${FALLBACK_LAG} > ${t.fallbackLagMessages}) and on (cluster) (${TIER} < 4)` +
          ` unless on (cluster) (sum by (cluster) (increase(llmha_fallback_replayed_total[5m])) > 0)`,
        for: t.fallbackLagFor,
        labels: { severity: "warning" },
        annotations: {
          summary: "{{ $value }} queued L4 requests are not being replayed in {{ $labels.cluster }}",
          description:
            `The fleet is below L4, yet the replay group's consumer lag on the L4 queue stayed above ${t.fallbackLagMessages} with nothing replayed for ${t.fallbackLagFor}: ` +
            "clients that got a 202 keep getting 202 from /v1/llmha/requests/{id}, and their results expire with Kafka's retention if nothing moves.",
          runbook:
            "kubectl -n llm-ha-edge logs -l app.kubernetes.io/name=l1-proxy -c fallback (replay lines: Redis unreadable, L1 answering 5xx, rebalances); " +
            "llmha_fallback_tier_l4 per pod (a fallback that cannot read the tier waits); the group's offsets (kafka-consumer-groups --describe --group llmha.<cluster>.replay).",
        },
      },
      {
        alert: "LlmHaFallbackQueueNearCap",
        expr: `max by (cluster) (llmha_fallback_queue_depth / (llmha_fallback_queue_depth_cap > 0)) >= ${t.fallbackQueueCapRatio}`,
        for: "1m",
        labels: { severity: "warning" },
        annotations: {
          summary: "The L4 queue of {{ $labels.cluster }} is at {{ $value | humanizePercentage }} of its depth cap",
          description:
            `A fallback's queue depth is at or above ${pct(t.fallbackQueueCapRatio)} of LLMHA_FALLBACK_MAX_QUEUE_DEPTH: at the cap, requests that opt in to the queue get 503 + Retry-After instead of a 202.`,
          runbook:
            "If the tier is L4, bring capacity back first (LlmHaGlobalOutage); raise llm-ha:fallback.maxQueueDepth only if MSK's disk and retention can hold it; below L4 see LlmHaFallbackQueueLag.",
        },
      },
      {
        alert: "LlmHaFallbackProviderMisconfigured",
        // A provider answered 401, 403 or 404: its key, its permissions or our model
        // mapping is wrong. Requests went on to the next provider, so nothing failed yet — but
        // the failover the outage plan counts on is one provider short.
        expr: "sum by (cluster, provider) (increase(llmha_fallback_provider_misconfigured_total[15m])) > 0",
        labels: { severity: "warning" },
        annotations: {
          summary: "L4 provider {{ $labels.provider }} of {{ $labels.cluster }} refuses our key or model",
          description:
            "The provider answered 401, 403 or 404 within the last 15 minutes: the API key (keyFile), its permissions or the model mapping in providers.json is wrong. " +
            "The fallback tried the next provider; clients saw a generic error only if none answered.",
          runbook:
            "kubectl -n llm-ha-edge logs -l app.kubernetes.io/name=l1-proxy -c fallback | grep 'no provider answered' (the status per provider); " +
            "check the provider's key in the Pulumi secret (llm-ha:fallback providers), its permissions for the mapped model, and the `models` mapping; the alert clears 15 m after the last refusal.",
        },
      },
    ],
  };
}
