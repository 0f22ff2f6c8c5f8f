/** What every alert group shares: the rule types and the leader-view join. */
import type { ReasonCode } from "../../../contracts/reasons";

export type Severity = "critical" | "warning" | "info";

export interface AlertRule {
  alert: string;
  expr: string;
  /** How long the condition must hold; omitted fires on the first evaluation. */
  for?: string;
  labels: { severity: Severity };
  annotations: {
    /** One line for the pager, templated with the series' labels. */
    summary: string;
    description: string;
    /** The first steps of whoever gets it (docs/observability.md has the longer form). */
    runbook: string;
  };
}

export interface RuleGroup {
  name: string;
  rules: AlertRule[];
}

/** Reasons that mean the GPU hardware or its driver, not the software on it. */
export const GPU_HARDWARE_CODES: readonly ReasonCode[] = [
  "GPU_ECC_UNCORRECTED",
  "GPU_ROW_REMAP_FAILURE",
  "GPU_RECOVERY_ACTION",
  "GPU_XID_FATAL",
  "GPU_LOST",
  "GPU_MISSING",
  "GPU_DRIVER_NOT_LOADED",
  "GPU_DRIVER_MISMATCH",
];
/** Soft GPU reasons that need a reset at the next drain. */
export const GPU_RESET_CODES: readonly ReasonCode[] = ["GPU_ROW_REMAP_PENDING", "GPU_RETIRED_PAGES_PENDING"];

/** `series` as published by the agent that holds the lease now (`leaderSeries` narrows the lease gauge). */
export function fromLeader(series: string, leaderSeries = "llmha_leader"): string {
  return `(${series} and on (cluster, node) (${leaderSeries} == 1))`;
}

export const pct = (x: number): string => `${Math.round(x * 1000) / 10} %`;
