/**
 * Zone scenarios: every GPU of one AZ lost with its HAProxy alive (L2: backups across AZs,
 * AZ state, `/az/health`), the standby AZ woken from zero by the leader (L2), and the whole
 * AZ lost, HAProxy included (L3: DNS drops the AZ's address and spreads its share over the
 * healthy AZs by weight).
 */
import { Redis } from "ioredis";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import type { SimNode } from "../../sim/sim-node";
import { sleep } from "../../../agent/src/util/net";
import type { CloudAction } from "../local-cloud";
import type { ScenarioSpec } from "../scenarios";
import type { DrillAz } from "../stack";
import { failuresBetween, firstAfter, l1Removed, type FleetSample, type Sample } from "../timeline";
import { measureDnsSpread, waitAzsHealthy } from "./dns-spread";
import { shortThroughProxy } from "./proxy";
import { awaitRecovery, blank, finish, healAzThenStandbyBack, healthy, MAIN_CLIENT, mark, standbyReady, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Polls `GET /az/health` through one AZ's proxy address until stopped; records the first non-200. */
function watchAzHealth(ctx: ScenarioContext, az: DrillAz): { first503: () => number | null; stop(): void } {
  let closed = false;
  let first: number | null = null;
  void (async () => {
    while (!closed) {
      try {
        const r = await fetch(`http://${az.address}:${ctx.stack.azHealthPort}/az/health`, { signal: AbortSignal.timeout(400) });
        await r.arrayBuffer();
        if (r.status !== 200 && first === null) first = ctx.now();
      } catch {
        // A dead proxy is a failed check too, but this watch is for the proxy-alive case.
      }
      await sleep(50);
    }
  })();
  return { first503: () => first, stop: () => (closed = true) };
}

function azFigures(ctx: ScenarioContext, r: RunResult, az: DrillAz): void {
  const fleet = ctx.tl.fleet;
  const st = firstAfter(fleet, r.injectAt, (f: FleetSample) => f.azState[az.name] === "DOWN" || f.azState[az.name] === "DEGRADED", r.healAt);
  r.extra.azStateMs = st;
  r.extra.azState = [...fleet].reverse().find((f) => f.t <= r.healAt)?.azState[az.name] ?? null;
  r.extra.wakeMs = firstAfter(fleet, r.injectAt, (f) => f.standbyWake, r.healAt);
  r.extra.tier = [...fleet].reverse().find((f) => f.t <= r.healAt)?.tier ?? null;
}

/**
 * L2 with the AZ's proxy alive: every GPU of one AZ lost → its traffic crosses to the other
 * AZs' nodes (backup servers), the AZ state and `/az/health` follow, and DNS drops the AZ.
 */
export async function runAzGpuLoss(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const backups = ctx.stack.nodes.filter((n) => n.az !== az.name).map((n) => `${az.proxy}/${n.id}`);
  const backupTotal = (s: Sample): number => backups.reduce((a, k) => a + (s.l1[k]?.total ?? 0), 0);
  // The cross-zone figure needs requests reaching the AZ's proxy after its nodes left it. The
  // main client follows DNS, which can drop the AZ before HAProxy's agent-checks take its nodes
  // out (the AZ state went DOWN 1.2 s before them under load): then nothing of the
  // main traffic crossed and cross-zone read "not seen". A client with the AZ's address cached
  // keeps sending to the proxy; two of them do here.
  const direct = shortThroughProxy(ctx, az, 2);
  await sleep(500);
  const before = backupTotal(ctx.observer.latest()!);
  const watch = watchAzHealth(ctx, az);
  r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
  const crossed = (s: Sample): boolean => backupTotal(s) > before;
  const dnsGone = (s: Sample): boolean => s.dns !== null && !s.dns.includes(az.address);
  await until(ctx, 10_000, (s) => crossed(s) && (!ctx.fleetWired || dnsGone(s)));
  await sleep(ctx.fleetWired ? 500 : 2000);
  watch.stop();
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all([direct.stop(), ...victims.map((n) => n.gpuFault(null))]);
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
  await sleep(300);
  r.endAt = ctx.now();
  r.crossMs = firstAfter(ctx.tl.samples, r.injectAt, crossed, r.healAt);
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, dnsGone, r.healAt);
  finish(ctx, r, victims, l1Removed);
  azFigures(ctx, r, az);
  const h = watch.first503();
  r.extra.azHealthMs = h === null ? null : h - r.injectAt;
  const stMs = r.extra.azStateMs;
  r.extra.azHealthAfterStateMs = h !== null && typeof stMs === "number" ? h - r.injectAt - stMs : null;
  if (r.extra.wakeMs === null && ctx.stack.standby) r.notes.push("standby wake-up not decided while the AZ was out");
  if (!ctx.fleetWired) r.notes.push("fleet layer not in the agents: no AZ state, /az/health stays 200 (stale), DNS keeps the AZ");
  return r;
}

/** L3: the AZ's HAProxy, engines and agents all gone at once; only DNS can route around it. */
export async function runAzLoss(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name}`);
  ctx.stack.killAzProxy(az);
  await Promise.all(victims.map(async (n) => Promise.all([n.crashInference(), n.killAgent("SIGKILL")])));
  const gone = (s: Sample): boolean => s.dns !== null && !s.dns.includes(az.address);
  await until(ctx, 12_000, gone);
  await sleep(1500);
  // Where the lost AZ's share went: every healthy AZ by its weight, none over 1.2 × its fair
  // share; at once, and again once the woken standby AZ passes its health check.
  const spreads = [await measureDnsSpread(ctx)];
  const others = ctx.stack.azs.filter((a) => a !== az).map((a) => a.name);
  if (await waitAzsHealthy(ctx, others, 25_000)) spreads.push(await measureDnsSpread(ctx));
  else r.notes.push(`${others.join(" and ")} not all passing /az/health within 25 s: DNS spread measured with ${spreads[0].healthy.join(", ") || "none"} only`);
  const ratios = spreads.map((x) => x.ratio);
  r.extra.dnsShareRatio = ratios.includes(null) ? null : Math.round(Math.max(...(ratios as number[])) * 100) / 100;
  r.extra.dnsAnswers = spreads.reduce((n, x) => n + x.answers, 0);
  const pc = (x: number) => `${Math.round(x * 1000) / 10}%`;
  for (const spread of spreads) {
    r.notes.push(
      `DNS answers after the loss (${spread.answers} resolutions): ${Object.entries(spread.shares)
        .map(([name, sh]) => `${name} ${pc(sh)}${name in spread.fair ? ` (fair ${pc(spread.fair[name])})` : " (/az/health failing)"}`)
        .join(", ")}`,
    );
  }
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map(async (n) => {
    await n.startInference("ready");
    await n.startAgent();
  }));
  await ctx.stack.startAzProxy(az);
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
  await sleep(300);
  r.endAt = ctx.now();
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, gone, r.healAt);
  finish(ctx, r, [], l1Removed);
  r.victims = [`haproxy ${az.name}`, ...victims.map((n) => n.id)];
  r.detectMs = r.dnsMs;
  azFigures(ctx, r, az);
  r.notes.push("clients keep the old answer up to the DNS TTL (1 s) after it changes");
  return r;
}

/** Leader events (`type=standby`, `type=action`…) written since `fromT` (drill clock), with their Redis time on the drill clock. */
export async function eventsSince(ctx: ScenarioContext, fromT: number): Promise<{ t: number; f: Record<string, string> }[]> {
  const offset = Date.now() - ctx.now();
  const redis = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1, connectTimeout: 1000 });
  redis.on("error", () => undefined);
  try {
    const rows = await redis.xrange(new RedisKeys(ctx.stack.cluster).events, String(Math.floor(fromT + offset)), "+");
    return rows.map(([id, kv]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < kv.length; i += 2) f[kv[i]] = kv[i + 1];
      return { t: Number(id.split("-")[0]) - offset, f };
    });
  } catch {
    return [];
  } finally {
    redis.disconnect();
  }
}

/**
 * L2 with the standby at zero: every GPU of one active AZ lost → the leader decides the
 * wake-up (fenced `standby:wake` = 1) → its `local` actuator asks the local cloud → the
 * standby nodes boot → the first one is HEALTHY and UP in the hurt AZ's proxy (as a backup
 * server). Heal; after the hold the leader releases the standby and the cloud stops it.
 */
export async function runStandbyWake(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return r;
  const { standby, cloud } = sb;
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const spares = ctx.stack.nodes.filter((n) => n.az === standby.name);
  const serving = (s: Sample, n: SimNode): boolean => s.nodes[n.id]?.status === "HEALTHY" && (s.l1[`${az.proxy}/${n.id}`]?.status ?? "").startsWith("UP");
  const firstSpare = (s: Sample): boolean => spares.some((n) => serving(s, n));
  const seen = cloud.actions.length;
  r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
  const up = await until(ctx, 30_000, firstSpare);
  if (!up) r.notes.push(`no standby node of ${standby.name} served within 30 s`);
  await sleep(300);
  await healAzThenStandbyBack(ctx, r, az, victims, standby);
  r.endAt = ctx.now();
  finish(ctx, r, victims, l1Removed);
  const actions: CloudAction[] = cloud.actions.slice(seen);
  const events = await eventsSince(ctx, r.injectAt);
  const decided = events.find((e) => e.f.type === "standby" && e.f.wake === "1");
  const wake = actions.find((a) => a.action === "standby.wake" && a.outcome === "applied");
  const release = actions.find((a) => a.action === "standby.release" && a.outcome === "applied");
  const spareMs = firstAfter(ctx.tl.samples, r.injectAt, firstSpare, r.healAt);
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => s.dns !== null && !s.dns.includes(az.address), r.healAt);
  r.extra.wakeDecisionMs = decided ? decided.t - r.injectAt : firstAfter(ctx.tl.fleet, r.injectAt, (f) => f.standbyWake, r.healAt);
  r.extra.wakeCallMs = wake ? wake.t - r.injectAt : null;
  r.extra.firstStandbyMs = spareMs;
  r.extra.failedUntilStandby = spareMs === null ? null : failuresBetween(ctx.tl, MAIN_CLIENT, r.injectAt, r.injectAt + spareMs);
  r.extra.releaseAfterHealMs = release ? release.t - r.healAt : null;
  r.extra.wakeToken = wake?.token ?? null;
  r.extra.actionEvents = events.filter((e) => e.f.type === "action").map((e) => `${e.f.action}:${e.f.outcome}`).join(",");
  r.victims = [...victims.map((n) => n.id), ...spares.map((n) => `${n.id} (standby)`)];
  return r;
}
