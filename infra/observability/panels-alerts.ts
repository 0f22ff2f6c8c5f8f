/**
 * The rows that give each alert without a panel of its own one (without them the dashboard
 * shows nothing of the L4 fallback, practice wakes, model mismatch or standby capacity though
 * alerts page on each): the standby AZ and its practice wakes, the L4 fallback service, and the
 * agents, models and cloud actions. Each panel names the alerts it shows.
 */
import { type AlertThresholds } from "./thresholds";
import { leaderFleet, m, mc, type RowSpec } from "./panel-spec";
import { STANDBY_WANTED_SINCE } from "./alerts/leader-view";

export function alertRows(t: AlertThresholds): RowSpec[] {
  const rate = (name: string, by: string) => `sum by (${by}) (rate(${mc(name)}[$__rate_interval]))`;
  return [
    {
      title: "Standby AZ and practice wakes",
      panels: [
        {
          type: "stat",
          title: "Standby capacity",
          description: "Whether the leader found every step of the standby's fallback order without capacity (pages under L2 or worse)",
          w: 4,
          h: 5,
          queries: [{ expr: `max ${leaderFleet("llmha_standby_capacity_unavailable")}`, instant: true }],
          mappings: [
            { value: 0, text: "available", color: "green" },
            { value: 1, text: "unavailable", color: "red" },
          ],
          alerts: ["LlmHaStandbyCapacityUnavailable"],
        },
        {
          type: "stat",
          title: "Standby wanted awake, still at zero, for",
          description: `Time since the standby AZ was wanted awake under L2 or worse with no healthy GPU; the alert fires after ${t.standbyWakeFor}`,
          w: 5,
          h: 5,
          unit: "s",
          redAbove: 900,
          queries: [{ expr: `time() - max(${mc(STANDBY_WANTED_SINCE)})`, instant: true }],
          alerts: ["LlmHaStandbyNotWaking"],
        },
        {
          type: "stat",
          title: "Last practice wake time",
          description: "Decision to first standby node serving in the last practice wake that served",
          w: 5,
          h: 5,
          unit: "s",
          redAbove: 900,
          queries: [{ expr: `max(${mc("llmha_practice_last_wake_seconds")})`, instant: true }],
          alerts: ["LlmHaPracticeWakeSlow"],
        },
        {
          type: "table",
          title: "Last practice wake by outcome",
          description: "When each outcome (served, failed, skipped, interrupted) was last recorded; a failed one newer than the last served pages",
          w: 5,
          h: 5,
          unit: "dateTimeAsIso",
          queries: [{ expr: `max by (outcome) (${mc("llmha_practice_last_timestamp_seconds")}) * 1000`, table: true, instant: true }],
          alerts: ["LlmHaPracticeWakeFailed"],
        },
        {
          type: "timeseries",
          title: "Practice wakes",
          description: "Practice wakes recorded, by outcome",
          w: 5,
          h: 5,
          queries: [{ expr: `sum by (outcome) (increase(${mc("llmha_practice_wakes_total")}[1h]))`, legend: "{{outcome}}" }],
        },
      ],
    },
    {
      title: "L4 fallback (llm-ha fallback)",
      panels: [
        {
          type: "timeseries",
          title: "Fallback answers by outcome",
          description: "What the L4 service answered: a verified cached answer, another provider, queued, refused",
          w: 8,
          unit: "reqps",
          queries: [{ expr: rate("llmha_fallback_requests_total", "outcome"), legend: "{{outcome}}" }],
        },
        {
          type: "timeseries",
          title: "Provider attempts and open circuits",
          description: "Calls to the other providers by result, and each provider's circuit (1 open)",
          w: 8,
          queries: [
            { expr: rate("llmha_fallback_upstream_attempts_total", "provider, result"), legend: "{{provider}} {{result}}" },
            { expr: `max by (provider) (${mc("llmha_fallback_circuit_open")})`, legend: "{{provider}} circuit open" },
            { expr: `sum by (provider) (increase(${mc("llmha_fallback_provider_misconfigured_total")}[15m]))`, legend: "{{provider}} misconfigured" },
          ],
          alerts: ["LlmHaFallbackProviderMisconfigured"],
        },
        {
          type: "timeseries",
          title: "Queue depth vs cap",
          description: "Requests held in the Kafka queue for replay, against the cap at which new ones are refused (alert at 80 %)",
          w: 8,
          queries: [
            { expr: `max(${mc("llmha_fallback_queue_depth")})`, legend: "depth" },
            { expr: `max(${mc("llmha_fallback_queue_depth_cap")})`, legend: "cap" },
          ],
          alerts: ["LlmHaFallbackQueueNearCap"],
        },
        {
          type: "timeseries",
          title: "Replay lag and progress",
          description: "Messages the replay group has not committed (-1: unreadable), and replays by result; lag with no replay below L4 pages",
          w: 12,
          queries: [
            { expr: `max(${mc("llmha_fallback_consumer_lag")})`, legend: "lag" },
            { expr: rate("llmha_fallback_replayed_total", "result"), legend: "replayed {{result}}" },
          ],
          alerts: ["LlmHaFallbackQueueLag"],
        },
        {
          type: "stat",
          title: "Fallback's view of the tier",
          description: "The L4 service's reading of the controller's tier: L4 active (it answers instead of the fleet), below, or unknown",
          w: 12,
          queries: [{ expr: `max(${mc("llmha_fallback_tier_l4")})`, instant: true }],
          mappings: [
            { value: -1, text: "unknown", color: "yellow" },
            { value: 0, text: "below L4", color: "green" },
            { value: 1, text: "L4 active", color: "red" },
          ],
        },
      ],
    },
    {
      title: "Stream continuation (llm-ha continue)",
      panels: [
        {
          type: "timeseries",
          title: "Answers carried on, by outcome",
          description: "Requests whose server failed under them: continued, restarted or retried on another server (the client saw one answer), or ended with an error (failed_twice = the query-of-death guard, mismatch, tool_calls, not_continuable, failed)",
          w: 8,
          unit: "reqps",
          queries: [{ expr: rate("llmha_continue_outcomes_total", "outcome"), legend: "{{outcome}}" }],
          alerts: ["LlmHaQueryOfDeath", "LlmHaContinuationMismatch"],
        },
        {
          type: "timeseries",
          title: "Time a continuation added",
          description: "From the failure seen to the second server's first chunk sent on, p50 and p99, by how",
          w: 8,
          unit: "s",
          queries: [
            { expr: `histogram_quantile(0.5, sum by (how, le) (rate(${mc("llmha_continue_added_seconds_bucket")}[$__rate_interval])))`, legend: "p50 {{how}}" },
            { expr: `histogram_quantile(0.99, sum by (how, le) (rate(${mc("llmha_continue_added_seconds_bucket")}[$__rate_interval])))`, legend: "p99 {{how}}" },
          ],
        },
        {
          type: "timeseries",
          title: "Open streams and text held",
          description: "Streams the relays carry now, and the delivered text they hold for them (what their memory per stream is bounded by)",
          w: 8,
          queries: [
            { expr: `sum(${mc("llmha_continue_open_streams")})`, legend: "open streams" },
            { expr: `sum(${mc("llmha_continue_delivered_bytes")})`, legend: "delivered bytes held" },
          ],
        },
      ],
    },
    {
      title: "Agents, models and cloud actions",
      panels: [
        {
          type: "timeseries",
          title: "Scrape targets up",
          description: "Agents and L1 proxies Prometheus reaches (1 up); none at all pages as missing",
          w: 6,
          queries: [
            { expr: `sum(up{job="llm-ha-agent", cluster=~"$cluster"})`, legend: "agents" },
            { expr: `sum(up{job="l1-proxy", cluster=~"$cluster"})`, legend: "L1 proxies" },
          ],
          alerts: ["LlmHaAgentDown", "LlmHaAgentsMissing", "LlmHaL1ProxyDown", "LlmHaL1ProxiesMissing"],
        },
        {
          type: "timeseries",
          title: "Evaluation age",
          description: "Seconds since each agent's last evaluation; above 30 s the agent is stalled",
          w: 6,
          unit: "s",
          redAbove: 30,
          queries: [{ expr: `max by (node) (${m("llmha_evaluation_age_seconds")})`, legend: "{{node}}" }],
          alerts: ["LlmHaAgentStalled"],
        },
        {
          type: "stat",
          title: "Nodes off the majority model",
          description: "Serving nodes whose model differs from the fleet's majority (leader view)",
          w: 4,
          redAbove: 0.5,
          decimals: 0,
          queries: [{ expr: `max ${leaderFleet("llmha_model_outlier_nodes")}`, instant: true }],
          alerts: ["LlmHaModelMismatch"],
        },
        {
          type: "timeseries",
          title: "Canaries capped",
          description: "Nodes whose canary phase is capped: the fleet disagrees on the known answers",
          w: 4,
          queries: [{ expr: 'count(llmha_canary_phase{cluster=~"$cluster", phase="capped"} == 1) or vector(0)', legend: "capped" }],
          alerts: ["LlmHaCanaryFleetDisagrees"],
        },
        {
          type: "timeseries",
          title: "Cloud actions not ours",
          description: "Standby or zonal-shift actions on the fleet's resources that the leader did not take",
          w: 4,
          queries: [{ expr: `max by (kind) (${mc("llmha_foreign_actions_active")})`, legend: "{{kind}}" }],
          alerts: ["LlmHaForeignCloudAction"],
        },
      ],
    },
  ];
}
