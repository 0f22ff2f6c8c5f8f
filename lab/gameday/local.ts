/**
 * `llm-ha gameday --local --scenario NAME`: the game day's runner against the drill's world.
 * One stack (real Redis with Sentinel, HAProxy, PowerDNS, the Kafka-protocol broker, simulated
 * GPU nodes, the local cloud); first the drill's own scenario runs on it, for comparison; then
 * the local cloud offers the same fault as an AWS FIS experiment template, and the runner that a
 * real game day uses finds it by its tags, starts it through `@aws-sdk/client-fis`, drives its
 * own traffic with its own client key, watches the public answer (PowerDNS) and the fleet
 * (Redis), and is judged against the drill's targets. Both verdicts go in one report.
 */
import { FisClient } from "@aws-sdk/client-fis";
import { Redis } from "ioredis";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { stopThreshold } from "../../infra/gameday/alarms";
import { scenarioNeeds } from "../../infra/gameday/scenarios";
import type { GamedayScenario } from "../../contracts/gameday";
import { drillKey } from "../drill/credentials";
import { readFleet } from "../drill/observer";
import { emptyTimeline } from "../drill/timeline";
import { runScenario, type RunResult, type ScenarioContext } from "../drill/run-scenario";
import { SCENARIOS, type ScenarioSpec } from "../drill/scenarios";
import { cutPower, preparePowerCut, restorePower } from "../drill/scenarios/az-power-interruption";
import { CLIENT_TIMEOUT_MS } from "../drill/settings";
import { DRILL_MODEL } from "../drill/stack";
import type { LocalFault } from "../drill/local-fis";
import { createWorld } from "../drill/world";
import { startDrillPrometheus } from "../drill/alerts";
import { prometheusApi } from "../engines/prometheus";
import { worldNeeds } from "../drill/command";
import { gamedayClients } from "./clients";
import { runGameday, type GamedayRun, type GamedayView } from "./runner";
import { GamedayError } from "./fis";

/** The scenarios whose fault the local cloud can offer as an experiment. */
export const LOCAL_GAMEDAY_SCENARIOS: readonly GamedayScenario[] = ["az-power-interruption"];

/** How long the stop alarm's condition must hold before it fires (a drill second stands for a production minute). */
const LOCAL_ALARM_FOR_MS = 5000;

export interface LocalGamedayResult {
  spec: ScenarioSpec;
  drill: RunResult | null;
  gameday: GamedayRun;
  outDir: string;
  /** The active AZs' names (the report's lanes). */
  activeAzs: string[];
}

/** The drill's own fault for `scenario`, ready to be offered: set up once, injected and healed by the experiment. */
async function localFault(ctx: ScenarioContext, scenario: GamedayScenario, notes: string[]): Promise<{ fault: () => LocalFault; az: string; cleanup(): Promise<void> }> {
  if (scenario !== "az-power-interruption") throw new GamedayError(`--local offers ${LOCAL_GAMEDAY_SCENARIOS.join(", ")} (${scenario} has no local fault yet)`);
  const cut = await preparePowerCut(ctx, notes);
  if (typeof cut === "string") throw new GamedayError(`cannot set the fault up: ${cut}`);
  return {
    az: cut.az.name,
    fault: () => ({ inject: () => cutPower(ctx, cut, notes), heal: () => restorePower(ctx, cut, notes) }),
    cleanup: async () => void (await cut.queue?.stop()),
  };
}

/**
 * The stop alarm as the stack's CloudWatch alarm judges it (infra/gameday/alarms.ts): healthy
 * active AZs below the threshold, here from the drill's own DNS answers, for `LOCAL_ALARM_FOR_MS`.
 */
function localAlarm(ctx: ScenarioContext): (name: string) => boolean {
  const active = ctx.stack.azs.filter((a) => !a.standby);
  const since = new Map<string, number>();
  return (name) => {
    const kind = name.endsWith("anyActiveAz") ? "anyActiveAz" : "beyondOneAz";
    const dns = ctx.observer.latest()?.dns ?? null;
    const healthy = dns === null ? 0 : active.filter((a) => dns.includes(a.address)).length;
    if (healthy >= stopThreshold(kind, active.length)) {
      since.delete(name);
      return false;
    }
    const from = since.get(name) ?? Date.now();
    since.set(name, from);
    return Date.now() - from >= LOCAL_ALARM_FOR_MS;
  };
}

export async function runLocalGameday(o: {
  scenario: GamedayScenario;
  nodes: number;
  outDir: string;
  holdMs: number;
  /** Run the drill's own scenario first, for comparison. */
  drillFirst: boolean;
  netns: boolean;
  now(): number;
  progress(line: string): void;
  signal?: AbortSignal;
}): Promise<LocalGamedayResult> {
  const spec = SCENARIOS.find((s) => s.name === o.scenario);
  if (!spec) throw new GamedayError(`the drill has no scenario ${o.scenario}`);
  const world = createWorld({ nodes: o.nodes, outDir: o.outDir, now: o.now, progress: o.progress, netns: o.netns, redisPaths: spec.needsRedisPaths === true, ...worldNeeds([spec], o.nodes) });
  try {
    const ctx = await world.start();
    const st = ctx.stack;
    if (!st.cloud) throw new GamedayError("the local cloud runs only with a standby AZ: --nodes 5 or more");
    let drill: RunResult | null = null;
    if (o.drillFirst) {
      o.progress(`the drill's own ${spec.name}, for comparison`);
      drill = await runScenario(ctx, spec, 1);
      world.notePids();
    }
    const notes: string[] = [];
    // The shipped alert rules over the drill's series, read by the runner as it reads a stack's Prometheus.
    const prom = await startDrillPrometheus(st, o.progress);
    if (prom) world.track(() => prom.stop());
    world.notePids();
    o.progress(`game day: setting up ${spec.name} (the Redis primary and the leader in ${st.azs[0].name}, as the drill does)`);
    const local = await localFault(ctx, o.scenario, notes);
    world.track(() => local.cleanup());
    const fis = st.cloud.enableFis({ holdMs: o.holdMs, alarm: localAlarm(ctx) });
    const needs = scenarioNeeds(o.scenario);
    fis.offer({ scenario: o.scenario, description: `llm-ha ${o.scenario} (local): ${spec.title}`, actions: ["LocalFault"], stopAlarm: `${st.cluster}-gameday-stop-${needs.stopAlarm}`, fault: local.fault });
    const client = new FisClient({ region: "local", endpoint: st.cloud.url, credentials: { accessKeyId: "local", secretAccessKey: "local" }, maxAttempts: 2 });
    const keys = new RedisKeys(st.cluster);
    const redis = new Redis(st.redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 500, retryStrategy: () => 200 });
    redis.on("error", () => undefined);
    const azs = st.azs.map((a) => a.name);
    const byAddress = new Map(st.azs.map((a) => [a.address, a.name]));
    let answer: string[] = [];
    let rr = 0;
    const view: GamedayView = {
      servingAzs: async () => {
        answer = await st.dns.query();
        return answer.map((a) => byAddress.get(a)).filter((x): x is string => x !== undefined);
      },
      fleet: () => readFleet(redis, keys, azs),
      close: async () => void redis.disconnect(),
    };
    const pick = (): string | null => (answer.length ? answer[rr++ % answer.length] : null);
    const tl = emptyTimeline();
    const clients = gamedayClients({
      edge: { baseUrl: () => { const a = pick(); return a ? `http://${a}:${st.port}` : null; }, address: pick, port: st.port, https: false },
      apiKey: drillKey("gameday"), model: DRILL_MODEL, timeline: tl, now: o.now,
    });
    const offset = Date.now() - o.now();
    const gameday = await runGameday({
      fis: client, scenario: o.scenario, environment: "drill", az: local.az, activeAzs: st.azs.filter((a) => !a.standby).map((a) => a.name), view, clients, model: DRILL_MODEL,
      requestTimeoutMs: CLIENT_TIMEOUT_MS, now: o.now, progress: o.progress, signal: o.signal, recoveryWaitMs: 60_000, timeline: tl,
      // What died with the fault (the AZ's proxy, its servers), on the run's clock: the cut streams that had to be.
      deaths: () => st.deaths().map((d) => ({ ...d, t: d.at - offset })),
      prometheus: prom ? prometheusApi(prom.url) : undefined,
    });
    gameday.result.notes.push(...notes);
    await world.stopTraffic();
    return { spec, drill, gameday, outDir: o.outDir, activeAzs: st.azs.filter((a) => !a.standby).map((a) => a.name) };
  } finally {
    o.progress("stopping everything");
    await world.close();
  }
}
