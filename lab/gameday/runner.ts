/**
 * The game day's one code path, for the lab and the cloud alike: find the stack's FIS template
 * for the scenario, refuse unless the fleet is steady, drive traffic through the public edge,
 * start the experiment, follow it to its end (a stop condition's alarm, or Ctrl-C, ends it
 * early), wait for the AZ to come back, and judge what it saw against the drill's own targets
 * for the same scenario. What it sees comes through a `GamedayView` (the AZs the public name
 * serves, the fleet as Redis has it) and its own clients; `--local` gives it the drill's, the
 * cloud Route53's health checks and the stack's Redis.
 */
import { randomUUID } from "node:crypto";
import type { FisClient } from "@aws-sdk/client-fis";
import { sleep } from "../../agent/src/util/net";
import { Loop } from "../../agent/src/util/loop";
import { emptyTimeline, type FleetSample, type Timeline } from "../drill/timeline";
import { startTraffic, type TrafficClient } from "../drill/traffic";
import { findTemplate, getExperiment, startExperiment, stopExperiment, TERMINAL_STATES, GamedayError, type ExperimentView } from "./fis";
import { judgeRun, type ServingSample } from "./judge";
import type { RunResult } from "../drill/run-scenario";
import type { Death } from "../drill/cuts";
import { alertNames } from "../drill/alerts";
import type { PrometheusHandle } from "../engines/prometheus";

/** What the runner watches, the same questions whatever answers them. */
export interface GamedayView {
  /** The AZs the public name serves now (DNS answer, or healthy Route53 checks); null when it could not be read. */
  servingAzs(): Promise<string[] | null>;
  /** The fleet as Redis has it (AZ states, tier, leader, fencing tokens); `t` is set by the runner. */
  fleet(): Promise<Omit<FleetSample, "t">>;
  close(): Promise<void>;
}

export interface GamedayRunOptions {
  fis: FisClient;
  scenario: string;
  /** The stack's `Environment` tag (`prod`; `drill` in the lab). */
  environment: string;
  /** The AZ the scenario takes (`llm-ha:gameday.az`; the Redis AZ for `redis-failover`); null for none (`leader-kill`, `redis-latency`). */
  az: string | null;
  /** Every AZ of the stack that should be serving (active ones). */
  activeAzs: string[];
  view: GamedayView;
  /** The game day's clients through the public edge (`clients.ts`). */
  clients: TrafficClient[];
  model: string;
  requestTimeoutMs: number;
  /** ms on the run's clock (0 at the start). */
  now(): number;
  progress(line: string): void;
  /** Ends the experiment early (StopExperiment), e.g. on Ctrl-C. */
  signal?: AbortSignal;
  /** Sampling period of the view. Default 500 ms. */
  sampleMs?: number;
  /** How long the fleet may take to be steady before the start is refused. Default 60 s. */
  steadyWaitMs?: number;
  /** Traffic before the start, the calm the report shows. Default 5 s. */
  leadMs?: number;
  /** How long after the experiment's end the AZ may take to come back. Default 10 min. */
  recoveryWaitMs?: number;
  /** How often the experiment is read. Default 1 s. */
  pollMs?: number;
  /** The timeline the clients write into (the SDK client records continued streams there); default a new one. */
  timeline?: Timeline;
  /** What died with the fault, on the run's clock, once it is over (the lab knows; the cloud passes none). */
  deaths?(): Death[];
  /** The stack's Prometheus (any URL with the shipped rules): the alerts that fired during the run go in the report. */
  prometheus?: Pick<PrometheusHandle, "fired">;
}

export interface GamedayRun {
  runId: string;
  templateId: string;
  templateDescription: string;
  experiment: ExperimentView;
  /** The experiment ended before its actions did: stopped by someone or by a stop condition. */
  stoppedEarly: boolean;
  result: RunResult;
  tl: Timeline;
  serving: ServingSample[];
}

/** The fleet is steady: every active AZ served and published OK, a leader holds the lease. */
function steadyNow(s: ServingSample | undefined, f: FleetSample | undefined, active: string[]): string | null {
  if (!s || s.azs === null) return "the public name's AZs could not be read";
  const missing = active.filter((a) => !s.azs!.includes(a));
  if (missing.length) return `not served: ${missing.join(", ")}`;
  if (!f || f.leader === undefined) return "Redis did not answer";
  if (!f.leader) return "no leader holds the lease";
  const notOk = active.filter((a) => f.azState[a] !== undefined && f.azState[a] !== "OK");
  if (notOk.length) return `AZ state not OK: ${notOk.map((a) => `${a}=${f.azState[a]}`).join(", ")}`;
  return null;
}

export async function runGameday(o: GamedayRunOptions): Promise<GamedayRun> {
  const runId = randomUUID();
  o.progress(`finding the FIS template of ${o.scenario} in ${o.environment}`);
  const template = await findTemplate(o.fis, o.scenario, o.environment);
  o.progress(`template ${template.id}: ${template.description}`);
  const tl = o.timeline ?? emptyTimeline();
  const serving: ServingSample[] = [];
  const watch = new Loop(
    o.sampleMs ?? 500,
    async () => {
      const t = o.now();
      const [azs, f] = await Promise.all([o.view.servingAzs().catch(() => null), o.view.fleet().catch(() => null)]);
      serving.push({ t, azs: azs ? [...azs].sort() : null });
      // The report's picture draws the public answer per AZ lane (its "address" is the AZ's name here).
      tl.samples.push({ t, nodes: {}, l1: {}, dns: azs ? [...azs].sort() : null });
      tl.fleet.push({ t, ...(f ?? { azState: {}, tier: null, tokens: {}, standbyWake: false, suspect: "" }) });
    },
    () => undefined,
  );
  watch.start();
  const traffic = startTraffic({ clients: o.clients, timeline: tl, now: o.now, model: o.model, timeoutMs: o.requestTimeoutMs });
  let experiment: ExperimentView | null = null;
  try {
    // Refused on a fleet that is not whole: a fault on top of another teaches nothing and risks the service.
    const steadyBy = o.now() + (o.steadyWaitMs ?? 60_000);
    let why: string | null = "not sampled yet";
    while (o.now() < steadyBy) {
      await sleep(o.sampleMs ?? 500);
      why = steadyNow(serving.at(-1), tl.fleet.at(-1), o.activeAzs);
      if (!why) break;
    }
    if (why) throw new GamedayError(`the fleet is not steady (${why}): no experiment started`);
    o.progress(`fleet steady (${o.activeAzs.join(", ")} served and OK, leader ${tl.fleet.at(-1)?.leader}); ${((o.leadMs ?? 5000) / 1000).toFixed(0)} s of traffic before the start`);
    await sleep(o.leadMs ?? 5000);
    if (o.signal?.aborted) throw new GamedayError("stopped before the experiment started");
    experiment = await startExperiment(o.fis, template.id, runId);
    const startedAt = o.now();
    const offset = Date.now() - o.now();
    o.progress(`experiment ${experiment.id} ${experiment.status} (run ${runId})`);
    let stopAsked = false;
    let last = "";
    while (!TERMINAL_STATES.has(experiment.status)) {
      if (o.signal?.aborted && !stopAsked) {
        stopAsked = true;
        o.progress(`stopping experiment ${experiment.id}`);
        experiment = await stopExperiment(o.fis, experiment.id);
      }
      await sleep(o.pollMs ?? 1000);
      experiment = await getExperiment(o.fis, experiment.id);
      const line = `${experiment.status}${experiment.actions.length ? ` (${experiment.actions.map((a) => `${a.name} ${a.status}`).join(", ")})` : ""}`;
      if (line !== last) o.progress(`experiment ${experiment.id}: ${line}${experiment.reason ? `: ${experiment.reason}` : ""}`);
      last = line;
    }
    // On the run's clock: the fault from the first action's start, the heal at the last one's end (or the experiment's).
    const injectAt = experiment.actionsStartedAt !== null ? experiment.actionsStartedAt - offset : startedAt;
    const healAt = (experiment.actionsEndedAt ?? experiment.endedAt ?? Date.now()) - offset;
    const stoppedEarly = experiment.status !== "completed";
    o.progress(`experiment ${experiment.status}${experiment.reason ? `: ${experiment.reason}` : ""}; waiting for ${o.az ?? "the fleet"} to come back`);
    const backBy = o.now() + (o.recoveryWaitMs ?? 600_000);
    while (o.now() < backBy && steadyNow(serving.at(-1), tl.fleet.at(-1), o.activeAzs) !== null) await sleep(o.sampleMs ?? 500);
    await sleep(1000);
    await traffic.stop();
    watch.stop();
    const result = judgeRun({ scenario: o.scenario, az: o.az, activeAzs: o.activeAzs, tl, serving, injectAt: Math.max(0, injectAt), healAt: Math.max(0, healAt), endAt: o.now(), deaths: o.deaths?.() });
    if (o.prometheus) {
      // The shipped rules' verdict on the run, as the drill records it per scenario.
      const fired = await o.prometheus.fired(offset + result.injectAt, offset + result.endAt).catch((err: Error) => {
        result.notes.push(`alerts not read: ${err.message}`);
        return null;
      });
      if (fired) result.extra.alerts = alertNames(fired).join(", ") || "none";
    }
    if (stoppedEarly) result.notes.push(`experiment ${experiment.status}${experiment.reason ? `: ${experiment.reason}` : ""}`);
    return { runId, templateId: template.id, templateDescription: template.description, experiment, stoppedEarly, result, tl, serving };
  } finally {
    // Never leave a fault running behind an error of ours: a started experiment not seen to end is stopped.
    if (experiment && !TERMINAL_STATES.has(experiment.status)) {
      o.progress(`stopping experiment ${experiment.id} (the runner is ending before it did)`);
      await stopExperiment(o.fis, experiment.id).catch((err: Error) => o.progress(`could not stop experiment ${experiment?.id}: ${err.message}; stop it with aws fis stop-experiment --id ${experiment?.id}`));
    }
    await traffic.stop();
    watch.stop();
    await o.view.close().catch(() => undefined);
  }
}
