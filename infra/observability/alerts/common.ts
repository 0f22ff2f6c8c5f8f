/** What every alert group shares: the rule types, the leader-view join and its bridge. */
import type { ReasonCode } from "../../../contracts/reasons";

export type Severity = "critical" | "warning" | "info";

/** An alert as the group modules write it: `runbook` is turned into the description's first steps and a `runbook_url`. */
export interface AlertSpec {
  alert: string;
  expr: string;
  /** How long the condition must hold; omitted fires on the first evaluation. */
  for?: string;
  labels: { severity: Severity } & Record<string, string>;
  annotations: {
    /** One line for the pager, templated with the series' labels. */
    summary: string;
    description: string;
    /** The first steps of whoever gets it (docs/observability.md has the longer form, under a heading named after the alert). */
    runbook: string;
  };
}

/** An alert as shipped (kubernetes-mixin conventions: `summary`, `description`, `runbook_url`). */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: Severity } & Record<string, string>;
  annotations: { summary: string; description: string; runbook_url: string };
}

export interface RecordingRule {
  record: string;
  expr: string;
  labels?: Record<string, string>;
}

export type Rule = AlertRule | RecordingRule;

export interface RuleGroup {
  name: string;
  /** Evaluation interval of the group; omitted: Prometheus' global one. */
  interval?: string;
  rules: Rule[];
}

/** A group as the modules write it (alerts still with their `runbook` text). */
export interface RuleGroupSpec {
  name: string;
  interval?: string;
  rules: (AlertSpec | RecordingRule)[];
}

export const isAlert = (r: Rule | AlertSpec): r is AlertRule | AlertSpec => "alert" in r;

/** The docs anchor of an alert's runbook section (GitHub's heading slug: lower case). */
export const runbookAnchor = (alert: string): string => alert.toLowerCase();

/** The shipped alert: first steps appended to the description, `runbook_url` at the docs' heading. */
export function finishAlert(a: AlertSpec, runbookBaseUrl: string): AlertRule {
  const { runbook, ...rest } = a.annotations;
  return {
    ...a,
    annotations: { summary: rest.summary, description: `${rest.description} First steps: ${runbook}`, runbook_url: `${runbookBaseUrl}#${runbookAnchor(a.alert)}` },
  };
}

/**
 * How long a leader-view series is carried over a leader change: the old holder's lease
 * lapses (TTL 20 s) and a new one contends (every 5 s) — a gap of up to ~30 s with no
 * `llmha_leader == 1`. Longer than that, `LlmHaNoLeader` speaks.
 */
export const LEADER_BRIDGE = "2m";

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
  "GPU_XID_REPEATED",
  "GPU_FABRIC",
  "GPU_OFF_BUS",
];
/** Soft GPU reasons that need a reset at the next drain. */
export const GPU_RESET_CODES: readonly ReasonCode[] = ["GPU_ROW_REMAP_PENDING", "GPU_RETIRED_PAGES_PENDING"];

/** `series` as published by the agent that holds the lease now (`leaderSeries` narrows the lease gauge). */
export function fromLeader(series: string, leaderSeries = "llmha_leader"): string {
  return `(${series} and on (cluster, node) (${leaderSeries} == 1))`;
}

export const pct = (x: number): string => `${Math.round(x * 1000) / 10} %`;
