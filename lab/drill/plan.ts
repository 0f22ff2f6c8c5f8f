/**
 * Which scenarios a drill runs, how often, and about how long that takes.
 */
import { SCENARIOS, UnknownScenarioError, type ScenarioSpec } from "./scenarios";

/**
 * What `npm run drill` runs with no flag: one scenario per tier, the L4 outage included, once
 * each — a first run of a few minutes. `--full` runs the whole matrix, `--quick` CI's subset.
 */
export const FIRST_RUN: readonly string[] = ["crash", "az-gpu-loss", "az-loss", "leader-kill", "edge-auth", "global-outage"];

export type DrillMode = "first" | "quick" | "full";

/**
 * Seconds a run of a scenario took in a quiet full run (fault to end, plus the settling before
 * the next), for the estimate printed at the start; 18 s for one not listed. The first run's six
 * from a first drill on 2 quiet cores (2026-12-06: 2 min 9 s in all).
 */
const TYPICAL_S: Readonly<Record<string, number>> = {
  crash: 15, "az-gpu-loss": 10, "leader-kill": 11, "edge-auth": 9, "standby-wake": 28, xid: 28, "rolling-restart": 42, "redis-failover": 45, "redis-failover-lag": 45, "redis-blackhole": 60,
  "redis-readonly": 35, overload: 44, "server-kinds": 120, "silent-corruption": 26, "canary-noise": 90, "global-outage": 25, "standby-ice": 32, "standby-wake-karpenter": 75,
  "l2-spread": 25, "az-loss": 24, "practice-wake": 25, "wake-onto-bad-gpus": 60, "agent-starve": 20, "health-flood": 24, "node-compromise": 30,
  "repair-reboot": 60, "repair-replace": 70, "repair-capacity-short": 100, "bad-host-returns": 110, "repair-storm": 200,
  "rollout-good": 110, "rollout-bad-weights": 60, "rollout-slow": 80, "rollout-leader-kill": 120,
};

/** About how long the plan takes, in seconds: the world's start (about 26 s) and stop (about 2 s, its nodes together) included. */
export function estimateSeconds(plan: readonly { spec: ScenarioSpec; runs: number }[]): number {
  return 28 + plan.reduce((sum, p) => sum + p.runs * (TYPICAL_S[p.spec.name] ?? 18), 0);
}

/** The scenarios to run: by name, the first run, the quick subset, or all; with how many runs each (`runs` overrides). */
export function selectScenarios(o: { scenario?: string; mode: DrillMode; runs?: number }): { spec: ScenarioSpec; runs: number }[] {
  const runsOf = (spec: ScenarioSpec): number => o.runs ?? (o.mode === "full" ? spec.repeat.full : o.mode === "quick" ? spec.repeat.quick : 1);
  if (o.scenario) {
    const names = o.scenario.split(",");
    return names.map((n) => {
      const spec = SCENARIOS.find((s) => s.name === n);
      if (!spec) throw new UnknownScenarioError(n);
      return { spec, runs: runsOf(spec) };
    });
  }
  if (o.mode === "first") return FIRST_RUN.map((n) => SCENARIOS.find((s) => s.name === n)!).map((spec) => ({ spec, runs: runsOf(spec) }));
  return SCENARIOS.filter((s) => o.mode === "full" || s.quick).map((spec) => ({ spec, runs: runsOf(spec) }));
}
