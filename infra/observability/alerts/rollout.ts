/**
 * The model and engine rollout (AZ by AZ, carried out by the leader: agent/src/fleet/rollout).
 * A rollout that promotes is not alerted on; one that rolled back (a gate failed: canary,
 * errors, latency, continuation, load-time, corruption, capacity) or was aborted by an operator
 * needs a person: the change the stack or the operator wanted is not in the fleet, and the
 * Pulumi stack still names it. Read from the counter of whichever leader rolled back (a new
 * leader's counter starts at 0, so `increase` over the replicas sums the terms).
 */
import type { RuleGroupSpec } from "./common";

/** How long a rollback keeps the alert up: one look at the dashboard's Rollout row, not a page that clears before anyone reads it. */
export const ROLLBACK_WINDOW = "15m";

export function rolloutRules(): RuleGroupSpec {
  return {
    name: "llm-ha.rollout",
    rules: [
      {
        alert: "LlmHaRolloutRolledBack",
        expr: `sum by (cluster, cause) (increase(llmha_rollout_rollbacks_total[${ROLLBACK_WINDOW}])) > 0`,
        labels: { severity: "warning" },
        annotations: {
          summary: "A model or engine rollout of {{ $labels.cluster }} was rolled back (cause {{ $labels.cause }})",
          description:
            "Within the last 15 minutes the leader restored the old model revision and engine image on every node that had the new one: a gate failed (cause = the gate: canary, errors, latency, continuation, load-time, corruption, capacity) or an operator aborted it (cause = abort). The fleet serves the old revision; the stack's llm-ha-rollout ConfigMap still names the new one, and the leader does not try the same request id again.",
          runbook:
            "llm-ha rollout status (or llm-ha status, the rollout section) shows the failed gate's numbers and the step it failed in; compare the new revision's nodes with the old (probe latency, errors, canary answers, load time, vllm:corrupted_requests) on the dashboard's Rollout row; fix the model or image, then change the stack again (a new revision or image is a new request id) or start it by hand with llm-ha rollout start.",
        },
      },
    ],
  };
}
