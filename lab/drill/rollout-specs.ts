/**
 * The rollout rows of the fault matrix (injectors in scenarios/rollout.ts): the leader carries a
 * model revision across the active AZs through the local cloud (`LLMHA_ACTUATOR=local`, set with
 * the standby AZ), with a 10 s bake (`DRILL_ROLLOUT_ENV`, every agent: any may lead).
 */
import type { ScenarioSpec } from "./scenario-spec";
import { DRILL_ROLLOUT_ENV, DRILL_TIMING } from "./settings";

const ROLLOUT = { tier: "fleet", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: true, agentEnv: DRILL_ROLLOUT_ENV } as const;

/** Time to a terminal phase: 3 steps (canary node, the rest of the first AZ, the second AZ) of switching and a 10 s bake, with room for a loaded host. */
const TERMINAL_MS = 180_000;

export const ROLLOUT_SCENARIOS: readonly ScenarioSpec[] = [
  {
    ...ROLLOUT,
    name: "rollout-good",
    title: "a new model revision across the active AZs (canary node, then AZ by AZ, 10 s bake each): promoted",
    // standbyNotOnNew: the standby AZ, scaled to zero and so in no step, boots on the promoted revision.
    targets: { failed: 0, extraCounts: { notPromoted: 0, maxAzsInFlux: 1, standbyNotOnNew: 0 }, extraTimes: { terminalMs: TERMINAL_MS } },
  },
  {
    ...ROLLOUT,
    name: "rollout-bad-weights",
    title: "a new revision that answers fluent garbage (the operator's recorded canary answers for it): rolled back at the first step",
    // Wrong answers only from the first step's nodes, in rotation for about one canary period
    // (the agent's canary round, then its AZ proxy's agent check: 1 s + 0.5 s, 2 s of slack on the loaded host).
    targets: {
      failed: 0,
      extraCounts: { notRolledBack: 0, newRevisionAzs: 1, wrongOffFirstStep: 0, maxAzsInFlux: 1 },
      extraTimes: { exposureMs: DRILL_TIMING.canaryIntervalMs + 2 * DRILL_TIMING.intervalMs + 2000, terminalMs: TERMINAL_MS },
    },
  },
  {
    ...ROLLOUT,
    name: "rollout-slow",
    title: "a new revision 30 % slower at p50 (the fleet's base latency 150 ms in this scenario, the new one 195 ms): the latency gate rolls it back",
    targets: { failed: 0, extraCounts: { notRolledBack: 0, notLatencyGate: 0, maxAzsInFlux: 1 }, extraTimes: { terminalMs: TERMINAL_MS } },
  },
  {
    ...ROLLOUT,
    name: "rollout-leader-kill",
    title: "the leader SIGKILLed while a rollout's second step switches: the next leader goes on from the fenced state",
    targets: { failed: 0, extraCounts: { notKilled: 0, notTerminal: 0, maxAzsInFlux: 1, staleWrites: 0, staleSwitches: 0, standbyNotOnNew: 0 }, extraTimes: { terminalMs: TERMINAL_MS } },
  },
];
