/**
 * What the dashboard shows, row by row: each panel's queries over the agent's and
 * HAProxy's real series (a test scrapes both and checks every name). `dashboard.ts`
 * lays the rows out and adds the variables.
 */
import { fromLeader } from "./alerts";
import { sloSeries } from "./alerts/slo";
import { type AlertThresholds } from "./thresholds";
import { L1_BACKEND } from "../../contracts/names";

/** The data source variable every panel and query uses. */
export const DS = { type: "prometheus" as const, uid: "${datasource}" };

export interface PanelSpec {
  type: "stat" | "timeseries" | "state-timeline" | "table" | "bargauge";
  title: string;
  description: string;
  /** Width in Grafana's 24-column grid. */
  w: number;
  h?: number;
  queries: { expr: string; legend?: string; instant?: boolean; table?: boolean }[];
  unit?: string;
  min?: number;
  max?: number;
  /** Value → text (and colour) mappings, e.g. tier levels or AZ states. */
  mappings?: { value: number; text: string; color: string }[];
  /** Red above this value. */
  redAbove?: number;
  /** Red below this value. */
  redBelow?: number;
}

export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

/** `name{cluster=~"$cluster", az=~"$az", …}`: every panel follows the two variables. */
function m(name: string, extra = ""): string {
  return `${name}{cluster=~"$cluster", az=~"$az"${extra ? `, ${extra}` : ""}}`;
}

/** `name{cluster=~"$cluster"}`: fleet-wide series, whose `az` is only the reporting agent's. */
function mc(name: string): string {
  return `${name}{cluster=~"$cluster"}`;
}

/** A series as the current leader publishes it: per AZ (filtered by `$az`), or fleet-wide. */
const leader = (name: string, extra = "") => fromLeader(m(name, extra), mc("llmha_leader"));
const leaderFleet = (name: string) => fromLeader(mc(name), mc("llmha_leader"));

export function dashboardRows(t: AlertThresholds): RowSpec[] {
  const hq = (q: number, by: string, histogram: string, sel = m) => `histogram_quantile(${q}, sum by (${by}, le) (rate(${sel(`${histogram}_bucket`)}[$__rate_interval])))`;
  const l1 = (code?: string) => m("haproxy_backend_http_responses_total", `proxy="${L1_BACKEND}"${code ? `, code="${code}"` : ""}`);
  const azState = `max by (az) ${leader("llmha_az_state", 'state="DEGRADED"')} + 2 * max by (az) ${leader("llmha_az_state", 'state="DOWN"')}`;
  const l1b = (name: string) => m(name, `proxy="${L1_BACKEND}"`);
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
        description: `Inference requests answered through the L1 proxies (${L1_BACKEND}), per AZ`,
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
          queries: [{ expr: `max by (node) (${mc("llmha_leader")}) == 1`, legend: "{{node}}", instant: true }],
          mappings: [{ value: 1, text: "leader", color: "green" }],
        },
        {
          type: "stat",
          title: "Fencing token",
          description: "Token of the current leader term; it only grows. A jump means a new term.",
          w: 3,
          h: 5,
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
          queries: [{ expr: `avg(${m("llmha_redis_connected")})`, instant: true }],
        },
        {
          type: "stat",
          title: "Suspect checks (blast-radius cap)",
          description: "Soft checks more than half the nodes fail at once: the controller keeps the nodes in and alerts",
          w: 4,
          h: 5,
          redAbove: 1,
          queries: [{ expr: `max ${leaderFleet("llmha_blast_radius_suspect_checks")}`, instant: true }],
        },
        {
          type: "stat",
          title: "Standby AZ",
          description: "Whether the leader wants the standby AZ awake, and its healthy GPUs",
          w: 4,
          h: 5,
          queries: [
            { expr: `max ${leaderFleet("llmha_standby_wake")}`, legend: "wake wanted", instant: true },
            { expr: `max ${leaderFleet("llmha_standby_healthy_capacity")}`, legend: "healthy GPUs", instant: true },
          ],
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
          queries: [
            { expr: `sum by (node) (increase(${mc("llmha_lease_acquisitions_total")}[$__rate_interval]))`, legend: "acquired {{node}}" },
            { expr: `sum by (reason) (increase(${mc("llmha_lease_losses_total")}[$__rate_interval]))`, legend: "lost: {{reason}}" },
          ],
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
      ],
    },
    {
      title: "Probe and engine",
      panels: [
        {
          type: "timeseries",
          title: "Probe latency P95",
          description: `P95 of the tiny completion each agent sends; the alert fires above ${t.probeLatencyP95Seconds} s for 5 minutes`,
          w: 12,
          unit: "s",
          redAbove: t.probeLatencyP95Seconds,
          queries: [{ expr: hq(0.95, "az, node", "llmha_probe_latency_seconds"), legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Probe latency P50",
          description: "Median probe latency per node",
          w: 12,
          unit: "s",
          queries: [{ expr: hq(0.5, "az, node", "llmha_probe_latency_seconds"), legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Source errors",
          description: "Results of each source (gpu, model, probe, engine, xid) that were errors or timeouts",
          w: 8,
          queries: [{ expr: `sum by (source) (rate(${m("llmha_source_errors_total")}[$__rate_interval]))`, legend: "{{source}}" }],
        },
        {
          type: "timeseries",
          title: "Engine queue",
          description: "Requests the inference engine runs and keeps waiting, per node",
          w: 8,
          queries: [
            { expr: `max by (node) (${m("llmha_engine_requests_running")})`, legend: "{{node}} running" },
            { expr: `max by (node) (${m("llmha_engine_requests_waiting")})`, legend: "{{node}} waiting" },
          ],
        },
        {
          type: "timeseries",
          title: "KV cache usage",
          description: "Share of the engine's KV cache in use",
          w: 8,
          unit: "percentunit",
          min: 0,
          max: 1,
          queries: [{ expr: `max by (node) (${m("llmha_engine_kv_cache_usage_ratio")})`, legend: "{{node}}" }],
        },
      ],
    },
    {
      title: "GPUs",
      panels: [
        {
          type: "timeseries",
          title: "GPU temperature",
          description: "Per node and GPU index",
          w: 8,
          unit: "celsius",
          redAbove: 85,
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_temperature_celsius")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "GPU power",
          description: "Power draw per node and GPU index",
          w: 8,
          unit: "watt",
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_power_watts")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "Uncorrected ECC errors",
          description: "Volatile uncorrected ECC errors; any is a hard fault that takes the node out",
          w: 8,
          redAbove: 1,
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_ecc_uncorrected_volatile")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "GPUs visible vs expected",
          description: "Fewer visible than expected is a fault (EKS treats it as XID 79)",
          w: 12,
          queries: [
            { expr: `sum by (node) (${m("llmha_gpus_visible")})`, legend: "{{node}} visible" },
            { expr: `sum by (node) (${m("llmha_gpus_expected")})`, legend: "{{node}} expected" },
          ],
        },
        {
          type: "timeseries",
          title: "GPU utilization",
          description: "Average over the node's GPUs",
          w: 12,
          unit: "percent",
          min: 0,
          max: 100,
          queries: [{ expr: `avg by (node) (${m("llmha_gpu_utilization_percent")})`, legend: "{{node}}" }],
        },
      ],
    },
    {
      title: "L1 proxy (HAProxy)",
      panels: [
        {
          type: "timeseries",
          title: "Error ratio",
          description: `Share of L1 responses that are 5xx, per AZ; at the availability objective ${t.availabilityObjective} the budget allows ${+availBudget.toPrecision(6)}`,
          w: 8,
          unit: "percentunit",
          redAbove: +availBudget.toPrecision(6),
          queries: [{ expr: `sum by (az) (rate(${l1("5xx")}[$__rate_interval])) / sum by (az) (rate(${l1()}[$__rate_interval]))`, legend: "{{az}}" }],
        },
        {
          type: "table",
          title: "Servers by state",
          description: "Each L1 proxy's servers and their state now (slots of the server-template not resolved are left out of the scrape: no-maint)",
          w: 8,
          queries: [{ expr: `max by (az, server, state) (${m("haproxy_server_status", `proxy="${L1_BACKEND}"`)}) == 1`, table: true, instant: true }],
        },
        {
          type: "timeseries",
          title: "Servers up",
          description: "Own-AZ (active) and cross-zone (backup) servers HAProxy sees UP",
          w: 8,
          queries: [
            { expr: `sum by (az) (${m("haproxy_backend_active_servers", `proxy="${L1_BACKEND}"`)})`, legend: "{{az}} active" },
            { expr: `sum by (az) (${m("haproxy_backend_backup_servers", `proxy="${L1_BACKEND}"`)})`, legend: "{{az}} backup" },
          ],
        },
      ],
    },
  ];
}
