/**
 * The vocabulary every part of llm-ha shares: node statuses, reasons, and the
 * decision the evaluator hands to the reporters. Contracts in docs/design.md.
 */

/** Node statuses, ordered from best to worst. `UNKNOWN` is never treated as healthy. */
export const NODE_STATUSES = ["HEALTHY", "DEGRADED", "UNHEALTHY", "UNREACHABLE", "UNKNOWN"] as const;
export type NodeStatus = (typeof NODE_STATUSES)[number];

/** Where a reason came from: one of the agent's sources, or the agent itself. */
export const REASON_SOURCES = ["gpu", "model", "probe", "engine", "agent"] as const;
export type ReasonSource = (typeof REASON_SOURCES)[number];

/**
 * What a reason does to the node once it is acted on, worst first:
 * `unreachable` / `unhealthy` take it out (HAProxy `down`), `loading` drains it,
 * `unknown` (the checks themselves fail) drains it, `degraded` lowers its weight.
 */
export const REASON_EFFECTS = ["unreachable", "unhealthy", "loading", "unknown", "degraded"] as const;
export type ReasonEffect = (typeof REASON_EFFECTS)[number];

/** A machine-readable reason: `code` is a stable UPPER_SNAKE identifier, `detail` is for humans. */
export interface Reason {
  readonly source: ReasonSource;
  readonly code: string;
  /** Hard faults act on the first result; soft faults need `fall` consecutive results. */
  readonly hard: boolean;
  readonly effect: ReasonEffect;
  readonly detail?: string;
}

/**
 * What the node tells the load balancer, besides its status:
 * `serving` (normal), `warmup` (ramping weight), `loading` (model loading: HAProxy `drain`),
 * `down` (no traffic), `draining` (agent shutting down).
 */
export type ServingPhase = "serving" | "warmup" | "loading" | "down" | "draining";

export interface Decision {
  readonly status: NodeStatus;
  readonly phase: ServingPhase;
  /** Share of the configured HAProxy weight, 0–100. */
  readonly weight: number;
  readonly reasons: readonly Reason[];
  /** Soft faults seen but not yet `fall` times in a row: what the controller's blast-radius cap watches. */
  readonly pending: readonly Reason[];
  /** Soft faults the controller marked suspect (a shared cause): seen, reported, not acted on. */
  readonly suppressed: readonly Reason[];
  /** Epoch ms when `status` last changed. */
  readonly since: number;
  /** Epoch ms of this decision. */
  readonly checkedAt: number;
  /** Lower is better: what the Redis `az:<az>:available` sorted set is scored by. */
  readonly loadScore: number;
}

/** True when a node in this decision should take new traffic (`/readyz` 200, in the available set). */
export function takesTraffic(d: Pick<Decision, "phase" | "weight">): boolean {
  return (d.phase === "serving" || d.phase === "warmup") && d.weight > 0;
}
