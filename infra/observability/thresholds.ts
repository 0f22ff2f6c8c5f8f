/**
 * The alert thresholds a stack may set (`llm-ha:observability`), their defaults and their
 * checks. Apart from the rule builder so the stack's config validation can read them
 * without pulling in the rules.
 */
import { DEFAULT_CONTROLLER_SETTINGS } from "../../contracts/controller";

export interface AlertThresholds {
  /** Healthy/total GPU capacity of an AZ below this alerts. Default: the controller's `degradedBelow` (0.75). */
  azCapacityRatio: number;
  /** P95 probe latency over this many seconds for 5 minutes alerts. Default 2. */
  probeLatencyP95Seconds: number;
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
  /** Availability objective of inference requests through L1 (non-5xx share), e.g. 0.999. Default 0.999. */
  availabilityObjective: number;
  /** Share of requests whose time to first token is at most `latencySeconds`. Default 0.99. */
  latencyObjective: number;
  /**
   * Time-to-first-token bound of the latency SLO, in seconds: a bucket bound both vLLM's
   * `vllm:time_to_first_token_seconds` and the agent's probe histogram have (0.25, 0.5, 1, 5, 10). Default 1.
   */
  latencySeconds: number;
  /** Burn-rate alerts need at least this many requests in their long window (no page on 1 failure in 10 at night). Default 100. */
  sloMinRequests: number;
  /**
   * How long an L1 proxy whose scrape fails (`up == 0`) counts its last measured request rate
   * as failing in the availability SLI: its clients get connection errors that no series
   * counts until DNS moves them (Route53: health checks every 10–30 s × `failureThreshold`,
   * then the TTL). Default `5m`.
   */
  l1LostFor: string;
  /**
   * Every SLO window (5m … 3d, the traffic guard's long windows) and `l1LostFor` multiplied by
   * this; the recorded series keep their nominal names (`…:rate1h`). For the drill, whose
   * scenarios last seconds (1/60: a production minute is a drill second). Default 1.
   */
  sloTimeScale: number;
  /** How long a model may stay loading before `LlmHaModelLoadStuck`. Default `30m`. */
  modelLoadFor: string;
  /** `job` label of the L1 proxies' scrape. Default `l1-proxy` (the PodMonitor's). */
  l1Job: string;
  /** Page every `runbook_url` points into (an anchor per alert is added). Default the repository's docs/observability.md. */
  runbookBaseUrl: string;
  /**
   * `LlmHaFallbackQueueLag`: the L4 queue's consumer lag (messages) above this while the tier is
   * below L4 and nothing is replayed, for `fallbackLagFor`. Default 0 (any message left behind).
   */
  fallbackLagMessages: number;
  /** How long the replay may make no progress on a lag below L4 before `LlmHaFallbackQueueLag`. Default `10m`. */
  fallbackLagFor: string;
  /** `LlmHaFallbackQueueNearCap`: a fallback's queue depth at this share of its cap (`maxQueueDepth`). Default 0.8. */
  fallbackQueueCapRatio: number;
}

/** Bucket bounds both vLLM's TTFT histogram and the agent's probe histogram have. */
export const LATENCY_SLO_BOUNDS: readonly number[] = [0.25, 0.5, 1, 5, 10];

export const DEFAULT_ALERT_THRESHOLDS: Readonly<AlertThresholds> = Object.freeze({
  azCapacityRatio: DEFAULT_CONTROLLER_SETTINGS.degradedBelow,
  probeLatencyP95Seconds: 2,
  leaderChurnPer10m: 3,
  standbyWakeFor: "15m",
  agentJob: "llm-ha-agent",
  standbyAz: null,
  availabilityObjective: 0.999,
  latencyObjective: 0.99,
  latencySeconds: 1,
  sloMinRequests: 100,
  l1LostFor: "5m",
  sloTimeScale: 1,
  modelLoadFor: "30m",
  l1Job: "l1-proxy",
  runbookBaseUrl: "https://github.com/llm-ha/llm-ha/blob/main/docs/observability.md",
  fallbackLagMessages: 0,
  fallbackLagFor: "10m",
  fallbackQueueCapRatio: 0.8,
});

const DURATION = /^([0-9]+(ms|s|m|h|d|w|y))+$/;
const UNIT_S: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };

/** Seconds in a Prometheus duration (`1h30m` → 5400); NaN when it is not one. */
export function durationSeconds(d: string): number {
  if (!DURATION.test(d)) return NaN;
  let total = 0;
  for (const m of d.matchAll(/([0-9]+)(ms|s|m|h|d|w|y)/g)) total += Number(m[1]) * UNIT_S[m[2]];
  return total;
}

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
  if (!(Number.isInteger(t.leaderChurnPer10m) && t.leaderChurnPer10m >= 1)) bad.push(["leaderChurnPer10m", "must be an integer ≥ 1"]);
  if (!DURATION.test(t.standbyWakeFor)) bad.push(["standbyWakeFor", "must be a Prometheus duration such as 15m"]);
  if (!/^[A-Za-z0-9_./-]+$/.test(t.agentJob)) bad.push(["agentJob", "must be a plain job name"]);
  if (t.standbyAz !== null && !/^[A-Za-z0-9_.-]+$/.test(t.standbyAz)) bad.push(["standbyAz", "must be an AZ name"]);
  for (const k of ["availabilityObjective", "latencyObjective"] as const) {
    if (!(t[k] > 0.5 && t[k] < 1)) bad.push([k, "must be in (0.5, 1), e.g. 0.999"]);
  }
  if (!LATENCY_SLO_BOUNDS.includes(t.latencySeconds)) bad.push(["latencySeconds", `must be one of ${LATENCY_SLO_BOUNDS.join(", ")} (a bucket bound of vLLM's and the probe's histograms)`]);
  if (!(Number.isInteger(t.sloMinRequests) && t.sloMinRequests >= 0)) bad.push(["sloMinRequests", "must be an integer ≥ 0"]);
  if (!DURATION.test(t.l1LostFor)) bad.push(["l1LostFor", "must be a Prometheus duration such as 5m"]);
  if (!(t.sloTimeScale > 0 && t.sloTimeScale <= 1)) bad.push(["sloTimeScale", "must be in (0, 1]"]);
  if (!DURATION.test(t.modelLoadFor)) bad.push(["modelLoadFor", "must be a Prometheus duration such as 30m"]);
  if (!/^[A-Za-z0-9_./-]+$/.test(t.l1Job)) bad.push(["l1Job", "must be a plain job name"]);
  if (!/^https?:\/\/[^\s#"]+$/.test(t.runbookBaseUrl)) bad.push(["runbookBaseUrl", "must be an http(s) URL without a fragment"]);
  if (!(Number.isInteger(t.fallbackLagMessages) && t.fallbackLagMessages >= 0)) bad.push(["fallbackLagMessages", "must be an integer ≥ 0"]);
  if (!DURATION.test(t.fallbackLagFor)) bad.push(["fallbackLagFor", "must be a Prometheus duration such as 10m"]);
  if (!(t.fallbackQueueCapRatio > 0 && t.fallbackQueueCapRatio <= 1)) bad.push(["fallbackQueueCapRatio", "must be in (0, 1]"]);
  return bad;
}
