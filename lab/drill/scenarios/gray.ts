/** The runs of the gray-failure scenarios (specs in ../gray-specs.ts), one file each; run-scenario.ts spreads this table into its own. */
import type { ScenarioSpec } from "../scenarios";
import type { RunResult, ScenarioContext } from "./runner";
import { runRedisFailoverThenLeaderKill } from "./redis-failover-then-leader-kill";
import { runLeaderIsolated } from "./leader-isolated";
import { runRedisLatency } from "./redis-latency";
import { runCrossAzLoss } from "./cross-az-loss";
import { runAzPowerInterruption } from "./az-power-interruption";
import { runAzPartition } from "./az-partition";

export const GRAY_RUNS: readonly [string, (ctx: ScenarioContext, spec: ScenarioSpec, run: number) => Promise<RunResult>][] = [
  ["redis-failover-then-leader-kill", runRedisFailoverThenLeaderKill],
  ["leader-isolated", runLeaderIsolated],
  ["redis-latency", runRedisLatency],
  ["cross-az-loss", runCrossAzLoss],
  ["az-power-interruption", runAzPowerInterruption],
  ["az-partition", runAzPartition],
];
