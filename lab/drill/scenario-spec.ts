/**
 * What a row of the fault matrix is (lab/drill/scenarios.ts): a scenario's tier, its targets
 * and how the drill runs it.
 */
export type ScenarioTier = "L1" | "L2" | "L3" | "fleet";

/**
 * The overloaded proxy's 503s, as an idle client sees them, must come within this. HAProxy
 * answers a queued request 503 when the generator's `timeout queue` (1 s) expires, measured at
 * 1.00–1.01 s: "fast" is that plus 0.1 s, not a client's own time-out (tens of seconds).
 */
export const OVERLOAD_503_MS = 1100;

/** Targets a scenario must meet (ms, counts); absent = not a target of this scenario. */
export interface Targets {
  /** Every run's time to L1 removal. */
  l1Ms?: number;
  /** p50 of L1 removal over the runs. */
  l1P50Ms?: number;
  /** Traffic of the faulty AZ served by other AZs' nodes. */
  crossMs?: number;
  /** DNS answer without the lost AZ. */
  dnsMs?: number;
  /** `/az/health` 503 after the AZ state changed. */
  azHealthAfterStateMs?: number;
  /** A new leader holds the lease. */
  leaderMs?: number;
  /** Failed client requests through llm-ha over all runs. */
  failed?: number;
  /** Servers that left rotation (or DNS changes) nobody asked for. */
  falseFailovers?: number;
  /** Standby wake-up decided (`standby:wake` = 1 published) after the fault. */
  wakeDecisionMs?: number;
  /** Fenced writes by a deposed leader that Redis accepted. */
  staleWrites?: number;
  /** The hurt node(s) back HEALTHY at full weight after the heal. */
  recoveryMs?: number;
  /** Inference servers one request killed (a query of death). */
  crashedServers?: number;
  /** Failed requests beyond those in flight on the killed server at the kill. */
  failedBeyondInFlight?: number;
  /** Every answer of the overloaded proxy's `/healthz` and `/az/health` within (a failed poll counts as its time limit). */
  healthMs?: number;
  /** Every 503 of the overloaded proxy answered within (none seen is a miss: the excess must be refused). */
  fast503Ms?: number;
  /** 503s without `Retry-After`. */
  retryAfterMissing?: number;
  /** Failed requests other than the proxy's 503 (timeouts, resets, 502, 504). */
  otherFailures?: number;
  /** Requests of the busiest backup server over its fair share while every primary is out. */
  spreadRatio?: number;
  /** DNS answers of the busiest healthy AZ over its fair share (its weight over the healthy AZs') after an AZ is lost. */
  dnsShareRatio?: number;
  /** Every running node's hash back in Redis after a promotion (from the endpoint reaching the new primary). */
  registryMs?: number;
  /** Times the lease's fencing token went lower than one seen before. */
  tokenRegressions?: number;
  /** `/az/health` answers 503 for an AZ whose nodes are alive. */
  azHealth503?: number;
  /** Failed requests of the SDK-default client class (after its own retries). */
  sdkFailed?: number;
  /**
   * Every scenario, 0 unless set: streams cut that did not have to be (neither their server
   * nor their AZ proxy died under them), and SDK-class failures beyond its cuts that had to be
   * and the requests made while no server was left anywhere.
   */
  avoidableCuts?: number;
  sdkAvoidable?: number;
  /** From the last inference server out to the first L4 answer (cache, provider or queue). */
  firstL4Ms?: number;
  /** Fallback group woken after the standby's first type failed to launch (from that failure). */
  fallbackMs?: number;
  /** A practice wake that did not record `served`. */
  practiceNotServed?: number;
  /** A woken standby not back at zero after the hold. */
  notReleased?: number;
  /** A wedged TGI, Triton or llama.cpp (engine progress metrics) out of its AZ proxy, worst of them. */
  wedgedMetricsMs?: number;
  /** A wedged plain OpenAI-compatible server (the probe alone) out of its AZ proxy. */
  wedgedPlainMs?: number;
  /** A crashed server of each kind other than vLLM out of its AZ proxy, worst of them. */
  crashKindsMs?: number;
  /** Refused requests (no key, bad key, malformed) that reached a server, or were not answered 401. */
  refusedReached?: number;
  refusedNot401?: number;
  /** Requests a revoked key got through once the revocation reached every proxy. */
  revokedAccepted?: number;
  /** Failed requests of a client whose key was rotated under traffic. */
  rotationFailed?: number;
  /** Legitimate tenants' p50 under an unauthenticated flood over their quiet p50. */
  floodP50Ratio?: number;
  /** Legitimate tenants' failed requests during a flood. */
  legitFailed?: number;
  /** The tenant far over its limit got no 429, or 429s without Retry-After. */
  noisyUnlimited?: number;
  /** Flood requests answered other than 401 (none may reach a server). */
  floodNot401?: number;
  /** Writes a stolen credential got through (every one must be refused). */
  forgedWrites?: number;
  /** AZ states or tier changed while only forgeries happened. */
  azStatesChanged?: number;
  /** Cloud actions (zonal shift, standby resize) the leader made while only forgeries happened. */
  actuatorCalls?: number;
  /** Cache entries a stolen credential planted. */
  answersForged?: number;
  /** Liveness/readiness probes that failed while another address flooded the agent. */
  probesFailed?: number;
  /** HAProxy agent-checks seen unanswered (a Layer4 problem in `agent_desc`) during the flood. */
  checksUnanswered?: number;
  /** Canaries short of the number a scenario must send (`canary-noise`: ≥ 1,000). */
  canariesShort?: number;
  /** Further counts a scenario records in `extra` under these names, each measured and at most its value (the gray-failure scenarios). */
  extraCounts?: Readonly<Record<string, number>>;
  /** Further times (ms) a scenario records in `extra` under these names, each seen and at most its value. */
  extraTimes?: Readonly<Record<string, number>>;
}

export interface ScenarioSpec {
  name: string;
  tier: ScenarioTier;
  title: string;
  /** Part of `--quick` (CI). */
  quick: boolean;
  /** Runs in full and quick mode (p50/max need several). */
  repeat: { full: number; quick: number };
  /** Needs the fleet layer (registry, leader, controller) in the agents. */
  needsFleet: boolean;
  /** Cuts links between drill members (iptables): needs the drill's own network namespace (root); skipped elsewhere. */
  needsNetns?: boolean;
  /** Cuts or slows nodes' own paths to Redis (placement.ts): the drill starts them when a planned scenario needs them. */
  needsRedisPaths?: boolean;
  /** Spare instance slots per active AZ (stopped until a repair's surge boots one): the drill starts them when a planned scenario needs them. */
  needsSpares?: number;
  /** Running nodes the first AZ needs at least: the drill adds nodes there when a planned scenario needs more than `--nodes` places in it. */
  needsFirstAzNodes?: number;
  /**
   * Agent settings the scenario runs with on top of the drill's (the repair ladder acting): the
   * drill restarts the agents with them before it, and without them before a scenario that has
   * none (lab/drill/agent-env.ts). Scenarios that share them run back to back without a restart.
   */
  agentEnv?: Readonly<Record<string, string>>;
  /** Shipped alerts that must fire within a run (the drill's Prometheus): each missing counts in `extra.alertsMissing`. */
  alertsExpected?: readonly string[];
  targets: Targets;
}

/**
 * What a Redis failover must keep: no false failover, no `/az/health` 503 for a
 * live AZ, fencing tokens never lower, no stale write, a leader again within TTL + contend and
 * every node hash back within two heartbeats of the endpoint reaching the new primary.
 */
