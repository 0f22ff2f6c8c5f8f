/**
 * What the leader sees of the fleet when it steps a rollout (the pure plan and gates take this,
 * the runner fills it from Redis each period): each live node's status, what it serves and its
 * `perf` sample, the AZ states, and the canary evidence for the new revision's model key.
 */
import type { Expectation } from "../../node/canary/learn";
import type { NodePerf } from "./types";

export interface RolloutNode {
  nodeId: string;
  az: string;
  alive: boolean;
  /** The node's status in its record (`HEALTHY`, `UNHEALTHY`, …, `EXPIRED`). */
  status: string;
  takesTraffic: boolean;
  /** Healthy GPUs it adds to its AZ's capacity while it takes traffic. */
  gpus: number;
  /** The revision its server reports now (the record's `modelRevision`, else the perf sample's); "" unknown. */
  revision: string;
  /** Hard reason codes in its record (`CANARY_MISMATCH`, …). */
  hard: readonly string[];
  /** Its last perf sample (record field `perf`), null when none or unreadable. */
  perf: NodePerf | null;
}

export interface RolloutAz {
  az: string;
  state: "OK" | "DEGRADED" | "DOWN";
  healthyCapacity: number;
  totalCapacity: number;
}

/** The canary evidence for the new revision's model key. */
export interface CanaryEvidence {
  /** Canaries are off on this leader: the gate passes and says so. */
  off?: boolean;
  /** The new revision's model key (`id@revision …`), null while no node serving it reports its model. */
  modelKey: string | null;
  /** The leader's expectation for that key (`canary:expect`), null when none yet. */
  expectation: Expectation | null;
  /** Nodes serving the new revision whose latest canary answers are for that key (a round ran on it). */
  answered: readonly string[];
}

export interface RolloutObservation {
  nodes: readonly RolloutNode[];
  azs: readonly RolloutAz[];
  /** An AZ's floor: this share of its total GPUs stays healthy (the controller's `degradedBelow`). */
  floorShare: number;
  standbyAz: string | null;
  /** What one actuator call changes; null: no rollout actuator is configured (a start is refused). */
  granularity: "node" | "az" | null;
  canary: CanaryEvidence;
  /** The fleet's revision now (the `rollout` hash's `current`, else what most serving nodes report); null when none serves. */
  current: { revision: string; image?: string } | null;
  /** Perf samples older than this are ignored (the gate waits). */
  perfMaxAgeMs: number;
  /** The fleet's tier as the leader evaluates it this period (absent: not known, no check). */
  tier?: { level: string; reason: string };
}

/** A tier at which no rollout starts: an AZ lost or failing over, every AZ is needed at its floor. */
export function tierForbidsStart(tier: RolloutObservation["tier"]): string | null {
  if (!tier || !["L2", "L3", "L4"].includes(tier.level)) return null;
  return `the tier is ${tier.level} (${tier.reason || "no reason given"}): a rollout takes nodes out in turn and needs every AZ at its floor; start it at L0 or L1`;
}

/** Median of the numbers, null when there are none. */
export function median(xs: readonly number[]): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The AZ's floor in GPUs: `ceil(floorShare × total)`. */
export function floorOf(az: RolloutAz | undefined, floorShare: number): number {
  return az ? Math.ceil(floorShare * az.totalCapacity - 1e-9) : 0;
}

/** A node's perf sample when it is recent enough to judge on, else null. */
export function freshPerf(n: RolloutNode, now: number, maxAgeMs: number): NodePerf | null {
  const p = n.perf;
  return p && now - p.at <= maxAgeMs ? p : null;
}

/** Whether the node serves `revision` (its record's, or its fresh perf sample's). */
export function serves(n: RolloutNode | null | undefined, revision: string): boolean {
  return !!n && n.alive && n.revision !== "" && n.revision === revision;
}

/** Parses a record's `perf` field; null when absent or not a perf sample. */
export function parsePerf(raw: string | null | undefined): NodePerf | null {
  if (!raw) return null;
  try {
    const p = JSON.parse(raw) as NodePerf;
    if (typeof p !== "object" || p === null || typeof p.at !== "number" || typeof p.probes !== "number" || typeof p.errors !== "number") return null;
    return p;
  } catch {
    return null;
  }
}
