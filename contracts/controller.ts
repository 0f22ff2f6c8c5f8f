/**
 * The controller's vocabulary and default settings, shared by the agent (which decides with
 * them) and the infrastructure (whose alert thresholds follow them).
 */
export const AZ_STATES = ["OK", "DEGRADED", "DOWN"] as const;
export type AzState = (typeof AZ_STATES)[number];

export const TIER_LEVELS = ["L0", "L1", "L2", "L3", "L4"] as const;
export type TierLevel = (typeof TIER_LEVELS)[number];

export interface ControllerSettings {
  /** Evaluation and publication period. Default 1000 ms. */
  intervalMs: number;
  /** An AZ whose healthy/total GPU capacity falls below this is DEGRADED (traffic crosses zones, L2). Default 0.75. */
  degradedBelow: number;
  /** Below this it is DOWN (pulled from DNS, L3). Default 0.25; no healthy GPU at all is always DOWN. */
  downBelow: number;
  /** To improve, the ratio must clear the threshold by this much… Default 0.1. */
  hysteresis: number;
  /** …for this many consecutive evaluations. Worsening acts at once. Default 3. */
  recoverPeriods: number;
  /** Blast-radius cap: more than this share of live nodes failing one soft check makes it suspect. Default 0.5. */
  blastFraction: number;
  /** The cap needs at least this many live nodes. Default 3. */
  blastMinNodes: number;
  /** A node counts for a check if it reported it failing within this window. Default 30000 ms. */
  blastWindowMs: number;
  /** The AZ kept scaled to zero that the controller may wake; null = none. Default null. */
  standbyAz: string | null;
  /** Keep wanting the standby awake this long after the last trigger. Default 600000 ms. */
  standbyHoldMs: number;
  /**
   * The standby AZ's size relative to an active AZ's, in (0, 1] (partial redundancy): a woken
   * standby carries at most this share of a lost AZ, and the tier says so. Default 1.
   */
  standbyCapacityRatio: number;
  /**
   * An AZ never yet OK (a cluster coming up: nodes loading their model) does not wake the
   * standby until it has been known this long — a cold start is not a capacity loss, but an
   * AZ that never comes up is. Default 900000 ms (15 min: big models take minutes to load).
   */
  coldStartGraceMs: number;
  /** Decide zonal shifts away from a DOWN AZ (the actuator carries them out). Default false. */
  zonalShift: boolean;
  /** A shifted AZ must be OK this long before the shift is cancelled. Default 60000 ms. */
  shiftRecoverMs: number;
  /** Nodes silent this long leave their AZ's total capacity. Default 600000 ms. */
  forgetAfterMs: number;
  /** `/az/health` flags a state older than this as stale and fails open. Default 30000 ms. */
  staleAfterMs: number;
  /**
   * After Redis trouble this process saw (a failed read or write, a lost connection: writes
   * refused, a failover to a replica that missed the last heartbeats), node hashes that
   * expired meanwhile are silence Redis explains, not dead nodes: for this long after the
   * last trouble an AZ is not made worse by them while the nodes heartbeat again, and the
   * sweep waits. Default 10000 ms (heartbeat TTL 3 s + the agents' retry backoff up to 5 s + margin).
   */
  silenceGraceMs: number;
}

export const DEFAULT_CONTROLLER_SETTINGS: Readonly<ControllerSettings> = Object.freeze({
  intervalMs: 1000,
  degradedBelow: 0.75,
  downBelow: 0.25,
  hysteresis: 0.1,
  recoverPeriods: 3,
  blastFraction: 0.5,
  blastMinNodes: 3,
  blastWindowMs: 30_000,
  standbyAz: null,
  standbyHoldMs: 600_000,
  standbyCapacityRatio: 1,
  coldStartGraceMs: 900_000,
  zonalShift: false,
  shiftRecoverMs: 60_000,
  forgetAfterMs: 600_000,
  staleAfterMs: 30_000,
  silenceGraceMs: 10_000,
});

/** The body of `GET /az/health` (DESIGN contract): the leader's published state of one AZ. */
export interface AzHealthBody {
  az: string;
  state: AzState | "UNKNOWN";
  healthyCapacity: number | null;
  totalCapacity: number | null;
  /** Holder id of the leader that published the state. */
  leader: string | null;
  fencingToken: number | null;
  /** Epoch ms of the publication. */
  updatedAt?: number;
  /** Present (true) when the answer does not come from a fresh publication. */
  stale?: true;
  /** Why the answer is stale. */
  staleReason?: "redis-unreachable" | "not-published" | "too-old" | "rejoining";
}

export interface AzHealthResponse {
  code: 200 | 503;
  body: AzHealthBody;
}
