/**
 * The alert rules llm-ha ships, as typed data built from the agent's real series. One
 * function renders them; the infrastructure puts them in a `PrometheusRule` and a
 * ConfigMap, `npm run observability` writes them for `promtool`.
 *
 * Labels the rules expect on every `llmha_*` series: `node` and `az` (the agent sets them
 * on its own registry; scrape with `honor_labels`, as the PodMonitor does) and `cluster`
 * (added by the scrape; rules still work without it). HAProxy's series need `az` and
 * `cluster` from the scrape.
 *
 * Leader-only series (AZ state and capacity, tier, suspect checks, standby) are read only
 * from the agent that holds the lease now (`llmha_leader == 1`): a former leader keeps its
 * last values, and `max` over every pod would let a stale one win.
 */
import { DEFAULT_CONTROLLER_SETTINGS } from "../../agent/src/controller/state";
import type { REASON_CODES } from "../../agent/src/reporters/metrics";
import { L1_BACKEND } from "../workloads/l1-proxy";

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

export interface AlertThresholds {
  /** Healthy/total GPU capacity of an AZ below this alerts. Default: the controller's `degradedBelow` (0.75). */
  azCapacityRatio: number;
  /** P95 probe latency over this many seconds for 5 minutes alerts. Default 2. */
  probeLatencyP95Seconds: number;
  /** Share of L1 responses that are 5xx above which the AZ's proxy alerts. Default 0.05. */
  l1ErrorRatio: number;
  /** Leader lease acquisitions in a cluster within 10 minutes above this alert. Default 3. */
  leaderChurnPer10m: number;
  /** How long the standby AZ may stay at zero while wanted awake under L2 or worse. Default `15m`. */
  standbyWakeFor: string;
  /** `job` label of the agents' scrape. Default `llm-ha-agent` (the PodMonitor's). */
  agentJob: string;
  /**
   * The standby AZ (the stack's `llm-ha:standbyAz`), left out of the AZ capacity alert: the
   * schedule scales it to zero on purpose and a woken one is booting, not failing
   * (`LlmHaStandbyNotWaking` watches it). Default none.
   */
  standbyAz: string | null;
}

export const DEFAULT_ALERT_THRESHOLDS: Readonly<AlertThresholds> = Object.freeze({
  azCapacityRatio: DEFAULT_CONTROLLER_SETTINGS.degradedBelow,
  probeLatencyP95Seconds: 2,
  l1ErrorRatio: 0.05,
  leaderChurnPer10m: 3,
  standbyWakeFor: "15m",
  agentJob: "llm-ha-agent",
  standbyAz: null,
});

type ReasonCode = (typeof REASON_CODES)[number];

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

const DURATION = /^([0-9]+(ms|s|m|h|d|w|y))+$/;

export class AlertThresholdError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AlertThresholdError";
  }
}

/** What is wrong with each bad threshold, keyed by its field (empty when all are fine). */
export function thresholdProblems(t: AlertThresholds): [keyof AlertThresholds, string][] {
  const bad: [keyof AlertThresholds, string][] = [];
  if (!(t.azCapacityRatio > 0 && t.azCapacityRatio <= 1)) bad.push(["azCapacityRatio", "must be in (0, 1]"]);
  if (!(t.probeLatencyP95Seconds > 0)) bad.push(["probeLatencyP95Seconds", "must be > 0"]);
  if (!(t.l1ErrorRatio > 0 && t.l1ErrorRatio < 1)) bad.push(["l1ErrorRatio", "must be in (0, 1)"]);
  if (!(Number.isInteger(t.leaderChurnPer10m) && t.leaderChurnPer10m >= 1)) bad.push(["leaderChurnPer10m", "must be an integer ≥ 1"]);
  if (!DURATION.test(t.standbyWakeFor)) bad.push(["standbyWakeFor", "must be a Prometheus duration such as 15m"]);
  if (!/^[A-Za-z0-9_./-]+$/.test(t.agentJob)) bad.push(["agentJob", "must be a plain job name"]);
  if (t.standbyAz !== null && !/^[A-Za-z0-9_.-]+$/.test(t.standbyAz)) bad.push(["standbyAz", "must be an AZ name"]);
  return bad;
}

const pct = (x: number): string => `${Math.round(x * 1000) / 10} %`;

/** The rule groups, thresholds over the defaults. Throws `AlertThresholdError` on a bad threshold. */
export function alertRuleGroups(overrides: Partial<AlertThresholds> = {}): RuleGroup[] {
  const t: AlertThresholds = { ...DEFAULT_ALERT_THRESHOLDS, ...overrides };
  const bad = thresholdProblems(t);
  if (bad.length) throw new AlertThresholdError(bad.map(([k, why]) => `${k} ${JSON.stringify(t[k])} ${why}`).join("; "));
  const tier = `max by (cluster) ${fromLeader("llmha_tier_level")}`;
  const notStandby = t.standbyAz ? `{az!="${t.standbyAz}"}` : "";
  const l1 = (code?: string) =>
    `sum by (cluster, az) (rate(haproxy_backend_http_responses_total{proxy="${L1_BACKEND}"${code ? `, code="${code}"` : ""}}[5m]))`;
  return [
    {
      name: "llm-ha.node",
      rules: [
        {
          alert: "LlmHaNodeUnhealthy",
          // The agent already needs `fall` (3) failing checks for a soft fault; a minute out
          // of service is worth a look even though L1 moved the traffic at once.
          expr: 'max by (cluster, az, node, status) (llmha_node_status{status=~"UNHEALTHY|UNREACHABLE"}) == 1',
          for: "1m",
          labels: { severity: "warning" },
          annotations: {
            summary: "Node {{ $labels.node }} in {{ $labels.az }} is {{ $labels.status }}",
            description: "The agent has kept node {{ $labels.node }} out of service for over a minute; HAProxy sends its traffic elsewhere.",
            runbook: "GET :9400/status on the node for the reasons; GPU reasons: drain and replace the node; inference reasons: kubectl logs of the inference pod.",
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
    },
    {
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
    },
    {
      name: "llm-ha.fleet",
      rules: [
        {
          alert: "LlmHaAzCapacityLow",
          expr:
            `max by (cluster, az) ${fromLeader(`llmha_az_healthy_capacity${notStandby}`)}` +
            ` / max by (cluster, az) ${fromLeader(`(llmha_az_total_capacity${notStandby} > 0)`)} < ${t.azCapacityRatio}`,
          for: "2m",
          labels: { severity: "warning" },
          annotations: {
            summary: "AZ {{ $labels.az }} has {{ $value | humanizePercentage }} of its GPU capacity healthy",
            description: `Below ${pct(t.azCapacityRatio)} the controller marks the AZ DEGRADED and its traffic crosses zones (L2).`,
            runbook: "See which nodes are out (LlmHaNodeUnhealthy, the dashboard's reasons table); check the node group and capacity reservation for the AZ.",
          },
        },
        {
          alert: "LlmHaTierElevated",
          expr: `${tier} >= 2`,
          for: "1m",
          labels: { severity: "warning" },
          annotations: {
            summary: "llm-ha is at failure tier L{{ $value }} in {{ $labels.cluster }}",
            description: "L2: an AZ is degraded and traffic crosses zones; L3: an AZ is out of DNS; L4: every AZ is down.",
            runbook: "Open the dashboard's AZ state panel; find the AZ and its failing nodes; confirm the standby AZ is waking.",
          },
        },
        {
          alert: "LlmHaZoneFailedOver",
          expr: `${tier} == 3`,
          for: "30s",
          labels: { severity: "critical" },
          annotations: {
            summary: "An AZ is out of DNS in {{ $labels.cluster }} (tier L3)",
            description: "Route53 health checks on /az/health fail for an AZ; its clients go to the other AZs.",
            runbook: "Find the DOWN AZ on the dashboard; check its NLB, HAProxy pods and GPU nodes; capacity left in the other AZs must carry the load.",
          },
        },
        {
          alert: "LlmHaGlobalOutage",
          expr: `${tier} == 4`,
          labels: { severity: "critical" },
          annotations: {
            summary: "Every AZ is down in {{ $labels.cluster }} (tier L4)",
            description: "No AZ has healthy GPU capacity; consumers serve from cache or queue to Kafka.",
            runbook: "Incident: check for a shared cause first (model image, driver roll-out, Redis, the probe itself); wake the standby AZ by hand.",
          },
        },
        {
          alert: "LlmHaNoLeader",
          // Lease TTL 20 s + contend 5 s: a minute without a leader is no hand-over.
          expr: "max by (cluster) (llmha_leader) == 0",
          for: "1m",
          labels: { severity: "critical" },
          annotations: {
            summary: "No llm-ha leader in {{ $labels.cluster }}",
            description: "No agent holds the lease: AZ states, tiers and the standby wake-up are not updated (/az/health fails open).",
            runbook: "Check Redis (LlmHaRedisUnreachable) and the agents' logs for lease errors.",
          },
        },
        {
          alert: "LlmHaLeaderChurn",
          expr: `sum by (cluster) (increase(llmha_lease_acquisitions_total[10m])) > ${t.leaderChurnPer10m}`,
          labels: { severity: "warning" },
          annotations: {
            summary: `The llm-ha leader changed more than ${t.leaderChurnPer10m} times in 10 minutes in {{ $labels.cluster }}`,
            description: "Leaders keep losing the lease: pauses past the TTL (CPU starvation, GC), Redis failovers or a network partition.",
            runbook: "Compare llmha_lease_losses_total by reason; self-fence means the holder stalls (check node CPU), fenced-out means Redis lost the key.",
          },
        },
        {
          alert: "LlmHaBlastRadiusCapTripped",
          expr: `max by (cluster, check) ${fromLeader("llmha_blast_radius_suspect")} == 1`,
          for: "1m",
          labels: { severity: "critical" },
          annotations: {
            summary: "More than half the nodes fail {{ $labels.check }} at once",
            description: "The controller suspects the check or a shared dependency rather than the nodes, and keeps them in service.",
            runbook: "Test the check by hand against two nodes; look for a shared cause (model endpoint, DNS, network); take nodes out by hand only if they really fail.",
          },
        },
        {
          alert: "LlmHaStandbyNotWaking",
          expr:
            `max by (cluster) ${fromLeader("llmha_standby_wake")} == 1` +
            ` and on (cluster) ${tier} >= 2` +
            ` and on (cluster) max by (cluster) ${fromLeader("llmha_standby_healthy_capacity")} == 0`,
          for: t.standbyWakeFor,
          labels: { severity: "critical" },
          annotations: {
            summary: "The standby AZ is still at zero healthy GPUs under L2 in {{ $labels.cluster }}",
            description: `The controller wants the standby AZ awake and the fleet is at L2 or worse, but no standby GPU has been healthy for ${t.standbyWakeFor}.`,
            runbook: "Check the standby node group's ASG activity (capacity, quota, reservation) and llmha_actuator_actions_total; scale it up by hand.",
          },
        },
      ],
    },
    {
      name: "llm-ha.agent",
      rules: [
        {
          alert: "LlmHaAgentDown",
          expr: `up{job="${t.agentJob}"} == 0`,
          for: "2m",
          labels: { severity: "warning" },
          annotations: {
            summary: "The llm-ha agent on {{ $labels.node }} is not answering scrapes",
            description: "Without its agent a node keeps only HAProxy's plain check: GPU faults and a wedged engine go unseen there.",
            runbook: "kubectl -n llm-ha get pods -o wide on the node; describe and read the logs of the agent pod.",
          },
        },
        {
          alert: "LlmHaAgentStalled",
          expr: "max by (cluster, az, node) (llmha_evaluation_age_seconds) > 30",
          for: "2m",
          labels: { severity: "warning" },
          annotations: {
            summary: "The llm-ha agent on {{ $labels.node }} answers scrapes but has not evaluated its node for over 30 s",
            description: "Its status, agent-check reply and heartbeat are frozen at the last decision: a fault on the node now goes unseen.",
            runbook: "kubectl logs the agent pod (event loop blocked? nvidia-smi hung in D state?); restart the pod if it does not recover.",
          },
        },
        {
          alert: "LlmHaAgentsMissing",
          expr: `absent(up{job="${t.agentJob}"})`,
          for: "10m",
          labels: { severity: "critical" },
          annotations: {
            summary: "Prometheus scrapes no llm-ha agent",
            description: "No agent target exists: every other llm-ha alert is blind.",
            runbook: "Check the PodMonitor (kubectl -n llm-ha get podmonitor), Prometheus' targets page and the agent DaemonSets.",
          },
        },
        {
          alert: "LlmHaRedisUnreachable",
          expr: "max by (cluster, az, node) (llmha_redis_connected) == 0",
          for: "1m",
          labels: { severity: "warning" },
          annotations: {
            summary: "The agent on {{ $labels.node }} cannot reach Redis",
            description: "Its node drops out of the registry when its heartbeat expires, and it cannot lead.",
            runbook: "From the node: DNS of the Redis endpoint, security group, TLS; kubectl logs the agent for the Redis error.",
          },
        },
        {
          alert: "LlmHaRedisUnreachableFleet",
          expr: "avg by (cluster) (llmha_redis_connected) < 0.5",
          for: "1m",
          labels: { severity: "critical" },
          annotations: {
            summary: "Most llm-ha agents cannot reach Redis in {{ $labels.cluster }}",
            description: "The registry and the leader lease live in Redis; L1 keeps working on each node, L2 and L3 stop.",
            runbook: "Check the ElastiCache replication group (events, failover, CPU, connections) and the auth token Secret.",
          },
        },
      ],
    },
    {
      name: "llm-ha.l1",
      rules: [
        {
          alert: "LlmHaL1ErrorRateHigh",
          expr: `${l1("5xx")} / ${l1()} > ${t.l1ErrorRatio}`,
          for: "5m",
          labels: { severity: "critical" },
          annotations: {
            summary: "{{ $value | humanizePercentage }} of requests fail at the L1 proxy in {{ $labels.az }}",
            description: `Over ${pct(t.l1ErrorRatio)} of the responses HAProxy returned for ${L1_BACKEND} were 5xx for 5 minutes: clients see errors.`,
            runbook: "HAProxy stats (:8404/stats) for servers DOWN; if all local servers are down check the backups and the AZ state; else the inference pods' logs.",
          },
        },
      ],
    },
  ];
}

/** Every alert name of the groups. */
export function alertNames(groups: RuleGroup[]): string[] {
  return groups.flatMap((g) => g.rules.map((r) => r.alert));
}
