/**
 * The standby AZ on the day it is needed: capacity the wake could not get, and the
 * weekly practice wakes that prove it can. Read from the series the agents export:
 * `llmha_standby_capacity_unavailable` (the leader's reconciler: every step of the fallback
 * order failed to launch) and the practice's `llmha_practice_last_timestamp_seconds{outcome}`
 * and `llmha_practice_last_wake_seconds` (set by the agent that led during the practice).
 */
import type { AlertThresholds } from "../thresholds";
import { fromLeader, type RuleGroupSpec } from "./common";
import { durationSeconds } from "./fleet";
import { TIER } from "./leader-view";

/** The time of the last practice with `outcome` in each cluster, whichever agent led then. */
const lastPractice = (outcome: "served" | "failed"): string => `max by (cluster) (llmha_practice_last_timestamp_seconds{outcome="${outcome}"})`;

export function standbyRules(t: AlertThresholds): RuleGroupSpec {
  const slowAfter = durationSeconds(t.standbyWakeFor);
  return {
    name: "llm-ha.standby",
    rules: [
      {
        alert: "LlmHaStandbyCapacityUnavailable",
        // The leader's word only (a former leader's gauge is stale), and only in an incident (L2+):
        // a practice that cannot get capacity ends as a failed practice (LlmHaPracticeWakeFailed).
        expr: `(max by (cluster) ${fromLeader("llmha_standby_capacity_unavailable")} == 1) and on (cluster) (${TIER} >= 2)`,
        for: "1m",
        labels: { severity: "critical" },
        annotations: {
          summary: "The standby AZ cannot be woken in {{ $labels.cluster }}: no capacity for any step of its fallback order",
          description:
            "The fleet is at L2 or worse and the leader tried the standby groups and every fallback group (LLMHA_STANDBY_FALLBACK); each failed to launch (capacity, quota, reservation or launch template). The tier reason says which and why; the active AZs carry the load alone.",
          runbook:
            "Read the reason (llm-ha status, the tier line); look at the groups' scaling activities (aws autoscaling describe-scaling-activities); try another instance type or AZ by hand, or a capacity reservation; shed load (L4 fallback) if the active AZs saturate.",
        },
      },
      {
        alert: "LlmHaPracticeWakeFailed",
        // The last practice that ran to an end failed: a failure newer than the last one that served.
        expr: `${lastPractice("failed")} > (${lastPractice("served")} or ${lastPractice("failed")} * 0)`,
        labels: { severity: "warning" },
        annotations: {
          summary: "The last practice wake of the standby AZ failed in {{ $labels.cluster }}",
          description:
            "The scheduled practice (LLMHA_PRACTICE_WAKE) woke the standby at zero and no standby node served within its budget, or every step of its fallback order failed to launch: a real wake today would fail the same way. It holds until a practice serves.",
          runbook:
            "llm-ha status shows the last practice's reason; check the standby groups' scaling activities (capacity, quota, launch template) and the standby nodes' agents (model load, GPUs); fix, then wait for the next practice or wake the standby by hand.",
        },
      },
      {
        alert: "LlmHaPracticeWakeSlow",
        // The latest practice that served, from the agent that recorded it.
        expr: `max by (cluster) (llmha_practice_last_wake_seconds and on (cluster, node) topk by (cluster) (1, llmha_practice_last_timestamp_seconds{outcome="served"})) > ${slowAfter}`,
        labels: { severity: "warning" },
        annotations: {
          summary: "The last practice wake took {{ $value | humanizeDuration }} to the first standby node serving in {{ $labels.cluster }}",
          description: `Longer than ${t.standbyWakeFor}: a real wake this slow pages LlmHaStandbyNotWaking before the standby serves.`,
          runbook:
            "See where the time goes (llm-ha status: wake phases; the standby node's model load): instance launch, image pull, weights download; prefetch weights from S3, pre-pull the image, or keep one standby node warm.",
        },
      },
    ],
  };
}
