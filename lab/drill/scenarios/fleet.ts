/**
 * Fleet scenarios (the control plane and its damping): leader killed or paused past its
 * lease, Redis restarted with every key lost, one flapping probe, and every probe failing at
 * once (the blast-radius cap). Also the stale-write count a paused leader is judged by.
 */
import { Redis } from "ioredis";
import type { SimNode } from "../../sim/sim-node";
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { dnsChanges, firstAfter, l1Removed, removedBetween, type FleetSample } from "../timeline";
import { awaitRecovery, blank, finish, healthy, localRows, mark, nextVictim, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The node whose agent holds the lease (the holder id starts with the node id; the longest match wins). */
export function leaderNode(ctx: ScenarioContext): SimNode | null {
  const holder = ctx.observer.latestFleet()?.leader;
  if (!holder) return null;
  const matches = ctx.stack.nodes.filter((n) => holder === n.id || holder.startsWith(n.id));
  return matches.sort((a, b) => b.id.length - a.id.length)[0] ?? null;
}

/**
 * Fenced writes a deposed leader got through, sample by sample: a published hash (AZ state,
 * tier) that changed after a higher token was already in the lease, carrying a lower token.
 * `highest`: higher than any lease token seen so far (the scenarios'). `same-read`: higher than
 * the lease in the same read (the chaos campaign's: a promoted replica that missed writes brings
 * back older hashes and an older or no lease with no writer at all — a rollback, not a stale
 * write; a sample without a lease judges nothing).
 */
export class StaleWriteWatch {
  private highest = 0;
  private prev: Record<string, number> = {};
  /** The server each `prev` token was read from. */
  private prevServer: Record<string, string | undefined> = {};
  constructor(private readonly against: "highest" | "same-read" = "highest") {}

  /**
   * The keys written stale in this sample (none before `from`). A token is compared only with
   * one read from the same server: across a failover the promoted replica may bring back older
   * hashes that nobody wrote since (a rollback: the writes it missed are lost, not stale), so
   * a write landing on the new server before its first read is the one this cannot see.
   */
  see(f: FleetSample, from = 0): string[] {
    const stale: string[] = [];
    const bar = this.against === "highest" ? this.highest : (f.leaderToken ?? 0);
    for (const [k, tok] of Object.entries(f.tokens)) {
      if (f.t >= from && this.prev[k] !== undefined && this.prevServer[k] === f.server && tok !== this.prev[k] && tok < bar) stale.push(`${k} token ${tok} < ${bar}`);
      this.prevServer[k] = f.server;
    }
    this.prev = { ...this.prev, ...f.tokens };
    if (f.leaderToken !== undefined && f.leaderToken !== null) this.highest = Math.max(this.highest, f.leaderToken);
    return stale;
  }
}

/**
 * How far before a fault the stale-write watch starts: the tokens of the run's own steady
 * state. Earlier samples belong to earlier scenarios of the same drill, and a fencing counter
 * rolled back on purpose there (`redis-failover-lag` promotes a replica that missed writes;
 * its own run judges the regression) would make every later, valid write look stale.
 */
export const STALE_WATCH_LEAD_MS = 10_000;

/** Stale writes (`StaleWriteWatch`) counted from `from`, against the tokens seen since `STALE_WATCH_LEAD_MS` before it. */
export function staleWrites(fleet: readonly FleetSample[], from: number): number {
  const w = new StaleWriteWatch();
  return fleet.filter((f) => f.t >= from - STALE_WATCH_LEAD_MS).reduce((n, f) => n + w.see(f, from).length, 0);
}

/** The leader killed (a new one must take the lease) or paused past its TTL (its late writes must be fenced). */
export async function runLeader(ctx: ScenarioContext, spec: ScenarioSpec, run: number, how: "kill" | "pause"): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = leaderNode(ctx);
  if (!n) {
    r.notMeasured = "no leader in Redis";
    return r;
  }
  const old = ctx.observer.latestFleet()?.leader ?? null;
  const newLeader = (f: FleetSample): boolean => typeof f.leader === "string" && f.leader !== old;
  const limit = DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs + 5000;
  r.injectAt = mark(ctx, "inject", `${spec.name} ${n.id}`);
  if (how === "kill") {
    await n.killAgent("SIGKILL");
    await until(ctx, limit, () => ctx.tl.fleet.some((f) => f.t >= r.injectAt && newLeader(f)));
  } else {
    n.pauseAgent();
    await sleep(DRILL_TIMING.leaseTtlMs + 1500);
    n.resumeAgent();
    await sleep(3000);
  }
  r.healAt = mark(ctx, "heal", `heal ${n.id}`);
  if (how === "kill") await n.startAgent();
  await awaitRecovery(ctx, r, n.id, (s) => healthy(ctx, s, n));
  await sleep(300);
  r.endAt = ctx.now();
  r.leaderMs = firstAfter(ctx.tl.fleet, r.injectAt, newLeader, r.healAt);
  r.extra.newLeader = ctx.tl.fleet.find((f) => f.t >= r.injectAt && newLeader(f))?.leader ?? null;
  finish(ctx, r, [], l1Removed);
  r.victims = [`${n.id} (leader)`];
  if (how === "pause") r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  return r;
}

/** Redis restarted empty: a leader and the published AZ states must come back without touching rotation or DNS. */
export async function runRedisRestart(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  r.injectAt = mark(ctx, "inject", "redis restart (primary and replica: every key lost)");
  await ctx.stack.redis.restartAll();
  const restartedAt = ctx.now();
  const leaderBack = (f: FleetSample): boolean => typeof f.leader === "string";
  const published = (f: FleetSample): boolean => ctx.stack.azs.every((a) => f.azState[a.name] !== undefined);
  await until(ctx, 15_000, () => ctx.tl.fleet.some((f) => f.t > restartedAt && leaderBack(f) && published(f)));
  // The proxies kept the client keys they had; the operator stores them again (here: new keys).
  r.extra.edgeKeysKept = ctx.stack.edge.sync.state.lastError?.includes("gone from Redis") ? 1 : 0;
  await ctx.stack.edge.reseed();
  await sleep(1000);
  r.healAt = mark(ctx, "heal", "redis back, client keys stored again");
  r.endAt = ctx.now();
  r.leaderMs = firstAfter(ctx.tl.fleet, restartedAt + 1, leaderBack);
  r.extra.republishedMs = firstAfter(ctx.tl.fleet, restartedAt + 1, published);
  r.extra.restartMs = restartedAt - r.injectAt;
  finish(ctx, r, [], l1Removed);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  return r;
}

/** AZ states that got worse than they were when `from` began (an OK AZ published DEGRADED or DOWN), counted per transition. */
export function azWorsenings(fleet: readonly FleetSample[], from: number, until: number): { count: number; seen: string[] } {
  const rank: Record<string, number> = { OK: 0, DEGRADED: 1, DOWN: 2 };
  const last: Record<string, string> = {};
  const seen: string[] = [];
  for (const f of fleet) {
    if (f.t > until) break;
    for (const [az, st] of Object.entries(f.azState)) {
      const prev = last[az];
      if (f.t >= from && prev !== undefined && (rank[st] ?? 0) > (rank[prev] ?? 0)) seen.push(`${az} ${prev}→${st}`);
      last[az] = st;
    }
  }
  return { count: seen.length, seen };
}

/**
 * Redis refuses every write for 20 s (`maxmemory 1` with `noeviction`: heartbeats, lease
 * renewals and the leader's writes fail while reads still work), then takes writes again.
 * The node hashes expire meanwhile; the nodes never stopped serving, so an AZ published
 * DEGRADED or DOWN, a tier at L3/L4 or a DNS change is a false failover.
 */
export async function runRedisReadonly(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const admin = new Redis(ctx.stack.redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await admin.connect();
    const [, policy] = (await admin.config("GET", "maxmemory-policy")) as [string, string];
    r.injectAt = mark(ctx, "inject", "redis refuses writes (maxmemory 1, noeviction)");
    await admin.config("SET", "maxmemory-policy", "noeviction");
    await admin.config("SET", "maxmemory", "1");
    await sleep(20_000);
    await admin.config("SET", "maxmemory", "0");
    await admin.config("SET", "maxmemory-policy", policy);
    r.healAt = mark(ctx, "heal", "redis takes writes again");
  } finally {
    admin.disconnect();
  }
  const settled = (f: FleetSample): boolean => typeof f.leader === "string" && (f.tier === "L0" || f.tier === "L1");
  await until(ctx, 20_000, () => ctx.tl.fleet.some((f) => f.t > r.healAt && settled(f)));
  // The false DOWN came 4-5 s after Redis took writes again: watch well past it.
  await sleep(8000);
  r.endAt = ctx.now();
  r.leaderMs = firstAfter(ctx.tl.fleet, r.healAt, settled);
  finish(ctx, r, [], l1Removed);
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  const tiers = ctx.tl.fleet.filter((f) => f.t >= r.injectAt && f.t <= r.endAt).map((f) => f.tier ?? "");
  r.extra.azWorsened = worse.seen.join(", ") || "none";
  r.extra.worstTier = tiers.sort().at(-1) ?? null;
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt) + worse.count;
  return r;
}

/** One node slow one period in three: hysteresis must keep it in rotation, so any removal is a false failover. */
export async function runFlap(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  const period = DRILL_TIMING.intervalMs;
  r.injectAt = mark(ctx, "inject", `flap ${n.id}`);
  const end = ctx.now() + 8000;
  while (ctx.now() < end) {
    await n.setMode({ mode: "slow", slowMs: 900 });
    await sleep(period);
    await n.setMode("ready");
    await sleep(2 * period);
  }
  r.healAt = mark(ctx, "heal", `steady ${n.id}`);
  await until(ctx, 15_000, (s) => healthy(ctx, s, n));
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  r.victims = [n.id];
  r.falseFailovers = removedBetween(ctx.tl, localRows(ctx), r.injectAt, r.endAt).length + dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.detectMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => s.nodes[n.id]?.status !== "HEALTHY", r.healAt);
  r.extra.degradedSamples = ctx.tl.samples.filter((s) => s.t >= r.injectAt && s.t <= r.healAt && s.nodes[n.id]?.status === "DEGRADED").length;
  return r;
}

/**
 * Every probe failing at once is more likely the probes than the fleet: the blast-radius cap
 * should keep the nodes in rotation, so any removal counts as a false failover; `emptied` says
 * whether an AZ was left with no node all the same.
 */
export async function runMassProbe(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const nodes = ctx.stack.running();
  r.injectAt = mark(ctx, "inject", "every probe failing");
  await Promise.all(nodes.map((n) => n.setMode({ mode: "slow", slowMs: DRILL_TIMING.probeTimeoutMs + 700 })));
  await sleep(8000);
  r.healAt = mark(ctx, "heal", "probes pass");
  await Promise.all(nodes.map((n) => n.setMode("ready")));
  await until(ctx, 30_000, (s) => nodes.every((x) => healthy(ctx, s, x)));
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => nodes.every((x) => healthy(ctx, s, x)));
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  r.victims = nodes.map((n) => n.id);
  r.falseFailovers = removedBetween(ctx.tl, localRows(ctx), r.injectAt, r.healAt).length + dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.extra.suspect = ctx.tl.fleet.find((f) => f.t >= r.injectAt && f.t <= r.healAt && f.suspect !== "")?.suspect ?? null;
  r.extra.emptied = ctx.stack.azs.some((az) =>
    ctx.tl.samples.some((s) => s.t >= r.injectAt && s.t <= r.healAt && nodes.filter((n) => n.az === az.name).every((n) => l1Removed(s.l1[`${az.proxy}/${n.id}`]))),
  )
    ? "yes"
    : "no";
  return r;
}
