/**
 * The continuation relay's alerts, from its own metrics listener in every L1 pod
 * (job `llm-ha-continue`). A continuation that works is not alerted on: the client saw one
 * answer. Two outcomes need a person: the query-of-death guard stopping a request that took two
 * servers down, and a greedy seeded answer that came out different when run again (the servers
 * are not deterministic, so restarts cannot be trusted to splice).
 */
import type { RuleGroupSpec } from "./common";

const outcomes = (o: string): string => `sum by (cluster) (increase(llmha_continue_outcomes_total{outcome="${o}"}[15m])) > 0`;

export function continuationRules(): RuleGroupSpec {
  return {
    name: "llm-ha.continuation",
    rules: [
      {
        alert: "LlmHaQueryOfDeath",
        // The guard did its job (at most two servers per request), but the request may come back:
        // a client that retries it costs two more.
        expr: outcomes("failed_twice"),
        labels: { severity: "warning" },
        annotations: {
          summary: "A request took two inference servers of {{ $labels.cluster }} down",
          description:
            "Within the last 15 minutes the servers answering one request failed twice under it; the relay did not try a third (the query-of-death guard) and the client got an error. The same request sent again will cost two servers again.",
          runbook:
            "kubectl -n llm-ha-edge logs -l app.kubernetes.io/name=l1-proxy -c continue | grep failed_twice (the route and tokens delivered); the inference servers' logs and restarts at that minute (the crash and its request); block the request's pattern at the edge or fix the server before clients retry it.",
        },
      },
      {
        alert: "LlmHaContinuationMismatch",
        expr: outcomes("mismatch"),
        labels: { severity: "warning" },
        annotations: {
          summary: "A greedy answer of {{ $labels.cluster }} differed when run again",
          description:
            "A stream cut mid-answer was restarted (greedy with a seed) and the second server's text did not match what the client already had: the relay ended it with an error instead of splicing. The servers are not deterministic for greedy seeded requests (different GPU kinds, batch-variant kernels, another model build), so every restart of this kind can fail the same way.",
          runbook:
            "compare the model and engine builds of the AZs' inference servers (LlmHaModelMismatch, llmha_model_outlier_nodes); set LLMHA_CONTINUE_KIND to a kind that continues rather than restarts (vllm) where the servers allow it; see docs/continuation.md for what each kind supports.",
        },
      },
    ],
  };
}
