/**
 * The dashboard's Rollout row: the leader's model and engine rollout (AZ by AZ, gated, rolled
 * back on a failed gate). Every series is the leader's (`llmha_rollout_*`, read from the agent
 * that leads now, as the other leader-only rows), created at zero, so the row is flat between
 * rollouts rather than empty.
 */
import { leader, mc, type RowSpec } from "./panel-spec";

export function rolloutRow(): RowSpec {
  return {
    title: "Rollout",
    panels: [
      {
        type: "stat",
        title: "Rollout under way",
        description: "1 while a model or engine rollout is switching, baking, paused or rolling back (llm-ha rollout status for the details)",
        w: 4,
        queries: [{ expr: `max(${leader("llmha_rollout_active")})`, instant: true }],
        mappings: [
          { value: 0, text: "none", color: "green" },
          { value: 1, text: "under way", color: "blue" },
        ],
      },
      {
        type: "timeseries",
        title: "Rollout step",
        description: "The step under way, 0-based (the standby AZ or a canary node first, then each AZ in turn); -1 none",
        w: 6,
        decimals: 0,
        queries: [{ expr: `max(${leader("llmha_rollout_step")})`, legend: "step" }],
      },
      {
        type: "state-timeline",
        title: "Rollout phase",
        description: "The phase of the current or last rollout: switching, baking, paused, rolling-back, then promoted, rolled-back or aborted",
        w: 6,
        queries: [{ expr: `max by (phase) (${leader("llmha_rollout_phase")}) == 1`, legend: "{{phase}}" }],
      },
      {
        type: "state-timeline",
        title: "Rollout gates",
        description: "The latest verdict of each gate of the step under way (canary, errors, latency, continuation, load-time, corruption, capacity): 1 pass, 0 wait (not enough evidence yet), -1 fail (the rollout rolls back)",
        w: 8,
        queries: [{ expr: `max by (gate) (${leader("llmha_rollout_gate")})`, legend: "{{gate}}" }],
        mappings: [
          { value: -1, text: "fail", color: "red" },
          { value: 0, text: "wait", color: "yellow" },
          { value: 1, text: "pass", color: "green" },
        ],
      },
      {
        type: "timeseries",
        title: "Rollbacks by cause",
        description: "Rollouts rolled back in the last 15 minutes (the alert's window), by cause: the failed gate, or abort (an operator's)",
        w: 12,
        decimals: 0,
        queries: [{ expr: `sum by (cause) (increase(${mc("llmha_rollout_rollbacks_total")}[15m]))`, legend: "{{cause}}" }],
        alerts: ["LlmHaRolloutRolledBack"],
      },
      {
        type: "timeseries",
        title: "Rollout switches by outcome",
        description: "Calls the leader made through its rollout actuator (a Deployment patch, a node switch): applied, already, dry-run, refused-stale, failed",
        w: 12,
        decimals: 0,
        queries: [{ expr: `sum by (outcome) (increase(${mc("llmha_rollout_switches_total")}[$__rate_interval]))`, legend: "{{outcome}}" }],
      },
    ],
  };
}
