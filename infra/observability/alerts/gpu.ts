import type { AlertThresholds } from "../thresholds";
import { GPU_HARDWARE_CODES, GPU_RESET_CODES, type RuleGroupSpec } from "./common";

export function gpuRules(_t: AlertThresholds): RuleGroupSpec {
  return {
    name: "llm-ha.gpu",
    rules: [
      {
        alert: "LlmHaGpuHardwareFault",
        // Hard faults act at once and matter even when brief: no `for`, held 5 minutes.
        expr: `max by (cluster, az, node, code) (max_over_time(llmha_node_reason_active{code=~"${GPU_HARDWARE_CODES.join("|")}"}[5m])) == 1`,
        labels: { severity: "warning" },
        annotations: {
          summary: "GPU fault {{ $labels.code }} on {{ $labels.node }} in {{ $labels.az }}",
          description: "The agent saw a GPU hardware or driver fault (uncorrectable ECC, row-remap failure, recovery action, fatal XID, lost GPU) and took the node out.",
          runbook: "Cordon and drain the node and let EKS node repair replace it; keep the nvidia-smi -q output and the XID lines for the vendor.",
        },
      },
      {
        alert: "LlmHaGpuResetPending",
        expr: `max by (cluster, az, node, code) (llmha_node_reason_active{code=~"${GPU_RESET_CODES.join("|")}"}) == 1`,
        for: "10m",
        labels: { severity: "info" },
        annotations: {
          summary: "GPU on {{ $labels.node }} needs a reset ({{ $labels.code }})",
          description: "Rows or pages wait for a GPU reset; the node serves at lower weight until then.",
          runbook: "Drain the node in a quiet hour and reboot it (or replace it).",
        },
      },
    ],
  };
}
