/**
 * Capacity scenarios: the standby wake when the cloud has no capacity for the
 * standby's first instance type. The local cloud gives the standby AZ two node groups
 * (`p5.48xlarge` first, `p4d.24xlarge` as its fallback) and makes every launch of the
 * first fail with AWS's `InsufficientInstanceCapacity` message; the leader's actuator must
 * read the failed launch, wake the fallback group (a fenced, recorded call of its own) and
 * have a standby node serving, with no client request failing meanwhile.
 */
import { Redis } from "ioredis";
import { runLlmHa } from "../../cli-process";
import { sleep } from "../../../agent/src/util/net";
import type { SimNode } from "../../sim/sim-node";
import type { CloudAction } from "../local-cloud";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { failuresBetween, firstAfter, l1Removed, type Sample } from "../timeline";
import { blank, finish, healAzThenStandbyBack, MAIN_CLIENT, mark, standbyAtZero, standbyReady, until, type RunResult, type ScenarioContext } from "./runner";

const fmt = (ms: number | null | string): string => (typeof ms !== "number" ? "never" : `${(ms / 1000).toFixed(2)}s`);

/**
 * `standby-ice`: every GPU of one active AZ lost with the standby at zero; the standby's
 * first type refuses (capacity), the fallback type serves. Figures from the fault: first
 * failed launch, fallback started (the fallback group's wake reaching the cloud), first
 * standby node serving, failed requests meanwhile.
 */
export async function runStandbyIce(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return r;
  const { standby, cloud } = sb;
  const first = `${standby.name}-p5`;
  const second = `${standby.name}-p4d`;
  cloud.defineGroups(standby.name, [
    { name: first, instanceType: "p5.48xlarge" },
    { name: second, instanceType: "p4d.24xlarge" },
  ]);
  cloud.capacityFault(first, 1000); // the first type refuses for the whole run
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const spares = ctx.stack.nodes.filter((n) => n.az === standby.name);
  const serving = (s: Sample, n: SimNode): boolean => s.nodes[n.id]?.status === "HEALTHY" && (s.l1[`${az.proxy}/${n.id}`]?.status ?? "").startsWith("UP");
  const firstSpare = (s: Sample): boolean => spares.some((n) => serving(s, n));
  const seenActions = cloud.actions.length;
  const seenFailures = cloud.launchFailures.length;
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name} (${first} refuses: capacity)`);
    await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
    if (!(await until(ctx, 60_000, firstSpare))) r.notes.push(`no standby node of ${standby.name} served within 60 s`);
    await sleep(300);
    await healAzThenStandbyBack(ctx, r, az, victims, standby);
  } finally {
    // The next scenario starts from the default single group, no fault.
    cloud.defineGroups(standby.name, []);
  }
  r.endAt = ctx.now();
  finish(ctx, r, victims, l1Removed);
  const actions: CloudAction[] = cloud.actions.slice(seenActions);
  const failures = cloud.launchFailures.slice(seenFailures);
  const firstWake = actions.find((a) => a.action === "standby.wake" && a.outcome === "applied");
  const fallback = actions.find((a) => a.action === "standby.wake" && a.group === second && a.outcome === "applied");
  const release = actions.find((a) => a.action === "standby.release" && a.outcome === "applied");
  const spareMs = firstAfter(ctx.tl.samples, r.injectAt, firstSpare, r.healAt);
  const firstFailureMs = failures.length ? failures[0].t - r.injectAt : null;
  const fallbackMs = fallback ? fallback.t - r.injectAt : null;
  r.extra.wakeDecisionMs = firstAfter(ctx.tl.fleet, r.injectAt, (f) => f.standbyWake, r.healAt);
  r.extra.wakeCallMs = firstWake ? firstWake.t - r.injectAt : null;
  r.extra.firstFailureMs = firstFailureMs;
  r.extra.fallbackMs = fallbackMs;
  r.extra.fallbackAfterFailureMs = firstFailureMs !== null && fallbackMs !== null ? fallbackMs - firstFailureMs : null;
  r.extra.firstStandbyMs = spareMs;
  r.extra.failedUntilStandby = spareMs === null ? null : failuresBetween(ctx.tl, MAIN_CLIENT, r.injectAt, r.injectAt + spareMs);
  r.extra.releaseAfterHealMs = release ? release.t - r.healAt : null;
  r.extra.failedLaunches = failures.length;
  r.extra.wakeGroups = actions.filter((a) => a.action === "standby.wake" && a.outcome === "applied").map((a) => `${a.group ?? "?"}@${fmt(a.t - r.injectAt)}`).join(",");
  r.extra.figures =
    `first failed launch ${fmt(firstFailureMs)} (${failures[0]?.message.slice(0, 60) ?? "none"}…), fallback ${second} started ${fmt(fallbackMs)} ` +
    `(${fmt(r.extra.fallbackAfterFailureMs as number | null)} after the failure), first standby node serving ${fmt(spareMs)} after the fault; ` +
    `failed requests meanwhile ${r.extra.failedUntilStandby ?? "-"}; ${failures.length} failed launches of ${first}; released ${fmt(r.extra.releaseAfterHealMs as number | null)} after the heal`;
  if (!fallback) r.notes.push(`the fallback group ${second} was never woken`);
  r.victims = [...victims.map((n) => n.id), ...spares.map((n) => `${n.id} (standby)`)];
  return r;
}

/**
 * `practice-wake`: an operator asks for a practice wake (`llm-ha practice`) with the fleet at
 * L0 and the standby at zero; the leader wakes the standby as a schedule firing would, times the
 * first standby node serving, records the outcome, and releases it. Nothing else moves: no tier
 * change, no active node out, no failed request.
 */
export async function runPracticeWake(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return r;
  const { standby, cloud } = sb;
  const seen = cloud.actions.length;
  const spares = ctx.stack.nodes.filter((n) => n.az === standby.name);
  const firstSpare = (s: Sample): boolean => spares.some((n) => s.nodes[n.id]?.status === "HEALTHY");
  const redis = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on("error", () => undefined);
  try {
    r.injectAt = mark(ctx, "inject", `llm-ha practice (${standby.name})`);
    const op = ctx.stack.redisAs("llmha-operator");
    const asked = await runLlmHa(["practice", "--redis-url", op.url, "--cluster", ctx.stack.cluster], op.env);
    r.notes.push(`llm-ha practice: exit ${asked.code}: ${`${asked.stdout}${asked.stderr}`.trim().replace(/\n/g, " ")}`);
    if (!(await until(ctx, 30_000, firstSpare))) r.notes.push(`no standby node of ${standby.name} serving within 30 s`);
    // The outcome recorded, then the release back to zero (after the hold).
    const key = `llmha:${ctx.stack.cluster}:practice`;
    let practice: Record<string, string> = {};
    const end = ctx.now() + 15_000;
    while (ctx.now() < end) {
      practice = await redis.hgetall(key).catch(() => ({}));
      if (practice.lastOutcome && Number(practice.lastAt) > 0 && !practice.startedAt) break;
      await sleep(200);
    }
    r.healAt = mark(ctx, "heal", `practice recorded: ${practice.lastOutcome ?? "nothing"}`);
    const released = await until(ctx, DRILL_TIMING.standbyHoldMs + 20_000, () => standbyAtZero(ctx));
    if (!released) r.notes.push(`${standby.name} not back at zero ${DRILL_TIMING.standbyHoldMs / 1000} s + 20 s after the practice`);
    r.endAt = ctx.now();
    const active = ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby);
    finish(ctx, r, [], l1Removed);
    r.victims = spares.map((n) => `${n.id} (standby)`);
    // A practice is not an incident: any tier other than L0 published meanwhile is a false failover.
    r.falseFailovers += ctx.tl.fleet.filter((f) => f.t >= r.injectAt && f.t <= r.endAt && f.tier !== null && f.tier !== "L0").length > 0 ? 1 : 0;
    r.extra.wakeDecisionMs = firstAfter(ctx.tl.fleet, r.injectAt, (f) => f.standbyWake, r.endAt);
    r.extra.firstStandbyMs = firstAfter(ctx.tl.samples, r.injectAt, firstSpare, r.endAt);
    const actions: CloudAction[] = cloud.actions.slice(seen);
    const wake = actions.find((a) => a.action === "standby.wake" && a.outcome === "applied");
    const release = actions.find((a) => a.action === "standby.release" && a.outcome === "applied");
    r.extra.wakeCallMs = wake ? wake.t - r.injectAt : null;
    r.extra.releaseAfterHealMs = release ? release.t - r.healAt : null;
    r.extra.wakeToken = wake?.token ?? null;
    r.extra.practiceOutcome = practice.lastOutcome ?? null;
    r.extra.practiceWakeMs = practice.lastWakeMs ? Number(practice.lastWakeMs) : null;
    r.extra.practiceNotServed = practice.lastOutcome === "served" ? 0 : 1;
    r.extra.notReleased = released ? 0 : 1;
    r.extra.releasedAfterMs = released ? ctx.now() - r.healAt : null;
    r.extra.activeStillServing = active.length;
    r.extra.figures =
      `practice requested; wake decided ${fmt(r.extra.wakeDecisionMs)}, first standby node serving ${fmt(r.extra.firstStandbyMs)} after the request; ` +
      `recorded ${practice.lastOutcome ?? "nothing"} (wake ${fmt(r.extra.practiceWakeMs)}); back at zero ${released ? "yes" : "NO"}; failed: plain ${r.failed}, sdk ${r.failedSdk}`;
    r.notes.push(r.extra.figures);
  } finally {
    redis.disconnect();
  }
  return r;
}
