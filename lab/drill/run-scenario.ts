/**
 * The drill's entry to one run of one scenario: a table from scenario name to its family's
 * run (node faults, zone, fleet, proxy under `scenarios/`), the check that a fleet scenario has a
 * fleet layer to measure, and the start-up probe for that layer. The shared runner (setup,
 * measurement, result assembly) lives in `scenarios/runner.ts`; its types and the stale-write
 * count are re-exported here so that callers keep one import path.
 */
import { Redis } from "ioredis";
import { sleep } from "../../agent/src/util/net";
import type { ScenarioSpec } from "./scenarios";
import { runFlap, runLeader, runMassProbe, runRedisReadonly, runRedisRestart } from "./scenarios/fleet";
import { NODE_FAULTS, runNodeFault } from "./scenarios/node";
import { runNodeDrain, runRollingRestart } from "./scenarios/planned";
import { runRedisBlackhole, runRedisFailover, runRedisFailoverLag, runRedisSlow } from "./scenarios/redis";
import { runGlobalOutage } from "./scenarios/outage";
import { runL2Spread, runLongGeneration, runLongPromptCrash, runOverload, runQueryOfDeath } from "./scenarios/proxy";
import { measurePressure } from "./pressure";
import { blank, type RunResult, type ScenarioContext } from "./scenarios/runner";
import { runAzGpuLoss, runAzLoss, runStandbyWake } from "./scenarios/zone";
import { runStandbyWakeKarpenter } from "./scenarios/karpenter";
import { runPracticeWake, runStandbyIce } from "./scenarios/capacity";
import { runWakeOntoBadGpus } from "./scenarios/wake-bad-gpus";
import { runServerKinds } from "./scenarios/kinds";
import { runBurst, SIGNAL_FAULTS } from "./scenarios/signals";
import { runEdgeAuth, runEdgeFlood } from "./scenarios/edge";
import { runAgentStarve, runRedisForgery } from "./scenarios/security";
import { runHealthFlood } from "./scenarios/health-flood";
import { runNodeCompromise } from "./scenarios/node-compromise";
import { runCanaryNoise, runSilentCorruption } from "./scenarios/correctness";
import { GRAY_RUNS } from "./scenarios/gray";
import { REPAIR_RUNS } from "./scenarios/repair";
import { ROLLOUT_RUNS } from "./scenarios/rollout";

export { MAIN_CLIENT, type RunResult, type ScenarioContext } from "./scenarios/runner";
export { staleWrites } from "./scenarios/fleet";

type ScenarioRun = (ctx: ScenarioContext, spec: ScenarioSpec, run: number) => Promise<RunResult>;

// A Map rather than an object literal: a scenario name is looked up as given, never matched
// against an inherited property such as `constructor`.
const RUNS: ReadonlyMap<string, ScenarioRun> = new Map<string, ScenarioRun>([
  ...Object.entries({ ...NODE_FAULTS, ...SIGNAL_FAULTS }).map(([name, f]): [string, ScenarioRun] => [name, (ctx, spec, run) => runNodeFault(ctx, spec, run, f)]),
  ["burst", runBurst],
  ["silent-corruption", runSilentCorruption],
  ["canary-noise", runCanaryNoise],
  ["server-kinds", runServerKinds],
  ["az-gpu-loss", runAzGpuLoss],
  ["standby-wake", runStandbyWake],
  ["az-loss", runAzLoss],
  ["leader-kill", (ctx, spec, run) => runLeader(ctx, spec, run, "kill")],
  ["leader-pause", (ctx, spec, run) => runLeader(ctx, spec, run, "pause")],
  ["redis-restart", runRedisRestart],
  ["redis-readonly", runRedisReadonly],
  ["node-drain", runNodeDrain],
  ["rolling-restart", runRollingRestart],
  ["redis-failover-lag", runRedisFailoverLag],
  ["redis-failover", runRedisFailover],
  ["redis-blackhole", runRedisBlackhole],
  ["redis-slow", runRedisSlow],
  ["flap", runFlap],
  ["mass-probe", runMassProbe],
  ["query-of-death", runQueryOfDeath],
  ["query-of-death-stream", runQueryOfDeath],
  ["long-prompt-crash", runLongPromptCrash],
  ["overload", runOverload],
  ["l2-spread", runL2Spread],
  ["long-generation", runLongGeneration],
  ["global-outage", runGlobalOutage],
  ["standby-ice", runStandbyIce],
  ["standby-wake-karpenter", runStandbyWakeKarpenter],
  ["practice-wake", runPracticeWake],
  ["wake-onto-bad-gpus", runWakeOntoBadGpus],
  ["edge-auth", runEdgeAuth],
  ["edge-flood", runEdgeFlood],
  ["health-flood", runHealthFlood],
  ["node-compromise", runNodeCompromise],
  ["redis-forgery", runRedisForgery],
  ["agent-starve", runAgentStarve],
  ...GRAY_RUNS,
  ...REPAIR_RUNS,
  ...ROLLOUT_RUNS,
]);

/** Runs one run of one scenario. */
export async function runScenario(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  if (spec.needsFleet && !ctx.fleetWired) {
    const r = blank(spec.name, run);
    r.notMeasured = "fleet layer (registry, leader, controller) not running in the agents: no leader appeared in Redis";
    return r;
  }
  const go = RUNS.get(spec.name);
  if (go) {
    const pressure = measurePressure();
    // A run that throws is this run's failure (not measured, which --check counts), not the drill's end.
    const r = await go(ctx, spec, run).catch((err: unknown) => {
      const failed = blank(spec.name, run);
      failed.notMeasured = `the run failed: ${err instanceof Error ? err.message : String(err)}`;
      return failed;
    });
    const p = pressure.stop();
    r.extra.cpuPressurePct = p.cpuPressurePct;
    r.extra.loopDelayMaxMs = p.loopDelayMaxMs;
    return r;
  }
  const r = blank(spec.name, run);
  r.notMeasured = "no injector for this scenario";
  return r;
}

/** Waits up to `ms` for a leader in Redis: whether the fleet layer runs in the agents. */
export async function detectFleet(url: string, leaderKey: string, ms: number): Promise<boolean> {
  const redis = new Redis(url, { maxRetriesPerRequest: 0, connectTimeout: 500 });
  redis.on("error", () => undefined);
  try {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      try {
        if (await redis.get(leaderKey)) return true;
      } catch {
        // keep trying until the deadline
      }
      await sleep(200);
    }
    return false;
  } finally {
    redis.disconnect();
  }
}
