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
