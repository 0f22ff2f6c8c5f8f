/**
 * What the dashboard shows, row by row: each panel's queries over the agent's and
 * HAProxy's real series (a test scrapes both and checks every name). `dashboard.ts`
 * lays the rows out and adds the variables. The user-facing and fleet rows are here; the
 * per-node rows (probe, engine, GPUs, L1 proxy) in `panels-node.ts`; the rows that give
 * each remaining alert its panel (standby and practice wakes, the L4 fallback, agents and
 * models) in `panels-alerts.ts`.
 */
import { sloSeries } from "./alerts/slo";
import { type AlertThresholds } from "./thresholds";
import { L1_BACKEND, L1_BACKENDS_MATCHER, L1_RELAYED_BACKEND } from "../../contracts/names";
import { hq, l1, leader, leaderFleet, m, mc, type RowSpec } from "./panel-spec";
import { nodeRows } from "./panels-node";
import { alertRows } from "./panels-alerts";
import { rolloutRow } from "./panels-rollout";

export { DS, type PanelSpec, type RowSpec } from "./panel-spec";

export function dashboardRows(t: AlertThresholds): RowSpec[] {
  const azState = `max by (az) ${leader("llmha_az_state", 'state="DEGRADED"')} + 2 * max by (az) ${leader("llmha_az_state", 'state="DOWN"')}`;
  const l1b = (name: string) => m(name, L1_BACKENDS_MATCHER);
  const rec = (name: string) => `${name}{cluster=~"$cluster"}`;
  const recAz = (name: string) => m(name);
  const availBudget = 1 - t.availabilityObjective;
  // Over 30 days, from the recorded 1 h rates (sums of rates weigh each hour by its traffic).
  const avail30d =
    `1 - sum(sum_over_time(${recAz(sloSeries("cluster_az", "l1", "errors", "1h"))}[30d]))` +
    ` / sum(sum_over_time(${recAz(sloSeries("cluster_az", "l1", "requests", "1h"))}[30d]))`;
  const userImpact: RowSpec = {
    title: "User impact",
    panels: [
      {
        type: "timeseries",
        title: "Requests",
        description: `Inference requests answered through the L1 proxies (${L1_BACKEND} and, through the continuation relay, ${L1_RELAYED_BACKEND}), per AZ`,
        w: 6,
        unit: "reqps",
        queries: [{ expr: `sum by (az) (rate(${l1()}[$__rate_interval]))`, legend: "{{az}}" }],
      },
      {
        type: "timeseries",
        title: "Availability vs SLO",
        description: `Share of requests that succeed (not 5xx, not cut after their status), per AZ; the objective is ${t.availabilityObjective}`,
        w: 6,
        unit: "percentunit",
        redBelow: t.availabilityObjective,
        alerts: ["LlmHaAvailabilityBudgetBurnFast", "LlmHaAvailabilityBudgetBurnSlow"],
        queries: [{ expr: `1 - ${recAz(sloSeries("cluster_az", "l1", "error_ratio", "5m"))}`, legend: "{{az}}" }],
      },
      {
        type: "stat",
        title: "Error budget left (30 d)",
        description: `Share of the 30-day availability budget (${Math.round(availBudget * 100000) / 1000} % of requests) not spent yet; below 0 the SLO is missed`,
        w: 4,
        unit: "percentunit",
        redBelow: 0.25,
        queries: [{ expr: `1 - (1 - (${avail30d})) / ${+availBudget.toPrecision(6)}`, instant: true }],
      },
      {
        type: "timeseries",
        title: "Budget burn rate (1 h)",
        description: "How fast the availability and latency budgets burn (1 = spent exactly in 30 days); the page fires at 14.4 (1 h and 5 m) or 6 (6 h and 30 m)",
        w: 8,
        redAbove: 6,
        alerts: ["LlmHaAvailabilityBudgetBurnFast", "LlmHaAvailabilityBudgetBurnSlow"],
        queries: [
          { expr: `${rec(sloSeries("cluster", "l1", "error_ratio", "1h"))} / ${+availBudget.toPrecision(6)}`, legend: "availability {{cluster}}" },
          { expr: `${rec(sloSeries("cluster", "ttft", "error_ratio", "1h"))} / ${+(1 - t.latencyObjective).toPrecision(6)}`, legend: "latency {{cluster}}" },
        ],
      },
      {
        type: "timeseries",
        title: "Time to first token P95",
        description: `vLLM's time to first token at P95 per AZ (where the servers export none, the probe's latency); the latency SLO counts requests over ${t.latencySeconds} s`,
        w: 8,
        unit: "s",
        redAbove: t.latencySeconds,
        queries: [
          { expr: hq(0.95, "az", "vllm:time_to_first_token_seconds"), legend: "{{az}} TTFT" },
          { expr: hq(0.95, "az", "llmha_probe_latency_seconds"), legend: "{{az}} probe" },
        ],
      },
      {
        type: "timeseries",
        title: "End-to-end latency P95",
        description: "vLLM's whole-request latency at P95 per AZ (long generations take long by design: read it beside the token counts)",
        w: 8,
        unit: "s",
        queries: [{ expr: hq(0.95, "az", "vllm:e2e_request_latency_seconds"), legend: "{{az}}" }],
      },
      {
        type: "timeseries",
        title: "Retries, redispatches, cut streams",
        description: "What the proxy hides or cannot: requests retried on another server (retry-on … 503 hides a failing server), redispatched, and responses cut after their status line",
        w: 8,
        unit: "reqps",
        queries: [
          { expr: `sum by (az) (rate(${l1b("haproxy_backend_retry_warnings_total")}[$__rate_interval]))`, legend: "{{az}} retries" },
          { expr: `sum by (az) (rate(${l1b("haproxy_backend_redispatch_warnings_total")}[$__rate_interval]))`, legend: "{{az}} redispatches" },
          { expr: `sum by (az) (rate(${l1b("haproxy_backend_response_errors_total")}[$__rate_interval]))`, legend: "{{az}} cut" },
        ],
      },
      {
        type: "timeseries",
        title: "Queued in the proxy",
        description: "Requests waiting in HAProxy for a server slot (maxconn per server; they get a 503 after timeout queue)",
        w: 6,
        queries: [{ expr: `sum by (az) (${l1b("haproxy_backend_current_queue")})`, legend: "{{az}}" }],
      },
      {
        type: "timeseries",
        title: "Latency SLO: fast first tokens",
        description: `Share of requests whose first token came within ${t.latencySeconds} s, per AZ; the objective is ${t.latencyObjective}`,
        w: 6,
        unit: "percentunit",
        redBelow: t.latencyObjective,
        alerts: ["LlmHaLatencyBudgetBurnFast", "LlmHaLatencyBudgetBurnSlow"],
        queries: [{ expr: `1 - ${recAz(sloSeries("cluster_az", "ttft", "error_ratio", "5m"))}`, legend: "{{az}}" }],
      },
      {
        type: "timeseries",
        title: "Failed requests",
        description: `5xx responses the L1 proxy returned (${L1_BACKEND}, HAProxy's own 503s included)`,
        w: 12,
        unit: "reqps",
        queries: [{ expr: `sum by (az) (rate(${l1("5xx")}[$__rate_interval]))`, legend: "{{az}}" }],
      },
    ],
  };
  const alertsRow: RowSpec = {
    title: "Alerts",
    panels: [
      {
        type: "table",
        title: "Firing llm-ha alerts",
        description: "Every llm-ha alert firing now (docs/observability.md says what each means)",
        w: 24,
        queries: [{ expr: 'ALERTS{alertname=~"LlmHa.*", alertstate="firing", cluster=~"$cluster"}', table: true }],
      },
    ],
  };
  return [
    userImpact,
    {
      title: "Fleet at a glance",
      panels: [
        {
          type: "stat",
          title: "Failure tier",
          description: "L0 all well · L1 some node out · L2 an AZ degraded, traffic crosses zones · L3 an AZ out of DNS · L4 every AZ down (published by the leader)",
          w: 4,
          h: 5,
          alerts: ["LlmHaTierElevated", "LlmHaZoneFailedOver", "LlmHaGlobalOutage"],
          queries: [{ expr: `max ${leaderFleet("llmha_tier_level")}`, instant: true }],
          mappings: [
            { value: 0, text: "L0", color: "green" },
            { value: 1, text: "L1", color: "yellow" },
            { value: 2, text: "L2", color: "orange" },
            { value: 3, text: "L3", color: "red" },
            { value: 4, text: "L4", color: "dark-red" },
          ],
        },
        {
          type: "stat",
          title: "Leader",
          description: "The node whose agent holds the leader lease",
          w: 5,
          h: 5,
          alerts: ["LlmHaNoLeader"],
          queries: [{ expr: `max by (node) (${mc("llmha_leader")}) == 1`, legend: "{{node}}", instant: true }],
          mappings: [{ value: 1, text: "leader", color: "green" }],
        },
        {
          type: "stat",
          title: "Fencing token",
          description: "Token of the current leader term; it only grows. A jump means a new term.",
          w: 3,
          h: 5,
          // A token, not a quantity: the whole number, never "1.80 T".
          unit: "none",
          decimals: 0,
          queries: [{ expr: `max(${mc("llmha_fencing_token")})`, instant: true }],
        },
        {
          type: "stat",
          title: "Agents reaching Redis",
          description: "Share of agents whose last registry heartbeat reached Redis",
          w: 4,
          h: 5,
          unit: "percentunit",
          min: 0,
          max: 1,
          redBelow: 1,
          alerts: ["LlmHaRedisUnreachable", "LlmHaRedisUnreachableFleet"],
          queries: [{ expr: `avg(${m("llmha_redis_connected")})`, instant: true }],
        },
        {
          type: "stat",
          title: "Suspect checks (blast-radius cap)",
          description: "Soft checks more than half the nodes fail at once: the controller keeps the nodes in and alerts",
          w: 4,
          h: 5,
          redAbove: 1,
          alerts: ["LlmHaBlastRadiusCapTripped"],
          queries: [
            { expr: `max ${leaderFleet("llmha_blast_radius_suspect_checks")}`, legend: "suspect checks", instant: true },
            { expr: `max by (check) ${leaderFleet("llmha_blast_radius_suspect")}`, legend: "{{check}}", instant: true },
          ],
        },
        {
          type: "stat",
          title: "Standby AZ",
          description: "Whether the leader wants the standby AZ awake (asleep: scaled to zero by design, not a fault)",
          w: 2,
          h: 5,
          queries: [{ expr: `max ${leaderFleet("llmha_standby_wake")}`, instant: true }],
          mappings: [
            { value: 0, text: "asleep", color: "text" },
            { value: 1, text: "awake", color: "blue" },
          ],
        },
        {
          type: "stat",
          title: "Standby healthy GPUs",
          description: "Healthy GPUs in the standby AZ (leader view)",
          w: 2,
          h: 5,
          decimals: 0,
          queries: [{ expr: `max ${leaderFleet("llmha_standby_healthy_capacity")}`, instant: true }],
        },
      ],
    },
    alertsRow,
    {
      title: "Nodes and AZs",
      panels: [
        {
          type: "bargauge",
          title: "Nodes by AZ and status",
          description: "Each agent reports its node's status: HEALTHY, DEGRADED (lower weight), UNHEALTHY, UNREACHABLE, UNKNOWN",
          w: 8,
          alerts: ["LlmHaNodeUnhealthy", "LlmHaNodeStatusUnknown"],
          queries: [{ expr: `sum by (az, status) (${m("llmha_node_status")}) > 0`, legend: "{{az}} {{status}}", instant: true }],
        },
        {
          type: "timeseries",
          title: "AZ healthy capacity",
          description: `Healthy / total GPUs per AZ (leader view). Below ${t.azCapacityRatio} the AZ is DEGRADED and traffic crosses zones.`,
          w: 8,
          unit: "percentunit",
          min: 0,
          max: 1,
          redBelow: t.azCapacityRatio,
          alerts: ["LlmHaAzCapacityLow"],
          queries: [{ expr: `max by (az) ${leader("llmha_az_healthy_capacity")} / max by (az) ${leader("llmha_az_total_capacity")}`, legend: "{{az}}" }],
        },
        {
          type: "state-timeline",
          title: "AZ state",
          description: "OK / DEGRADED (L2, cross-zone) / DOWN (L3, out of DNS), as the leader publishes it",
          w: 8,
          queries: [{ expr: azState, legend: "{{az}}" }],
          mappings: [
            { value: 0, text: "OK", color: "green" },
            { value: 1, text: "DEGRADED", color: "orange" },
            { value: 2, text: "DOWN", color: "red" },
          ],
        },
        {
          type: "table",
          title: "Reasons acted on",
          description: "Why each node out of service (or at lower weight) is there, by machine-readable reason code",
          w: 12,
          alerts: ["LlmHaGpuHardwareFault", "LlmHaGpuResetPending", "LlmHaModelLoadStuck", "LlmHaCanaryMismatch", "LlmHaNodeUnhealthy"],
          queries: [{ expr: `max by (az, node, code) (${m("llmha_node_reason_active")}) == 1`, table: true }],
        },
        {
          type: "timeseries",
          title: "Healthy GPUs per AZ",
          description: "Healthy and total GPU capacity per AZ (leader view)",
          w: 12,
          queries: [
            { expr: `max by (az) ${leader("llmha_az_healthy_capacity")}`, legend: "{{az}} healthy" },
            { expr: `max by (az) ${leader("llmha_az_total_capacity")}`, legend: "{{az}} total" },
          ],
        },
      ],
    },
    {
      title: "Detection and failover",
      panels: [
        {
          type: "timeseries",
          title: "Detection time, last fault",
          description: "From the first failing result to the node leaving service (L1 target: GPU faults ≤ 2 s, wedged engine ≤ 4 s)",
          w: 8,
          unit: "s",
          queries: [{ expr: `max by (node) (${m("llmha_detection_seconds")})`, legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Status changes",
          description: "Node status transitions by new status",
          w: 8,
          queries: [{ expr: `sum by (az, to) (increase(${m("llmha_node_transitions_total")}[$__rate_interval]))`, legend: "{{az}} → {{to}}" }],
        },
        {
          type: "timeseries",
          title: "Leader terms",
          description: "Lease acquisitions by node and terms ended by reason (self-fence, not-ours, fenced-out, released)",
          w: 8,
          alerts: ["LlmHaLeaderChurn"],
          queries: [
            { expr: `sum by (node) (increase(${mc("llmha_lease_acquisitions_total")}[$__rate_interval]))`, legend: "acquired {{node}}" },
            { expr: `sum by (reason) (increase(${mc("llmha_lease_losses_total")}[$__rate_interval]))`, legend: "lost: {{reason}}" },
          ],
        },
        {
          type: "timeseries",
          title: "Distrusted Redis values",
          description: "Values the leader read from Redis and left out: fence tokens healed (fence), implausible node records (node), records or entries its inventory contradicts (forged: a node credential used against other nodes)",
          w: 6,
          alerts: ["LlmHaNodeCredentialMisused"],
          queries: [{ expr: `sum by (what) (increase(${mc("llmha_redis_distrusted_total")}[$__rate_interval])) > 0`, legend: "{{what}}" }],
        },
        {
          type: "timeseries",
          title: "Controller actions",
          description: "Standby wake/release and zonal shift start/cancel calls by outcome (refused-stale: a former leader's call the fencing gate stopped); empty with LLMHA_ACTUATOR=none",
          w: 6,
          queries: [{ expr: `sum by (action, outcome) (increase(${mc("llmha_actuator_actions_total")}[$__rate_interval])) > 0`, legend: "{{action}} {{outcome}}" }],
        },
        {
          type: "timeseries",
          title: "Controller action time P95",
          description: "Wall time of each kind of controller action, provider retries included",
          w: 6,
          unit: "s",
          queries: [{ expr: hq(0.95, "action", "llmha_actuator_action_seconds", mc), legend: "{{action}}" }],
        },
        {
          type: "timeseries",
          title: "Zonal shift held",
          description: "1 while the leader holds an ARC zonal shift away from the AZ",
          w: 6,
          min: 0,
          max: 1,
          queries: [{ expr: `max by (az) ${leader("llmha_zonal_shift_active")}`, legend: "{{az}}" }],
        },
        {
          type: "timeseries",
          title: "Controller aggregation time",
          description: "P95 time for the leader to read the registry and evaluate the AZs, each period",
          w: 6,
          unit: "s",
          queries: [{ expr: hq(0.95, "node", "llmha_controller_aggregation_seconds", mc), legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Repairs",
          description: "The leader's repair ladder: broken GPU nodes by the repair it advises (restart, reset, reboot, replace, quarantine; drain: a serving node drained predictively), those held for capacity (one node per AZ, the fleet share, an AZ's floor, no replacement in sight), and predictive drains waiting for their budget or a low-load moment (the node serves on; no alert); llm-ha status names them",
          w: 6,
          min: 0,
          alerts: ["LlmHaRepairHeld"],
          queries: [
            { expr: `sum by (action) ${leader("llmha_repair_advised")}`, legend: "{{action}}" },
            { expr: `max ${leader("llmha_repair_held")}`, legend: "held" },
            { expr: `max ${leader("llmha_repair_predictive_held")}`, legend: "drain waiting" },
          ],
        },
      ],
    },
    ...nodeRows(t),
    ...alertRows(t),
    rolloutRow(),
  ];
}
