/**
 * `wake-onto-bad-gpus`: every GPU of one active AZ lost with the standby asleep; the standby's
 * first group (`p5.48xlarge`) launches, but its instances boot onto lost GPUs (the local
 * cloud's `badGpuFault`): in service, their agents reporting the lost GPU, never HEALTHY. The
 * leader must not put them in rotation, must judge the step failed (`unhealthy`) once the
 * healthy bound (`LLMHA_STANDBY_HEALTHY_BOUND_MS`, short in the drill) passes, wake the
 * fallback group (`p4d.24xlarge`, the AZ's other nodes) whose nodes serve, and not loop:
 * one wake per step, no release before the AZ recovers.
 */
import type { SimNode } from "../../sim/sim-node";
import type { CloudAction } from "../local-cloud";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_HEALTHY_BOUND_MS } from "../settings";
import { failuresBetween, firstAfter, l1Removed, type Sample } from "../timeline";
import { blank, finish, healAzThenStandbyBack, MAIN_CLIENT, mark, standbyReady, until, type RunResult, type ScenarioContext } from "./runner";

const fmt = (ms: number | null | undefined): string => (typeof ms !== "number" ? "never" : `${(ms / 1000).toFixed(2)}s`);

/**
 * The node's rows in the AZ proxies' serving backends (`az_<az>_servers/<node>`) of a sample:
 * the baselines and the `/az/health` backends are not llm-ha's traffic.
 */
const rowsOf = (s: Sample, n: SimNode): { status: string; weight: number; total: number }[] =>
  Object.entries(s.l1).filter(([k]) => /^az_.*_servers\//.test(k) && k.endsWith(`/${n.id}`)).map(([, v]) => v);

export async function runWakeOntoBadGpus(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return r;
  const { standby, cloud } = sb;
  const spares = ctx.stack.nodes.filter((n) => n.az === standby.name);
  if (spares.length < 2) {
    r.notMeasured = `the standby AZ ${standby.name} needs 2 nodes, one per group (--nodes 6 or more)`;
    return r;
  }
  const first = `${standby.name}-p5`;
  const second = `${standby.name}-p4d`;
  const bad = spares.slice(0, Math.ceil(spares.length / 2));
  const good = spares.slice(bad.length);
  cloud.defineGroups(standby.name, [
    { name: first, instanceType: "p5.48xlarge", nodes: bad.map((n) => n.id) },
    { name: second, instanceType: "p4d.24xlarge", nodes: good.map((n) => n.id) },
  ]);
  cloud.badGpuFault(first);
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const serving = (s: Sample, n: SimNode): boolean => s.nodes[n.id]?.status === "HEALTHY" && rowsOf(s, n).some((x) => x.status.startsWith("UP") && x.weight > 0);
  // In rotation: its agent says HEALTHY, or an AZ proxy has it UP after a passed check (`UP`; a server HAProxy adds from DNS
  // starts `UP 1/n` until its first check fails: one connection may reach it then, refused and redispatched — `badConnects`).
  const inRotation = (s: Sample, n: SimNode): boolean => s.nodes[n.id]?.status === "HEALTHY" || rowsOf(s, n).some((x) => x.status === "UP" && x.weight > 0);
  const seenActions = cloud.actions.length;
  const sentBefore = (n: SimNode): number => rowsOf(ctx.tl.samples.at(-1)!, n).reduce((a, x) => a + x.total, 0);
  const badSentBefore = bad.map(sentBefore);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name} (${first} boots onto lost GPUs)`);
    await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
    if (!(await until(ctx, DRILL_HEALTHY_BOUND_MS + 60_000, (s) => good.some((n) => serving(s, n))))) r.notes.push(`no node of the fallback group ${second} served within ${(DRILL_HEALTHY_BOUND_MS + 60_000) / 1000} s`);
    await until(ctx, 5000, (s) => good.every((n) => serving(s, n)));
    await healAzThenStandbyBack(ctx, r, az, victims, standby);
  } finally {
    // The next scenario starts from the default single group, no fault, the bad nodes' GPUs back (they are stopped by the release).
    cloud.defineGroups(standby.name, []);
    await Promise.all(bad.map((n) => n.gpuFault(null)));
  }
  r.endAt = ctx.now();
  finish(ctx, r, victims, l1Removed);
  const samples = ctx.tl.samples.filter((s) => s.t >= r.injectAt && s.t <= r.endAt);
  const actions: CloudAction[] = cloud.actions.slice(seenActions);
  const wakes = actions.filter((a) => a.action === "standby.wake" && a.outcome === "applied");
  const releases = actions.filter((a) => a.action === "standby.release" && a.outcome === "applied");
  const perGroup = new Map<string, number>();
  for (const w of wakes) perGroup.set(w.group ?? "?", (perGroup.get(w.group ?? "?") ?? 0) + 1);
  const fallback = wakes.find((a) => a.group === second);
  const firstWake = wakes.find((a) => a.group === first);
  // Targets: no node of the bad group in rotation; one wake per step; no release before the heal.
  r.extra.badInRotation = samples.filter((s) => bad.some((n) => inRotation(s, n))).length;
  r.extra.badConnects = bad.reduce((a, n, i) => a + Math.max(0, sentBefore(n) - badSentBefore[i]), 0);
  r.extra.extraWakes = [...perGroup.values()].reduce((a, c) => a + Math.max(0, c - 1), 0);
  r.extra.releasesBeforeHeal = releases.filter((a) => a.t < r.healAt).length;
  r.extra.fallbackNeverServed = firstAfter(samples, r.injectAt, (s) => good.some((n) => serving(s, n)), r.healAt) === null ? 1 : 0;
  r.extra.wakeDecisionMs = firstAfter(ctx.tl.fleet, r.injectAt, (f) => f.standbyWake, r.healAt);
  r.extra.firstWakeMs = firstWake ? firstWake.t - r.injectAt : null;
  r.extra.fallbackMs = fallback ? fallback.t - r.injectAt : null;
  r.extra.fallbackAfterWakeMs = fallback && firstWake ? fallback.t - firstWake.t : null;
  r.extra.fallbackServingMs = firstAfter(samples, r.injectAt, (s) => good.some((n) => serving(s, n)), r.healAt);
  r.extra.releaseAfterHealMs = releases.length ? releases[0].t - r.healAt : null;
  r.extra.failedUntilFallback = typeof r.extra.fallbackServingMs === "number" ? failuresBetween(ctx.tl, MAIN_CLIENT, r.injectAt, r.injectAt + r.extra.fallbackServingMs) : null;
  // The names the drill's standby summary line reads (report.ts).
  r.extra.wakeCallMs = r.extra.firstWakeMs;
  r.extra.firstStandbyMs = r.extra.fallbackServingMs;
  r.extra.failedUntilStandby = r.extra.failedUntilFallback;
  r.extra.wakeGroups = wakes.map((a) => `${a.group ?? "?"}@${fmt(a.t - r.injectAt)}`).join(",");
  r.extra.figures =
    `wake ${first} ${fmt(r.extra.firstWakeMs as number | null)}, fallback ${second} ${fmt(r.extra.fallbackMs as number | null)} (${fmt(r.extra.fallbackAfterWakeMs as number | null)} after the first wake; bound ${DRILL_HEALTHY_BOUND_MS / 1000} s), ` +
    `fallback serving ${fmt(r.extra.fallbackServingMs as number | null)} after the fault; ${first}'s nodes in rotation in ${r.extra.badInRotation} samples (connections sent to them before their first check: ${r.extra.badConnects}); ` +
    `wakes ${r.extra.wakeGroups || "none"}, releases ${releases.length} (${r.extra.releasesBeforeHeal} before the heal, first ${fmt(r.extra.releaseAfterHealMs as number | null)} after it); failed requests ${r.failed}`;
  if (!fallback) r.notes.push(`the fallback group ${second} was never woken`);
  r.victims = [...victims.map((n) => n.id), ...bad.map((n) => `${n.id} (standby, bad GPUs)`), ...good.map((n) => `${n.id} (standby fallback)`)];
  return r;
}
