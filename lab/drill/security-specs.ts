/** The least-privilege scenarios' rows of the fault matrix (issue 26; injectors in scenarios/security.ts). */
import type { ScenarioSpec } from "./scenarios";

export const SECURITY_SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: "redis-forgery",
    tier: "fleet",
    title: "a stolen fallback credential forges node hashes, the lease, the fence, the tier, a practice wake and a cache entry",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { forgedWrites: 0, azStatesChanged: 0, actuatorCalls: 0, answersForged: 0, falseFailovers: 0 },
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
