/**
 * The fault matrix: one row per scenario with its tier, whether `--quick` runs it, how
 * often it repeats, and its targets (docs/design.md's failure-tier table and docs/drill.md's
 * fault matrix). Pure data and selection; the injectors live in `scenarios/` (one file per
 * family).
 */
import { DRILL_KARPENTER_ENV, DRILL_TIMING } from "./settings";
import { SECURITY_SCENARIOS } from "./security-specs";
import { CORRECTNESS_SCENARIOS } from "./correctness-specs";
import { GRAY_SCENARIOS } from "./gray-specs";
import { REPAIR_SCENARIOS } from "./repair-specs";
import { ROLLOUT_SCENARIOS } from "./rollout-specs";
import { OVERLOAD_503_MS, type ScenarioSpec, type Targets } from "./scenario-spec";

export { OVERLOAD_503_MS, type ScenarioSpec, type ScenarioTier, type Targets } from "./scenario-spec";

const REDIS_FAILOVER_TARGETS: Targets = Object.freeze({
  falseFailovers: 0,
  staleWrites: 0,
  tokenRegressions: 0,
  azHealth503: 0,
  leaderMs: DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs,
  registryMs: 2 * DRILL_TIMING.intervalMs,
});

export const SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: "crash",
    tier: "L1",
    title: "inference process crash (SIGKILL)",
    quick: true,
    repeat: { full: 5, quick: 3 },
    needsFleet: false,
    // The requests the killed server held fail (the proxy no longer replays an empty response:
    // it cannot tell a crash from a query of death); every other request must succeed.
    targets: { l1P50Ms: 700, l1Ms: 1200, failedBeyondInFlight: 0 },
  },
  { name: "gpu-lost", tier: "L1", title: "GPU fallen off the bus (nvidia-smi exit 15)", quick: true, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 2000 } },
  { name: "xid", tier: "L1", title: "fatal XID 79 in the kernel log (heal: agent restart, as a reboot)", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 2000 } },
  { name: "ecc", tier: "L1", title: "uncorrectable ECC error", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 2000 } },
  { name: "model-unloaded", tier: "L1", title: "model unloaded (gone from /v1/models)", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 2000 } },
  { name: "wedged", tier: "L1", title: "wedged engine (/health 200, completions hang)", quick: true, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 4000 } },
  {
    name: "latency-creep",
    tier: "L1",
    title: `latency creep (completions 900 ms > threshold ${DRILL_TIMING.probeLatencyMs} ms)`,
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { l1Ms: 5000 },
  },
  {
    name: "az-gpu-loss",
    tier: "L2",
    title: "every GPU node of one AZ lost, its HAProxy alive",
    quick: true,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { crossMs: 3000, azHealthAfterStateMs: 2000 },
  },
  {
    name: "standby-wake",
    tier: "L2",
    title: "standby AZ at zero, every GPU of one active AZ lost: the leader wakes the standby",
    quick: true,
    repeat: { full: 3, quick: 1 },
    needsFleet: true,
    targets: { wakeDecisionMs: 10_000 },
  },
  { name: "az-loss", tier: "L3", title: "whole AZ lost, HAProxy included", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { dnsMs: 5000, dnsShareRatio: 1.2 } },
  {
    name: "leader-kill",
    tier: "fleet",
    title: "leader agent killed (SIGKILL)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { leaderMs: DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs, falseFailovers: 0 },
  },
  { name: "leader-pause", tier: "fleet", title: "leader paused past its TTL (SIGSTOP)", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: true, targets: { staleWrites: 0 } },
  {
    name: "node-drain",
    tier: "L1",
    title: "one active node drained as a scale-in does it (agent drains, the server stops once idle), then booted again",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { failed: 0, sdkFailed: 0, falseFailovers: 0 },
  },
  {
    name: "rolling-restart",
    tier: "L1",
    title: "rolling update of one active AZ's inference servers: preStop drain hook, SIGTERM once idle, new server; one node at a time",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { failed: 0, sdkFailed: 0, falseFailovers: 0 },
  },
  {
    name: "redis-failover-lag",
    tier: "fleet",
    title: "Redis primary cut off from its replica and sentinels, promoted replica missing the last writes, old primary lost",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: REDIS_FAILOVER_TARGETS,
  },
  {
    name: "redis-failover",
    tier: "fleet",
    title: "Redis Sentinel failover to a caught-up replica (the old primary comes back as a replica)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: REDIS_FAILOVER_TARGETS,
  },
  {
    name: "redis-blackhole",
    tier: "fleet",
    title: "Redis primary silent (SIGSTOP), its connections left open; the sentinels promote the replica",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: REDIS_FAILOVER_TARGETS,
  },
  {
    name: "redis-slow",
    tier: "fleet",
    title: "leader killed while Redis holds every write 1.5 s (CLIENT PAUSE WRITE): acquisitions time out and run late",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { leaderMs: DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs, staleWrites: 0, tokenRegressions: 0, falseFailovers: 0 },
  },
  { name: "redis-restart", tier: "fleet", title: "Redis restart (every key lost)", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: true, targets: { falseFailovers: 0, failed: 0 } },
  {
    name: "redis-readonly",
    tier: "fleet",
    title: "Redis refuses writes for 20 s (maxmemory 1, noeviction)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { falseFailovers: 0, failed: 0 },
  },
  { name: "flap", tier: "fleet", title: "one flapping probe (slow one period in three)", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { falseFailovers: 0 } },
  {
    name: "mass-probe",
    tier: "fleet",
    title: "every node's probe failing at once (blast-radius cap)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { falseFailovers: 0 },
  },
  {
    name: "query-of-death",
    tier: "L1",
    title: "one request whose prompt kills the inference server, sent through an AZ proxy",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    // The continuation relay asks a second server once when the first died before answering:
    // a query of death costs two servers at most, never more.
    targets: { crashedServers: 2, recoveryMs: 15_000 },
  },
  {
    name: "query-of-death-stream",
    tier: "L1",
    title: "one streamed request whose prompt kills every server it reaches: two servers at most, then an error (the continuation relay's guard)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { crashedServers: 2, recoveryMs: 15_000 },
  },
  {
    name: "long-prompt-crash",
    tier: "L1",
    title: "64 KB prompts at a steady rate, one inference server SIGKILLed",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { failedBeyondInFlight: 0 },
  },
  {
    name: "overload",
    tier: "L2",
    title: "one AZ's GPUs lost, its proxy driven at 3× one AZ's capacity (spilling to backups)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { healthMs: 1000, fast503Ms: OVERLOAD_503_MS, retryAfterMissing: 0, otherFailures: 0, falseFailovers: 0 },
  },
  {
    name: "l2-spread",
    tier: "L2",
    title: "every primary of one AZ down: its proxy spreads over all the other AZs' servers",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { spreadRatio: 1.5 },
  },
  {
    name: "long-generation",
    tier: "L1",
    title: "a 15 s non-streaming generation and a 12 s stream through an AZ proxy (no fault)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { failed: 0, falseFailovers: 0 },
  },
  {
    name: "burst",
    tier: "L1",
    title: "1,000 requests queued on one node while its tokens flow (busy, not dead)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { falseFailovers: 0 },
  },
  {
    name: "server-kinds",
    tier: "L1",
    title: "one node as TGI, Triton, llama.cpp and a plain OpenAI-compatible server in turn: each wedged, then crashed",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { wedgedMetricsMs: 1500, wedgedPlainMs: 6000, crashKindsMs: 1200 },
  },
  ...CORRECTNESS_SCENARIOS,
  { name: "corrupt-weights", tier: "L1", title: "inference server restarted on corrupted weights: fails to load", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: false, targets: { l1Ms: 2000 } },
  {
    name: "global-outage",
    tier: "fleet",
    title: "L4: every GPU of every AZ lost, standby included; cached, queue-opt-in and plain requests through a proxy with llm-ha fallback; then recovery and replay",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    // otherFailures here: answers neither L4's nor a 503 with Retry-After, wrong cached answers, queued requests lost or run twice (counted at the servers), results not fetched through L1, an idempotency key or a retried 503 run twice, a poisoned answer served to another tenant, replay not resumed within 5 s of a kill -9 of one fallback.
    targets: { retryAfterMissing: 0, otherFailures: 0, firstL4Ms: 1000 },
  },
  {
    name: "standby-ice",
    tier: "L2",
    title: "standby at zero, every GPU of one active AZ lost, the standby's first instance type out of capacity (InsufficientInstanceCapacity): the fallback type serves",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    // Fallback started ≤ 30 s after the first capacity failure; no request fails meanwhile.
    targets: { wakeDecisionMs: 10_000, fallbackMs: 30_000, failed: 0 },
  },
  {
    name: "wake-onto-bad-gpus",
    tier: "L2",
    title: "standby at zero, every GPU of one active AZ lost, the standby's first group boots onto lost GPUs: never in rotation, judged unhealthy, the fallback group serves, no wake/release loop",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: {
      wakeDecisionMs: 10_000,
      failed: 0,
      // The bad group's nodes never in rotation (agent HEALTHY or a proxy UP after a check); one wake per step; no release before the heal; the fallback serves.
      extraCounts: { badInRotation: 0, extraWakes: 0, releasesBeforeHeal: 0, fallbackNeverServed: 0 },
      // Fallback woken within the healthy bound (15 s) + a follow period and slack.
      extraTimes: { fallbackAfterWakeMs: 30_000 },
    },
  },
  {
    name: "practice-wake",
    tier: "fleet",
    title: "an operator asks for a practice wake (llm-ha practice): the standby wakes, serves, the outcome is recorded, it is released; nothing else moves",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { wakeDecisionMs: 5000, failed: 0, sdkFailed: 0, falseFailovers: 0, practiceNotServed: 0, notReleased: 0 },
  },
  ...SECURITY_SCENARIOS,
  ...GRAY_SCENARIOS,
  // Last: they run with the repair ladder acting (agent settings of their own), so a full drill restarts the agents once, before them.
  ...REPAIR_SCENARIOS,
  // After them: the rollout's own agent settings (a 10 s bake), one more restart of the agents in a full drill.
  ...ROLLOUT_SCENARIOS,
  // After them: the Karpenter engine's agent settings, one more restart of the agents in a full drill.
  {
    name: "standby-wake-karpenter",
    tier: "L2",
    title: "the standby's capacity from Karpenter NodePools (simulated): every GPU of one active AZ lost, the leader raises the first pool and scales the placeholder; then again with the first pool out of capacity (InsufficientCapacity): the second pool serves",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    agentEnv: DRILL_KARPENTER_ENV,
    // The targets of standby-wake and standby-ice: wake decided ≤ 10 s (both phases), fallback ≤ 30 s after the first capacity failure, no request failed.
    targets: { wakeDecisionMs: 10_000, fallbackMs: 30_000, failed: 0 },
  },
];

export class UnknownScenarioError extends Error {
  constructor(name: string) {
    super(`unknown scenario ${JSON.stringify(name)}; one of: ${SCENARIOS.map((s) => s.name).join(", ")}`);
    this.name = "UnknownScenarioError";
  }
}

