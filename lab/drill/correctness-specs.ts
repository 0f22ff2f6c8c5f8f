/** The correctness canaries' rows of the fault matrix (injectors in scenarios/correctness.ts), in the matrix's order. */
import type { ScenarioSpec } from "./scenarios";

export const CORRECTNESS_SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: "silent-corruption",
    tier: "L1",
    title: "one server answers wrongly with 200 — garbage, drift (one token in k), NaN logprobs, a mode a run: canaries take it out until a restart",
    quick: false,
    repeat: { full: 3, quick: 3 },
    needsFleet: true,
    targets: { l1Ms: 30_000, failed: 0 },
  },
  {
    name: "canary-noise",
    tier: "L1",
    title: "every server nondeterministic within tolerance (logprob jitter, a late token) for 1,000 canaries: no drain",
    quick: false,
    repeat: { full: 1, quick: 1 },
    needsFleet: true,
    targets: { falseFailovers: 0, canariesShort: 0 },
  },
];
