/**
 * `standby-wake-karpenter`: the standby AZ's capacity from Karpenter instead of Auto Scaling
 * groups (`LLMHA_CAPACITY_ENGINE=karpenter`, `DRILL_KARPENTER_ENV`). The local cloud's simulated
 * Karpenter (local-karpenter.ts) gets the standby AZ's two NodePools (`p5` first, `p4d` its
 * fallback, both at GPU limit 0) and the placeholder Deployment at 0 replicas. Two phases in one
 * run, each every GPU of one active AZ lost and healed:
 *
 * 1. as `standby-wake`: the leader raises the first pool's limit and scales the placeholder, the
 *    simulated Karpenter provisions NodeClaims for the pending pods and boots the standby's nodes;
 *    after the heal and the hold, the release sets the limits to 0 and deletes the NodeClaims;
 * 2. as `standby-ice`: the first pool's launches fail with `InsufficientCapacity` (AWS's
 *    message); the leader reads the failed NodeClaim and raises the second pool, which serves.
 *
 * Figures from each fault, read from the requests the simulated Karpenter answered.
 */
import { sleep } from "../../../agent/src/util/net";
import type { SimNode } from "../../sim/sim-node";
import type { KarpenterRequest } from "../local-karpenter";
import type { ScenarioSpec } from "../scenarios";
import { failuresBetween, firstAfter, l1Removed, type Sample } from "../timeline";
import { eventsSince } from "./zone";
import { blank, finish, healAzThenStandbyBack, MAIN_CLIENT, mark, standbyReady, steady, until, type RunResult, type ScenarioContext } from "./runner";

const fmt = (ms: number | null | undefined): string => (typeof ms !== "number" ? "never" : `${(ms / 1000).toFixed(2)}s`);

/** The pools and placeholder the drill's Karpenter env names (settings.ts `DRILL_KARPENTER_ENV`). */
export const karpenterPools = (standby: string): { first: string; second: string } => ({ first: `llm-ha-${standby}-p5`, second: `llm-ha-${standby}-p4d` });
export const DRILL_PLACEHOLDER = { namespace: "llm-ha", name: "llm-ha-standby-placeholder" } as const;

/** A PATCH of the pool that raised its GPU limit above 0, or set it to 0. */
const limitPatch = (req: KarpenterRequest, pool: string, raised: boolean): boolean => {
  if (req.method !== "PATCH" || req.code !== 200 || !req.path.endsWith(`/nodepools/${pool}`)) return false;
  const limit = (req.body as { spec?: { limits?: Record<string, string> } } | null)?.spec?.limits?.["nvidia.com/gpu"];
  return limit !== undefined && (raised ? limit !== "0" : limit === "0");
};

interface Phase {
  injectAt: number;
  healAt: number;
  decisionMs: number | null;
  wakeCallMs: number | null;
  firstStandbyMs: number | null;
  failedUntilStandby: number | null;
  releaseAfterHealMs: number | null;
  firstFailureMs: number | null;
  fallbackMs: number | null;
  failedLaunches: number;
}

export async function runStandbyWakeKarpenter(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return r;
  const { standby, cloud } = sb;
  const k = cloud.karpenter;
  const { first, second } = karpenterPools(standby.name);
  k.definePools([
    { name: first, az: standby.name, instanceType: "p5.48xlarge" },
    { name: second, az: standby.name, instanceType: "p4d.24xlarge" },
  ], DRILL_PLACEHOLDER);
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const spares = ctx.stack.nodes.filter((n) => n.az === standby.name);
  const serving = (s: Sample, n: SimNode): boolean => s.nodes[n.id]?.status === "HEALTHY" && (s.l1[`${az.proxy}/${n.id}`]?.status ?? "").startsWith("UP");
  const firstSpare = (s: Sample): boolean => spares.some((n) => serving(s, n));
  const phase = async (ice: boolean): Promise<Phase> => {
    const seenReq = k.requests.length;
    const seenFail = k.launchFailures.length;
    if (ice) k.iceFault(first, true);
    const injectAt = mark(ctx, "inject", `${spec.name} ${az.name}${ice ? ` (${first} refuses: InsufficientCapacity)` : ""}`);
    if (r.injectAt === 0) r.injectAt = injectAt;
    await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
    if (!(await until(ctx, 60_000, firstSpare))) r.notes.push(`${ice ? "ICE phase" : "wake phase"}: no standby node of ${standby.name} served within 60 s`);
    await sleep(300);
    await healAzThenStandbyBack(ctx, r, az, victims, standby);
    const healAt = r.healAt;
    const reqs = k.requests.slice(seenReq);
    const failures = k.launchFailures.slice(seenFail);
    const wake = reqs.find((q) => limitPatch(q, first, true));
    const fallback = reqs.find((q) => limitPatch(q, second, true));
    const release = reqs.find((q) => q.t >= healAt && limitPatch(q, first, false));
    const spareMs = firstAfter(ctx.tl.samples, injectAt, firstSpare, healAt);
    if (ice) k.iceFault(first, false);
    // The decision's own time (the leader's `type=standby` event), as standby-wake reads it; else the Redis samples (every 200 ms).
    const decided = (await eventsSince(ctx, injectAt)).find((e) => e.t <= healAt && e.f.type === "standby" && e.f.wake === "1");
    return {
      injectAt, healAt,
      decisionMs: decided ? decided.t - injectAt : firstAfter(ctx.tl.fleet, injectAt, (f) => f.standbyWake, healAt),
      wakeCallMs: wake ? wake.t - injectAt : null,
      firstStandbyMs: spareMs,
      failedUntilStandby: spareMs === null ? null : failuresBetween(ctx.tl, MAIN_CLIENT, injectAt, injectAt + spareMs),
      releaseAfterHealMs: release ? release.t - healAt : null,
      firstFailureMs: failures.length ? failures[0].t - injectAt : null,
      fallbackMs: fallback ? fallback.t - injectAt : null,
      failedLaunches: failures.length,
    };
  };
  let a: Phase;
  let b: Phase;
  try {
    a = await phase(false);
    if (!(await steady(ctx))) r.notes.push("fleet not steady (or standby not at zero) before the ICE phase");
    b = await phase(true);
  } finally {
    // The next scenario starts with no NodePools (the Auto Scaling path's default groups).
    k.definePools([]);
  }
  r.endAt = ctx.now();
  finish(ctx, r, victims, l1Removed);
  const both = [a.decisionMs, b.decisionMs];
  r.extra.wakeDecisionMs = both.some((v) => v === null) ? null : Math.max(...(both as number[]));
  r.extra.wakeCallMs = a.wakeCallMs;
  r.extra.firstStandbyMs = a.firstStandbyMs;
  r.extra.failedUntilStandby = a.failedUntilStandby;
  r.extra.releaseAfterHealMs = a.releaseAfterHealMs;
  r.extra.iceWakeDecisionMs = b.decisionMs;
  r.extra.firstFailureMs = b.firstFailureMs;
  r.extra.fallbackMs = b.fallbackMs;
  r.extra.fallbackAfterFailureMs = b.firstFailureMs !== null && b.fallbackMs !== null ? b.fallbackMs - b.firstFailureMs : null;
  r.extra.iceFirstStandbyMs = b.firstStandbyMs;
  r.extra.iceFailedUntilStandby = b.failedUntilStandby;
  r.extra.iceReleaseAfterHealMs = b.releaseAfterHealMs;
  r.extra.failedLaunches = b.failedLaunches;
  r.extra.wakePhaseFailedLaunches = a.failedLaunches;
  r.extra.figures =
    `wake: decided ${fmt(a.decisionMs)}, ${first} raised ${fmt(a.wakeCallMs)}, first standby node serving ${fmt(a.firstStandbyMs)} after the fault, ` +
    `failed meanwhile ${a.failedUntilStandby ?? "-"}, released ${fmt(a.releaseAfterHealMs)} after the heal; ` +
    `ICE: decided ${fmt(b.decisionMs)}, first failed launch ${fmt(b.firstFailureMs)}, ${second} raised ${fmt(b.fallbackMs)} ` +
    `(${fmt(r.extra.fallbackAfterFailureMs as number | null)} after the failure), first standby node serving ${fmt(b.firstStandbyMs)}, ` +
    `failed meanwhile ${b.failedUntilStandby ?? "-"}, ${b.failedLaunches} failed launches, released ${fmt(b.releaseAfterHealMs)} after the heal`;
  r.notes.push(r.extra.figures);
  if (b.fallbackMs === null) r.notes.push(`the fallback NodePool ${second} was never raised`);
  if (a.fallbackMs !== null) r.notes.push(`the wake phase raised the fallback NodePool ${second} (no capacity fault was set)`);
  r.victims = [...victims.map((n) => n.id), ...spares.map((n) => `${n.id} (standby)`)];
  return r;
}
