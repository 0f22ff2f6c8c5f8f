/**
 * Same model everywhere: a failover to a node serving another model, revision or
 * precision changes the answers users get. The leader compares what every node's server says
 * it serves and publishes `llmha_model_outlier_nodes` (leader-only, so read from the lease
 * holder and bridged over a leader change like `leader-view.ts`'s series).
 */
import { fromLeader, LEADER_BRIDGE, type RuleGroupSpec } from "./common";

const FRESH = "cluster:llmha_model_outlier_nodes:leader_fresh";
/** Outlier nodes as the current leader sees them, carried over a hand-over gap. */
export const MODEL_OUTLIERS = "cluster:llmha_model_outlier_nodes:leader";

/**
 * A rolling update of the model changes the majority node by node: for a while the fleet is
 * mixed on purpose. `for: 30m` lets a normal roll-out finish (one pod at a time, a model load
 * each); a fleet mixed longer than that is a node or an AZ left behind.
 */
export const MODEL_MISMATCH_FOR = "30m";

export function modelRules(): RuleGroupSpec {
  return {
    name: "llm-ha.model",
    rules: [
      // Recorded in this group, before the alert: rules of one group run in order.
      { record: FRESH, expr: `max by (cluster) ${fromLeader("llmha_model_outlier_nodes")}` },
      { record: MODEL_OUTLIERS, expr: `${FRESH} or max by (cluster) (last_over_time(${FRESH}[${LEADER_BRIDGE}]))` },
      {
        alert: "LlmHaModelMismatch",
        expr: `${MODEL_OUTLIERS} > 0`,
        for: MODEL_MISMATCH_FOR,
        labels: { severity: "warning" },
        annotations: {
          summary: "{{ $value }} nodes serve another model than the fleet's majority in {{ $labels.cluster }}",
          description:
            "The leader compares the model id, revision, dtype and context length each node's server reports: a failover to an odd node changes the answers users get.",
          runbook:
            "llm-ha status (model line) names the odd nodes and AZs; compare their inference Deployment's image and --model/--revision/--dtype args; roll the odd ones to the fleet's model, or pin LLMHA_MODEL_REVISION so a wrong one is taken out.",
        },
      },
      // Correctness canaries: a node answering wrongly with 200 is out; most of the fleet disagreeing is a change, not a GPU.
      {
        alert: "LlmHaCanaryMismatch",
        expr: `max by (cluster, az, node) (llmha_node_reason_active{code="CANARY_MISMATCH"}) > 0`,
        for: "0m",
        labels: { severity: "warning" },
        annotations: {
          summary: "{{ $labels.node }} answers its correctness canaries wrongly: drained (CANARY_MISMATCH)",
          description:
            "The node's greedy known-answer requests differ from the expected answers of its model and revision, twice (two sets): silent data corruption (a flipped bit in cached weights, a bad GPU or kernel). It stays out until its answers match after a restart.",
          runbook:
            "llm-ha status (canary line) shows what differed; restart the inference pod (a fresh copy of the weights); if it still differs, cordon the node and run the GPU diagnostics (dcgmi diag -r 3).",
        },
      },
      {
        alert: "LlmHaCanaryFleetDisagrees",
        expr: `count by (cluster) (llmha_canary_phase{phase="capped"} == 1) > 0`,
        for: "5m",
        labels: { severity: "critical" },
        annotations: {
          summary: "{{ $value }} nodes of {{ $labels.cluster }} answer canaries unlike the expectation, most of the fleet: no drain",
          description:
            "Most nodes serving a model disagree with its expected canary answers: a model, revision, dtype or engine change, not one bad GPU, so the blast-radius cap drains none of them.",
          runbook:
            "Check what changed (image, engine version, --dtype, quantization) against llm-ha canary show; if the new answers are right, record them with llm-ha canary record --model KEY.",
        },
      },
    ],
  };
}
