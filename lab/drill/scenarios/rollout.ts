/**
 * The leader's rollout in the drill (agent/src/fleet/rollout/): an operator's request (the Redis
 * write `llm-ha rollout start` makes) moves the active AZs from the fleet's revision
 * (`DRILL_REVISION`) to a new one through the local cloud (lab/drill/local-rollout.ts), whose
 * profile says what the new revision is like:
 *
 * - `rollout-good`: the same server under a new name: every step bakes, it ends `promoted`;
 * - `rollout-bad-weights`: the new revision answers fluent garbage (`corruption: garbage`); the
 *   operator's recorded canary answers for it (from a validation run: the old revision's, which a
 *   good build of the new one gives) let the canary gate see it: rolled back at the first step;
 * - `rollout-slow`: the new revision 30 % slower at p50 (the fleet's base latency raised to
 *   `SLOW_BASE_MS` for this scenario so that 30 % is well above the noise and the gate's 5 ms
 *   floor): the latency gate fails and the rollout rolls back;
 * - `rollout-leader-kill`: the leader's agent SIGKILLed while the second step switches: the next
 *   leader reads the fenced hash and goes on (or rolls back).
 *
 * Each run starts from a steady fleet on `DRILL_REVISION`, samples the `rollout` hash and the
 * nodes' revisions every 250 ms (rollout-watch.ts), waits for a terminal phase (bounded), and
 * ends with the fleet back on `DRILL_REVISION` (a rollout back, bake 0, when it was promoted)
 * and steady.
 */
import { RolloutCapture } from "./rollout-capture";
import { readExpectations, recordExpectation } from "../../../agent/src/node/canary/store";
import { isActive } from "../../../agent/src/fleet/rollout/plan";
import type { RolloutState } from "../../../agent/src/fleet/rollout/types";
import { Loop } from "../../../agent/src/util/loop";
import { sleep } from "../../../agent/src/util/net";
import { DEFAULT_SETTINGS } from "../../sim/fake-inference/settings";
import type { LocalCloud } from "../local-cloud";
import type { RevisionProfile } from "../local-rollout";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_MODEL, DRILL_REVISION, DRILL_ROLLOUT_ENV, DRILL_TIMING } from "../settings";
import { l1Removed, type FleetSample } from "../timeline";
import { leaderNode, staleWrites } from "./fleet";
import { azsInFlux, azsThatServed, exposureMs, firstRollback, maxAzsInFlux, nodesThatServed, ROLLOUT_SAMPLE_MS, RolloutWatch, terminalSample, type RolloutSample } from "./rollout-watch";
import { blank, finish, mark, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The fleet's base latency in `rollout-slow` (the drill's is the fake's 5 ms), and the new revision's factor. */
export const SLOW_BASE_MS = 150;
export const SLOW_FACTOR = 1.3;
const BAKE_MS = Number(DRILL_ROLLOUT_ENV.LLMHA_ROLLOUT_BAKE_MS);
/** Probes the agent's window keeps (`LLMHA_PROBE_WINDOW`, default 20): filled at the new base latency before the slow rollout starts. */
const PROBE_WINDOW_MS = 20 * DRILL_TIMING.intervalMs;

type Kind = "good" | "bad" | "slow" | "kill";

const PLANS: Readonly<Record<Kind, { to: string; profile: RevisionProfile; base?: number }>> = {
  good: { to: "rev-2", profile: {} },
  bad: { to: "rev-2-bad", profile: { corruption: "garbage" } },
  slow: { to: "rev-2-slow", profile: { latencyMs: Math.round(SLOW_BASE_MS * SLOW_FACTOR) }, base: SLOW_BASE_MS },
  kill: { to: "rev-2", profile: {} },
};

const fmt = (ms: number | null | undefined): string => (typeof ms !== "number" ? "never" : `${(ms / 1000).toFixed(1)}s`);

/** Up with weight in its own AZ's proxy at the observer's latest sample. */
function inRotation(ctx: ScenarioContext, id: string): boolean {
  const n = ctx.stack.nodes.find((x) => x.id === id);
  const row = n ? ctx.tl.samples.at(-1)?.l1[rowOf(ctx, n)] : undefined;
  return !!row && row.status.startsWith("UP") && row.weight > 0;
}

/**
 * The operator's recorded canary answers for the new revision (`llm-ha canary record` after a
 * validation run): the old revision's, which the fake gives for any revision that is not
 * corrupted. Returns the model key recorded, null when the old revision has no expectation yet.
 */
async function recordAnswers(watch: RolloutWatch, to: string): Promise<string | null> {
  const prefix = `${DRILL_MODEL}@${DRILL_REVISION}`;
  const all = await readExpectations(watch.redis, watch.keys);
  const key = Object.keys(all).find((k) => k === prefix || k.startsWith(`${prefix} `));
  if (!key) return null;
  const next = `${DRILL_MODEL}@${to}${key.slice(prefix.length)}`;
  await recordExpectation(watch.redis, watch.keys, next, all[key].answers, Date.now());
  return next;
}

/** Every node's server at `latencyMs` (null: the fake's default), live and for its next starts. */
async function setLatency(ctx: ScenarioContext, cloud: LocalCloud, latencyMs: number | null): Promise<void> {
  for (const n of ctx.stack.nodes) {
    const { latencyMs: _old, ...rest } = n.opts.inference ?? {};
    n.opts.inference = { ...rest, revision: cloud.rollout.revisionOf(n.id) || DRILL_REVISION, ...(latencyMs === null ? {} : { latencyMs }) };
  }
  await Promise.all(ctx.stack.running().map((n) => n.setMode({ latencyMs: latencyMs ?? DEFAULT_SETTINGS.latencyMs }).catch(() => undefined)));
}

/** Wrong answers each node served while on `revision` (the fake's `corruptServed`, its highest count seen; a restart starts it again). */
class WrongAnswers {
  readonly byNode = new Map<string, number>();
  private readonly loop: Loop;
  constructor(ctx: ScenarioContext, cloud: LocalCloud, revision: string) {
    this.loop = new Loop(ROLLOUT_SAMPLE_MS, async () => {
      const on = ctx.stack.running().filter((n) => cloud.rollout.revisionOf(n.id) === revision && !cloud.rollout.switching(n.id));
      await Promise.all(on.map(async (n) => {
        const c = (await n.stats().catch(() => null))?.corruptServed ?? 0;
        if (c > (this.byNode.get(n.id) ?? 0)) this.byNode.set(n.id, c);
      }));
    }, () => undefined);
    this.loop.start();
  }
  stop(): void {
    this.loop.stop();
  }
}

/** The leader's agent, SIGKILLed once the second step has asked a node to switch; its agent started again once another leads. */
async function killLeaderMidRollout(ctx: ScenarioContext, watch: RolloutWatch, id: string, r: RunResult): Promise<void> {
  const mid = (s: RolloutSample | null): boolean => !!s && s.id === id && s.phase === "switching" && (s.state?.step ?? 0) >= 1 && (s.state?.steps[s.state.step]?.switched.length ?? 0) > 0;
  if (!(await until(ctx, 120_000, () => mid(watch.latest()) || terminalSample(watch.samples, id) !== null)) || !mid(watch.latest())) {
    r.notes.push("the rollout never reached a second step switching: no leader killed");
    r.extra.notKilled = 1;
    return;
  }
  const victim = leaderNode(ctx);
  if (!victim) {
    r.notes.push("no leader in Redis to kill");
    r.extra.notKilled = 1;
    return;
  }
  const old = ctx.observer.latestFleet()?.leader ?? null;
  const killAt = mark(ctx, "inject", `${r.scenario}: SIGKILL the leader ${victim.id} (step ${(watch.latest()?.state?.step ?? 0) + 1} switching)`);
  await victim.killAgent("SIGKILL");
  r.extra.notKilled = 0;
  r.extra.killedLeader = victim.id;
  r.extra.killAtMs = killAt - r.injectAt;
  const newLeader = (f: FleetSample): boolean => f.t >= killAt && typeof f.leader === "string" && f.leader !== old;
  await until(ctx, DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs + 10_000, () => ctx.tl.fleet.some(newLeader));
  const f = ctx.tl.fleet.find(newLeader);
  r.extra.newLeader = f?.leader ?? null;
  r.leaderMs = f ? f.t - killAt : null;
  await victim.startAgent();
  r.extra.staleWrites = staleWrites(ctx.tl.fleet, killAt);
}

/** Stepped through each step's nodes: `canary az-a (gpu-a1), az az-a (gpu-a2), az az-b (gpu-b1,gpu-b2)`. */
const stepsText = (s: RolloutState | null): string => (s ? s.steps.map((x) => `${x.kind} ${x.az} (${x.nodes.join(",")})`).join(", ") : "-");

/**
 * After the run: an active rollout aborted, a promoted one rolled out back to `DRILL_REVISION`
 * (bake 0), the base latency back to the drill's; notes when the fleet is not on it again.
 */
async function restore(ctx: ScenarioContext, cloud: LocalCloud, watch: RolloutWatch, id: string, r: RunResult, kind: Kind): Promise<void> {
  let s = await watch.read().catch(() => null);
  if (s?.id === id && s.state && isActive(s.state)) {
    r.notes.push(`rollout ${id} still ${s.phase} at the bound: aborted by the drill`);
    await watch.request({ op: "abort", id });
    await until(ctx, 120_000, () => terminalSample(watch.samples, id) !== null);
    s = await watch.read().catch(() => null);
  }
  // Two tries: a rollout back that a gate rolls back leaves the fleet where it was, and the next run could not start.
  for (let i = 1; i <= 2 && s?.current && s.current !== DRILL_REVISION; i++) {
    const back = `${id}-back${i}`;
    // The leader starts no rollout at tier L2 or above (a 2-node AZ's last switch, a standby still up): steady first.
    await steady(ctx, 60_000);
    const t0 = ctx.now();
    await watch.request({ op: "start", id: back, to: DRILL_REVISION, bakeMs: 0 });
    await until(ctx, 180_000, () => terminalSample(watch.samples, back) !== null);
    const end = terminalSample(watch.samples, back);
    r.extra.restoreMs = end ? end.t - t0 : null;
    if (end?.phase !== "promoted") r.notes.push(`the rollout back to ${DRILL_REVISION} (try ${i}) ended ${end?.phase ?? "not at all in 180 s"}${end?.state ? `: ${end.state.reason.slice(0, 160)}` : ""}`);
    s = await watch.read().catch(() => null);
  }
  if (kind === "slow") {
    cloud.rollout.setProfiles({ [DRILL_REVISION]: {} });
    await setLatency(ctx, cloud, null);
  }
  const off = ctx.stack.running().filter((n) => cloud.rollout.revisionOf(n.id) !== DRILL_REVISION);
  if (off.length) r.notes.push(`after the run ${off.map((n) => `${n.id}=${cloud.rollout.revisionOf(n.id)}`).join(",")} (not ${DRILL_REVISION})`);
}

async function runRollout(ctx: ScenarioContext, spec: ScenarioSpec, run: number, kind: Kind): Promise<RunResult> {
  const r = blank(spec.name, run);
  const cloud = ctx.stack.cloud;
  if (!cloud) {
    r.notMeasured = "no local cloud acting on nodes (needs the standby AZ: --nodes 5 or more)";
    return r;
  }
  const plan = PLANS[kind];
  if (!(await steady(ctx))) r.notes.push("fleet not steady before the rollout");
  const watch = new RolloutWatch(ctx, cloud, (nodeId) => inRotation(ctx, nodeId));
  const before = await watch.read().catch(async (err: Error) => {
    await watch.stop();
    throw err;
  });
  if (before.state && isActive(before.state)) {
    await watch.stop();
    r.notMeasured = `rollout ${before.id} is ${before.phase} before the run`;
    return r;
  }
  if (before.current && before.current !== DRILL_REVISION) {
    await watch.stop();
    r.notMeasured = `the fleet's revision is ${before.current}, not ${DRILL_REVISION}`;
    return r;
  }
  if (ctx.stack.running()[0]?.opts.env?.LLMHA_ROLLOUT_BAKE_MS !== DRILL_ROLLOUT_ENV.LLMHA_ROLLOUT_BAKE_MS) r.notes.push("the agents run without the rollout scenarios' settings (bake and load time-out)");
  cloud.rollout.setProfiles({ [DRILL_REVISION]: plan.base ? { latencyMs: plan.base } : {}, [plan.to]: plan.profile });
  const id = `drill-${spec.name}-${run}-${Date.now().toString(36)}`;
  const capture = kind === "good" && run === 1 ? new RolloutCapture(ctx) : null;
  const wrong = kind === "bad" ? new WrongAnswers(ctx, cloud, plan.to) : null;
  watch.start();
  try {
    if (plan.base) {
      await setLatency(ctx, cloud, plan.base);
      // The agents' probe windows full of the new base latency before the gate compares.
      await sleep(PROBE_WINDOW_MS + 2 * DRILL_TIMING.intervalMs);
    }
    const key = await recordAnswers(watch, plan.to);
    if (!key) r.notes.push(`no canary expectation for ${DRILL_MODEL}@${DRILL_REVISION} to record for ${plan.to}`);
    r.injectAt = mark(ctx, "inject", `rollout ${id}: ${DRILL_REVISION} → ${plan.to}`);
    // The first good run goes through the real CLI, and what an operator sees is kept (rollout-capture.ts).
    if (!capture || !(await capture.start(id, plan.to))) {
      if (capture) r.notes.push(`llm-ha rollout start refused or failed (see ${capture.file}): the request written directly`);
      await watch.request({ op: "start", id, to: plan.to });
    }
    if (!(await until(ctx, 10_000, () => watch.latest()?.id === id))) {
      const refused = await watch.redis.hget(watch.keys.rollout, "refused");
      r.notes.push(`the leader did not start ${id} within 10 s${refused ? `: ${refused}` : ""}`);
    }
    if (kind === "kill") await killLeaderMidRollout(ctx, watch, id, r);
    if (capture) {
      const baking = (): boolean => { const s = watch.latest(); return !!s && s.id === id && s.phase === "baking" && (s.state?.step ?? 0) >= 1; };
      if (await until(ctx, 120_000, () => baking() || terminalSample(watch.samples, id) !== null) && baking()) await capture.midway();
    }
    const bound = 240_000;
    if (!(await until(ctx, bound, () => terminalSample(watch.samples, id) !== null))) r.notes.push(`rollout ${id} not in a terminal phase within ${bound / 1000} s`);
    if (capture) await capture.end();
    await sleep(300);
    r.healAt = r.endAt = ctx.now();
    figures(ctx, cloud, watch, r, id, plan.to, kind, wrong);
  } finally {
    wrong?.stop();
    await restore(ctx, cloud, watch, id, r, kind);
    await watch.stop();
    if (!(await steady(ctx, 60_000))) r.notes.push("fleet not steady again 60 s after the run's clean-up");
  }
  return r;
}

function figures(ctx: ScenarioContext, cloud: LocalCloud, watch: RolloutWatch, r: RunResult, id: string, to: string, kind: Kind, wrong: WrongAnswers | null): void {
  const samples = watch.samples;
  const term = terminalSample(samples, id);
  const last = [...samples].reverse().find((s) => s.id === id) ?? null;
  const state = (term ?? last)?.state ?? null;
  const rb = firstRollback(samples, id);
  const asked = [...new Set((state?.steps ?? []).flatMap((s) => Object.keys(s.askedAt ?? {})))].sort();
  const victims = ctx.stack.nodes.filter((n) => asked.includes(n.id));
  finish(ctx, r, victims, l1Removed);
  const azs = azsThatServed(samples, to, r.injectAt, r.endAt);
  const phase = (term ?? last)?.phase ?? "none";
  r.extra.phase = phase;
  r.extra.steps = state?.steps.length ?? null;
  r.extra.plan = stepsText(state);
  r.extra.terminalMs = term ? term.t - r.injectAt : null;
  r.extra.notTerminal = term ? 0 : 1;
  r.extra.gate = rb?.cause ?? null;
  r.extra.gateMs = rb ? rb.t - r.injectAt : null;
  r.extra.gateStep = rb ? rb.step + 1 : null;
  r.extra.newRevisionAzs = azs.length;
  r.extra.maxAzsInFlux = maxAzsInFlux(samples, r.injectAt, r.endAt);
  r.extra.staleSwitches = cloud.rollout.switches.filter((x) => x.rolloutId === id && x.outcome === "refused-stale").length;
  if (kind === "good" || kind === "kill") {
    r.extra.notPromoted = phase === "promoted" ? 0 : 1;
    // Promoted, the standby AZ (scaled to zero, so in no step) must boot on the new revision: the fleet allows no other.
    const standby = ctx.stack.standby ? ctx.stack.nodes.filter((n) => n.az === ctx.stack.standby!.name) : [];
    const old = phase === "promoted" ? standby.filter((n) => cloud.rollout.revisionOf(n.id) !== to) : [];
    r.extra.standbyNotOnNew = old.length;
    if (old.length) r.notes.push(`promoted, but the standby's ${old.map((n) => `${n.id}=${cloud.rollout.revisionOf(n.id)}`).join(",")} would boot on the old revision`);
  }
  if (kind === "bad" || kind === "slow") r.extra.notRolledBack = phase === "rolled-back" ? 0 : 1;
  if (kind === "slow") r.extra.notLatencyGate = rb?.cause === "latency" ? 0 : 1;
  const fluxAt = samples.filter((s) => s.t >= r.injectAt && s.t <= r.endAt && azsInFlux(s.nodes).length > 1).map((s) => `${fmt(s.t - r.injectAt)} ${azsInFlux(s.nodes).join("+")}`);
  if (fluxAt.length) r.notes.push(`two AZs in flux at ${fluxAt.slice(0, 3).join(", ")}`);
  const gate = rb ? `; ${rb.cause} gate failed at ${fmt(r.extra.gateMs as number)} in step ${rb.step + 1} (${rb.reason.slice(0, 200)})` : "";
  let extra = "";
  if (wrong) {
    const first = state?.steps[0]?.nodes ?? [];
    const served = [...wrong.byNode.entries()].filter(([, c]) => c > 0);
    r.extra.wrongAnswers = served.reduce((a, [, c]) => a + c, 0);
    r.extra.wrongOffFirstStep = served.filter(([n]) => !first.includes(n)).length;
    r.extra.exposureMs = exposureMs(samples, to, ROLLOUT_SAMPLE_MS, r.injectAt, r.endAt);
    extra = `; wrong answers ${r.extra.wrongAnswers} (${served.map(([n, c]) => `${n}=${c}`).join(",") || "none"}; probes and canaries included), ${nodesThatServed(samples, to, r.injectAt, r.endAt).join(",") || "no node"} in rotation on ${to} for ${fmt(r.extra.exposureMs)}`;
  }
  if (kind === "kill") {
    extra = r.extra.notKilled ? "; no leader killed" : `; leader ${r.extra.killedLeader} killed at ${fmt(r.extra.killAtMs as number)}, ${r.extra.newLeader ?? "no one"} led ${fmt(r.leaderMs)} later; stale writes ${r.extra.staleWrites}, stale switches ${r.extra.staleSwitches}`;
  }
  r.extra.figures =
    `${phase} in ${fmt(r.extra.terminalMs as number | null)} over ${r.extra.steps ?? "?"} steps [${r.extra.plan}] (bake ${BAKE_MS / 1000} s)${gate}; ` +
    `AZs that served ${to}: ${azs.join(",") || "none"}; at most ${r.extra.maxAzsInFlux} AZ(s) in flux; failed requests ${r.failed}${extra}`;
}

export const ROLLOUT_RUNS: readonly [string, (ctx: ScenarioContext, spec: ScenarioSpec, run: number) => Promise<RunResult>][] = [
  ["rollout-good", (ctx, spec, run) => runRollout(ctx, spec, run, "good")],
  ["rollout-bad-weights", (ctx, spec, run) => runRollout(ctx, spec, run, "bad")],
  ["rollout-slow", (ctx, spec, run) => runRollout(ctx, spec, run, "slow")],
  ["rollout-leader-kill", (ctx, spec, run) => runRollout(ctx, spec, run, "kill")],
];
