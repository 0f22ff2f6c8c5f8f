/**
 * Faults as the field has them: compound faults, partitions and slow links. Targets
 * and why in docs/drill.md (Gray failures); injectors in scenarios/<name>.ts, wired in
 * scenarios/gray.ts. The ones that cut links need the drill's own network namespace.
 */
import type { ScenarioSpec } from "./scenarios";
import { DRILL_TIMING } from "./settings";

/** A new leader within one lease TTL plus one contend period of the lease becoming free. */
const LEADER_MS = DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs;

export const GRAY_SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: "redis-failover-then-leader-kill",
    tier: "fleet",
    title: "Redis primary moves, the old node takes writes again (far side of a partition), then the leader is killed",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: {
      leaderMs: LEADER_MS,
      staleWrites: 0,
      tokenRegressions: 0,
      falseFailovers: 0,
      extraCounts: { oldNodeClients: 0, leaseNotOnPrimary: 0, leaderChanges: 0 },
    },
  },
  {
    name: "leader-isolated",
    tier: "fleet",
    title: "the leader's node cut from Redis (iptables) while everything else runs",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    needsNetns: true,
    needsRedisPaths: true,
    targets: { leaderMs: LEADER_MS, staleWrites: 0, tokenRegressions: 0, falseFailovers: 0, extraCounts: { leaderChurn: 0, othersExpired: 0 } },
  },
  {
    name: "redis-latency",
    tier: "fleet",
    title: "Redis 300 ms away from every node for 30 s (delay proxy on each node's path)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    needsRedisPaths: true,
    targets: { staleWrites: 0, tokenRegressions: 0, falseFailovers: 0, extraCounts: { leaderChanges: 0, nodesExpired: 0 } },
  },
  {
    name: "cross-az-loss",
    tier: "L2",
    title: "20 % of cross-AZ connections lost while az-a's GPUs are lost (its proxy spills to the other AZs)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    needsNetns: true,
    // az-gpu-loss's spill target, kept under loss; every request through az-a's proxy answered.
    targets: { crossMs: 3000, falseFailovers: 0, extraCounts: { fieldFailed: 0, backupsOut: 0 } },
  },
  {
    name: "az-power-interruption",
    tier: "L3",
    title: "az-a's power interrupted: its proxy, nodes, the leader placed there and the Redis primary placed there, at once",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    // The leader placed on an az-a node (the others' paths slowed while they contend).
    needsRedisPaths: true,
    // leaderMs counts from the endpoint reaching the promoted replica (Redis writable again).
    // queueFailed: writes to the L4 queue not acknowledged while the broker placed in az-a is down.
    targets: { dnsMs: 5000, leaderMs: LEADER_MS, staleWrites: 0, tokenRegressions: 0, extraCounts: { healthyWorsened: 0, l4Entered: 0, queueFailed: 0 } },
  },
  {
    name: "az-partition",
    tier: "L3",
    title: "az-a serves its own proxy but is cut from Redis and from the other AZs (iptables)",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    needsNetns: true,
    needsRedisPaths: true,
    // One consistent decision: az-a keeps its clients (its /az/health fails open), nothing flaps.
    targets: { falseFailovers: 0, staleWrites: 0, tokenRegressions: 0, azHealth503: 0, extraCounts: { fieldFailed: 0, leaseChurn: 0 } },
  },
];
