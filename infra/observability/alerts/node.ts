import type { AlertThresholds } from "../thresholds";
import { type RuleGroupSpec } from "./common";

export function nodeRules(t: AlertThresholds): RuleGroupSpec {
  return {
    name: "llm-ha.node",
    rules: [
      {
        alert: "LlmHaNodeUnhealthy",
        // The agent already needs `fall` (3) failing checks for a soft fault; a minute out
        // of service is worth a look even though L1 moved the traffic at once.
        // A model loading (scale-out, node replacement, roll-out, the standby's morning) is
        // normal and out of service on purpose: LlmHaModelLoadStuck watches it instead.
        expr:
          'max by (cluster, az, node, status) (llmha_node_status{status=~"UNHEALTHY|UNREACHABLE"}) == 1' +
          ' unless on (cluster, az, node) (max by (cluster, az, node) (llmha_node_reason_active{code="MODEL_LOADING"}) == 1)',
        for: "1m",
        labels: { severity: "warning" },
        annotations: {
          summary: "Node {{ $labels.node }} in {{ $labels.az }} is {{ $labels.status }}",
          description: "The agent has kept node {{ $labels.node }} out of service for over a minute; HAProxy sends its traffic elsewhere.",
          runbook: "GET :9400/status on the node for the reasons; GPU reasons: drain and replace the node; inference reasons: kubectl logs of the inference pod.",
        },
      },
      {
        alert: "LlmHaModelLoadStuck",
        expr: 'max by (cluster, az, node) (llmha_node_reason_active{code="MODEL_LOADING"}) == 1',
        for: t.modelLoadFor,
        labels: { severity: "warning" },
        annotations: {
          summary: "The model on {{ $labels.node }} in {{ $labels.az }} has been loading for over " + t.modelLoadFor,
          description: `A load (weights download, compile, warm-up) normally ends well within ${t.modelLoadFor}; the node takes no traffic meanwhile.`,
          runbook: "kubectl logs of the inference pod (download stalled? out of disk? OOM at load? HF token?); the node's disk and network; restart the pod once.",
        },
      },
      {
        alert: "LlmHaNodeStatusUnknown",
        expr: 'max by (cluster, az, node) (llmha_node_status{status="UNKNOWN"}) == 1',
        for: "5m",
        labels: { severity: "warning" },
        annotations: {
          summary: "Node {{ $labels.node }} in {{ $labels.az }} has been UNKNOWN for 5 minutes",
          description: "The agent's own checks fail (nvidia-smi hangs or errors, or it never finished starting); UNKNOWN is never treated as healthy.",
          runbook: "kubectl logs the agent pod on the node; run nvidia-smi on the node; a hung nvidia-smi means a driver fault: drain and replace.",
        },
      },
      {
        alert: "LlmHaProbeLatencyHigh",
        expr: `histogram_quantile(0.95, sum by (cluster, az, node, le) (rate(llmha_probe_latency_seconds_bucket[5m]))) > ${t.probeLatencyP95Seconds}`,
        for: "5m",
        labels: { severity: "warning" },
        annotations: {
          summary: "P95 probe latency on {{ $labels.node }} is {{ $value | humanizeDuration }}",
          description: `The tiny completion the agent sends has taken over ${t.probeLatencyP95Seconds} s at P95 for 5 minutes: users wait as long.`,
          runbook: "Check the node's engine queue (llmha_engine_requests_waiting) and KV cache; if one node only, drain it; if many, look at load and the model server version.",
        },
      },
    ],
  };
}
