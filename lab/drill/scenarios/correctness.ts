/**
 * The correctness scenarios: wrong answers with HTTP 200.
 * - `silent-corruption`: one node's server starts answering wrongly, still 200 — `garbage` (fluent
 *   wrong text), `drift` (one token in k), `nan` (NaN logprobs), one mode a run in turn. Its agent's
 *   canaries must take it out (≤ 30 s, stretch ≤ 10 s), with no failed request; the wrong answers
 *   it served before that are counted. Healing the fault is not enough: it stays out until its
 *   server restarts and its answers match again. The baselines' `/health` checks never see it.
 * - `canary-noise`: every active server answers with realistic nondeterminism within tolerance
 *   (logprob jitter, a late token differing) for at least 1,000 canaries: no node may leave.
 */
import type { SimNode } from "../../sim/sim-node";
import type { Corruption } from "../../sim/fake-inference/greedy";
import { CONFIG_DEFAULTS as DEFAULTS } from "../../../agent/src/config/load";
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { dnsChanges, firstAfter, l1Removed, removedBetween } from "../timeline";
import { blank, finish, healthy, localRows, mark, nextVictim, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The modes of `silent-corruption`, one a run in turn. */
export const CORRUPTION_MODES: readonly Corruption[] = ["garbage", "drift", "nan"];
/** Canaries `canary-noise` waits for across the fleet. */
export const NOISE_CANARIES = 1000;
/** The fakes' nondeterminism in `canary-noise` (logprobs off by up to 0.04, a late token differing 4 times in 5). */
const NOISE = 0.8;

/** A fake's count of wrong answers served (completions other than canaries while corrupted); null when it does not answer. */
async function corruptServed(n: SimNode): Promise<number | null> {
  const v = (await n.stats())?.corruptServed;
  return typeof v === "number" ? v : null;
}

/** The sum of an agent's counter over its labels (its `/metrics`); null when it does not answer. */
async function agentCounter(n: SimNode, name: string): Promise<number | null> {
  try {
    const r = await fetch(`${n.agentUrl}/metrics`, { signal: AbortSignal.timeout(1000) });
    const text = await r.text();
    return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce((a, m) => a + Number(m[1]), 0);
  } catch {
    return null;
  }
}


/** The agent's canary phase as `/status` shows it. */
async function canaryPhase(n: SimNode): Promise<string> {
  const s = await n.agentGet("/status").catch(() => null);
  return ((s?.body.canary as { phase?: string } | undefined)?.phase ?? "none") as string;
}

/** Waits until the agent's canaries have judged at least one round against an expectation (phase `ok`). */
async function canariesOk(ctx: ScenarioContext, n: SimNode, ms: number): Promise<boolean> {
  const end = ctx.now() + ms;
  while (ctx.now() < end) {
    if ((await canaryPhase(n)) === "ok") return true;
    await sleep(250);
  }
  return false;
}

export async function runSilentCorruption(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const mode = CORRUPTION_MODES[(run - 1) % CORRUPTION_MODES.length];
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  // The fleet must have learned the expected answers (the leader publishes them from the majority).
  if (!(await canariesOk(ctx, n, 20_000))) r.notes.push(`${n.id}'s canaries not judged against an expectation before injection`);
  const before = await corruptServed(n);
  const row = rowOf(ctx, n);
  r.injectAt = mark(ctx, "inject", `${mode} answers on ${n.id}`);
  await n.setMode({ corruption: mode });
  await until(ctx, 35_000, (s) => l1Removed(s.l1[row]));
  const servedWrong = await corruptServed(n);
  await sleep(300);
  // The fault goes away by itself: the node must stay out until its server restarts.
  await n.setMode({ corruption: "none" });
  await until(ctx, 3 * DRILL_TIMING.canaryIntervalMs + 500, () => false);
  r.extra.heldUntilRestart = l1Removed(ctx.observer.latest()?.l1[row]) ? 1 : 0;
  r.healAt = mark(ctx, "heal", `restart ${n.id}'s server`);
  await n.crashInference();
  await n.startInference("ready");
  if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, n)))) r.notes.push(`${n.id} did not recover at full weight in 30 s after the restart`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  await sleep(300);
  r.endAt = ctx.now();
  // Detection and L1 are timed to the first removal, before the heal (the scenario's own restart is not a failure of the canaries).
  const injected = r.healAt;
  r.healAt = r.injectAt + (firstAfter(ctx.tl.samples, r.injectAt, (s) => l1Removed(s.l1[row]), injected) ?? injected - r.injectAt) + 300;
  finish(ctx, r, [n], l1Removed);
  r.healAt = injected;
  r.extra.mode = mode;
  r.extra.wrongServed = before !== null && servedWrong !== null ? servedWrong - before : null;
  r.extra.stretch10s = r.l1Ms !== null && r.l1Ms <= 10_000 ? 1 : 0;
  return r;
}

export async function runCanaryNoise(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const nodes = ctx.stack.running().filter((n) => !ctx.stack.azOf(n).standby);
  const sum = async (name: string): Promise<number> => (await Promise.all(nodes.map((n) => agentCounter(n, name)))).reduce<number>((a, x) => a + (x ?? 0), 0);
  const count = (): Promise<number> => sum("llmha_canary_requests_total");
  const start = await count();
  const busyStart = await sum("llmha_canary_seconds_total");
  r.injectAt = mark(ctx, "inject", `nondeterminism ${NOISE} on ${nodes.length} servers`);
  await Promise.all(nodes.map((n) => n.setMode({ noise: NOISE })));
  let sent = 0;
  const end = ctx.now() + 240_000;
  while (ctx.now() < end && sent < NOISE_CANARIES) {
    await sleep(2000);
    sent = (await count()) - start;
  }
  const busy = (await sum("llmha_canary_seconds_total")) - busyStart;
  const windowS = (ctx.now() - r.injectAt) / 1000;
  r.healAt = mark(ctx, "heal", "nondeterminism off");
  await Promise.all(nodes.map((n) => n.setMode({ noise: 0 })));
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  const removed = removedBetween(ctx.tl, localRows(ctx), r.injectAt, r.endAt);
  r.falseFailovers = removed.length + dnsChanges(ctx.tl, r.injectAt, r.endAt);
  if (removed.length) r.notes.push(`false drains: ${removed.join(",")}`);
  r.victims = nodes.map((n) => n.id);
  r.extra.canaries = sent;
  r.extra.canariesShort = Math.max(0, NOISE_CANARIES - sent);
  r.extra.seconds = Math.round((r.healAt - r.injectAt) / 1000);
  // The cost: the servers' time on canaries as a share of wall time, at the drill's
  // cadence, and scaled to the production default (one round a minute instead of one a second).
  const share = nodes.length && windowS > 0 ? busy / (nodes.length * windowS) : null;
  r.extra.canaryMsPerRound = sent > 0 ? Math.round((busy * 1000 * 3) / sent) : null;
  r.extra.canaryShareDrillPct = share === null ? null : Math.round(share * 10_000) / 100;
  r.extra.canaryShareProdPct = share === null ? null : Math.round(share * (DRILL_TIMING.canaryIntervalMs / DEFAULTS.canaryIntervalMs) * 1_000_000) / 10_000;
  r.notes.push(`canary cost: ${r.extra.canaryMsPerRound ?? "n/a"} ms of server time a round (3 requests); ${r.extra.canaryShareDrillPct ?? "n/a"}% of each server's time at the drill's ${DRILL_TIMING.canaryIntervalMs} ms cadence, ${r.extra.canaryShareProdPct ?? "n/a"}% at the default ${DEFAULTS.canaryIntervalMs / 1000} s`);
  return r;
}
