/**
 * Planned moves cut nothing. `node-drain`: one active node drained as a scale-in or
 * a node drain does it — its agent answers `drain` and leaves, the inference server stops once
 * the requests it holds have finished — then booted again. `rolling-restart`: the inference server of every
 * node of one active AZ in turn, the next only once the last is back at full weight, as a
 * rolling update of the AZ's inference Deployment does (maxUnavailable 1): the shipped preStop
 * hook (`contracts/drain.ts`) writes the drain file, the node's agent answers `drain`, the hook
 * waits until the server holds nothing, then SIGTERM and a new server. Judged under the steady traffic and the SDK-default
 * class's ~1 s streams: no failed request in either, no stream cut, no other node out of
 * rotation and no DNS change.
 */
import type { SimNode } from "../../sim/sim-node";
import type { ScenarioSpec } from "../scenarios";
import { dnsChanges, firstAfter, l1Removed, removedBetween, type Sample } from "../timeline";
import { blank, finish, healthy, localRows, mark, nextVictim, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Waits (30 s at most) for `n` back at full weight after its start at `since`: whether it came, and when. */
async function backAfter(ctx: ScenarioContext, n: SimNode, since: number): Promise<{ back: boolean; backMs: number | null }> {
  const isBack = (s: Sample): boolean => healthy(ctx, s, n);
  const back = await until(ctx, 30_000, isBack);
  return { back, backMs: firstAfter(ctx.tl.samples, since, isBack) };
}

/** Drains and stops one node, boots it again and waits for it at full weight; its drain time, in-flight count at the start and whether it came back. */
async function drainAndBoot(ctx: ScenarioContext, n: SimNode): Promise<{ drainMs: number; inFlight: number | null; back: boolean; backMs: number | null }> {
  const inFlight = await n.inFlight();
  const t0 = ctx.now();
  await n.halt();
  const drainMs = ctx.now() - t0;
  const bootAt = ctx.now();
  await n.boot();
  return { drainMs, inFlight, ...(await backAfter(ctx, n, bootAt)) };
}

export async function runNodeDrain(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const victim = nextVictim(ctx);
  r.injectAt = mark(ctx, "inject", `drain ${victim.id}`);
  const d = await drainAndBoot(ctx, victim);
  r.healAt = r.injectAt + d.drainMs;
  ctx.tl.marks.push({ t: r.healAt, kind: "heal", label: `boot ${victim.id}` });
  if (!d.back) r.notes.push(`${victim.id} not back at full weight in 30 s`);
  r.endAt = ctx.now();
  finish(ctx, r, [victim], l1Removed);
  r.recoveryMs = d.backMs;
  r.extra.drainMs = d.drainMs;
  r.extra.inFlightAtDrain = d.inFlight;
  r.extra.figures = `${victim.id} drained and stopped in ${(d.drainMs / 1000).toFixed(2)}s (${d.inFlight ?? "?"} requests in flight at the start); failed: plain ${r.failed}, sdk ${r.failedSdk}; streams cut ${r.cuts.all.cut}`;
  r.notes.push(r.extra.figures);
  return r;
}

export async function runRollingRestart(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs.filter((a) => !a.standby)[(run - 1) % ctx.stack.azs.filter((a) => !a.standby).length];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  r.injectAt = mark(ctx, "inject", `rolling restart of ${az.name}`);
  const steps: string[] = [];
  const backs: (number | null)[] = [];
  for (const n of victims) {
    const inFlight = await n.inFlight();
    const { preStopMs } = await n.restartInferencePlanned();
    const { back, backMs } = await backAfter(ctx, n, ctx.now());
    backs.push(backMs);
    steps.push(`${n.id} preStop ${(preStopMs / 1000).toFixed(2)}s (${inFlight ?? "?"} in flight)`);
    if (!back) {
      r.notes.push(`${n.id} not back at full weight in 30 s: rolling restart stopped`);
      break;
    }
  }
  r.healAt = mark(ctx, "heal", `${az.name} restarted`);
  r.endAt = ctx.now();
  // Detection and L1 of the first node drained (the others leave later, on purpose); recovery: the slowest boot back to full weight.
  finish(ctx, r, victims.slice(0, 1), l1Removed);
  r.victims = victims.map((n) => n.id);
  r.recoveryMs = backs.some((b) => b === null) || backs.length < victims.length ? null : Math.max(...(backs as number[]));
  // Every node of the AZ left on purpose, one at a time: a false failover is any other node out, or a DNS change.
  const victimRows = new Set(victims.map((n) => rowOf(ctx, n)));
  r.falseFailovers = removedBetween(ctx.tl, localRows(ctx).filter((k) => !victimRows.has(k)), r.injectAt, r.endAt).length + dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.extra.restartMs = r.healAt - r.injectAt;
  r.extra.figures = `${az.name}'s inference servers restarted one by one in ${(r.extra.restartMs / 1000).toFixed(1)}s (${steps.join("; ")}); failed: plain ${r.failed}, sdk ${r.failedSdk}; streams cut ${r.cuts.all.cut}`;
  r.notes.push(r.extra.figures);
  return r;
}
