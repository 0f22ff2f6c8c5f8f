/** The security scenarios' rows of the fault matrix: the public edge (injectors in scenarios/edge.ts) and least privilege inside (scenarios/security.ts). */
import type { ScenarioSpec } from "./scenarios";

export const SECURITY_SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: "edge-auth",
    tier: "L1",
    title: "edge: no key, bad and malformed keys, a key revoked mid-run, a key rotated under traffic",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { refusedReached: 0, refusedNot401: 0, revokedAccepted: 0, rotationFailed: 0, falseFailovers: 0 },
  },
  {
    name: "edge-flood",
    tier: "L1",
    title: "edge: unauthenticated flood at 10× the legitimate rate, one tenant at 10× its limit",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    targets: { floodP50Ratio: 1.1, legitFailed: 0, noisyUnlimited: 0, floodNot401: 0, falseFailovers: 0 },
  },
  {
    name: "health-flood",
    tier: "L1",
    title: "edge: 1,000 idle and slowloris connections from one unauthenticated address on one AZ's /az/health listener and API frontend",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    // The health check must not fail (Route53 would fail a healthy AZ over), keyed clients not slow down.
    targets: { floodP50Ratio: 1.1, legitFailed: 0, falseFailovers: 0, extraCounts: { healthChecksFailed: 0, dnsDrops: 0 } },
  },
  {
    name: "redis-forgery",
    tier: "fleet",
    title: "a stolen fallback credential forges node hashes, the lease, the fence, the tier, a practice wake and a cache entry; a GPU node's own credential adds phantom nodes, moves a member and deletes the shared indexes",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { forgedWrites: 0, azStatesChanged: 0, actuatorCalls: 0, answersForged: 0, falseFailovers: 0 },
  },
  {
    name: "node-compromise",
    tier: "fleet",
    title: "one GPU node's Redis credential and token against the fleet: other nodes' records, phantom members, available sets, canary votes, deletes, an enrolment in another's name, an endless EVAL",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    alertsExpected: ["LlmHaNodeCredentialMisused"],
    targets: {
      azStatesChanged: 0, actuatorCalls: 0, falseFailovers: 0,
      extraCounts: { nodesHurt: 0, forgeriesUncounted: 0, evalAccepted: 0, redisBusy: 0, alertsMissing: 0 },
    },
  },
  {
    name: "agent-starve",
    tier: "L1",
    title: "600 idle agent-check + 300 slowloris HTTP sockets from another address against one agent, then a real crash under the flood",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: false,
    // The crash under the flood must leave rotation within the crash target (L1 max 1.2 s).
    targets: { probesFailed: 0, checksUnanswered: 0, falseFailovers: 0, l1Ms: 1200 },
  },
];
