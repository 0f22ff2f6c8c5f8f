/**
 * Injectors and measurements: each scenario waits for a steady fleet, injects its fault,
 * holds it until the tiers have acted (or a hold limit), heals, waits for recovery at
 * full weight, and reads its figures from the timeline.
 */
import { Redis } from "ioredis";
import { RedisKeys } from "../../agent/src/redis/keys";
import type { SimNode } from "../sim/sim-node";
import { sleep } from "../../agent/src/util/net";
import type { Observer } from "./observer";
import type { ScenarioSpec } from "./scenarios";
import { DRILL_TIMING } from "./settings";
import type { CloudAction } from "./local-cloud";
import { backendOf, BASELINE_DEFAULT, BASELINE_TUNED, type DrillAz, type DrillStack } from "./stack";
import {
  dnsChanges,
  failuresBetween,
  firstAfter,
  l1Full,
  l1Reduced,
  l1Removed,
  removedBetween,
  type FleetSample,
  type L1Sample,
  type Sample,
  type Timeline,
} from "./timeline";

export const MAIN_CLIENT = "llm-ha";

/** Every figure of one run of one scenario; times in ms from injection (recovery: from heal). */
export interface RunResult {
  scenario: string;
  run: number;
  victims: string[];
  injectAt: number;
  healAt: number;
  endAt: number;
  detectMs: number | null;
  l1Ms: number | null;
  dnsMs: number | null;
  crossMs: number | null;
  leaderMs: number | null;
  recoveryMs: number | null;
  failed: number;
  failedBaseline: { default: number; tuned: number };
  falseFailovers: number;
  staleWrites: number | null;
  baselineMs: { default: number | null; tuned: number | null };
  /** Scenario-specific figures (AZ state, `/az/health`, wake-up, tier…). */
  extra: Record<string, number | string | null>;
  /** Set when the scenario could not be measured, with why. */
  notMeasured?: string;
  notes: string[];
}

export interface ScenarioContext {
  stack: DrillStack;
  tl: Timeline;
  observer: Observer;
  now(): number;
  progress(line: string): void;
  /** A leader was seen in Redis at start-up: the fleet layer is running in the agents. */
  fleetWired: boolean;
}

function blank(scenario: string, run: number): RunResult {
  return {
    scenario,
    run,
    victims: [],
    injectAt: 0,
    healAt: 0,
    endAt: 0,
    detectMs: null,
    l1Ms: null,
    dnsMs: null,
    crossMs: null,
    leaderMs: null,
    recoveryMs: null,
    failed: 0,
    failedBaseline: { default: 0, tuned: 0 },
    falseFailovers: 0,
    staleWrites: null,
    baselineMs: { default: null, tuned: null },
    extra: {},
    notes: [],
  };
}

const rowOf = (ctx: ScenarioContext, n: SimNode): string => `${ctx.stack.azOf(n).proxy}/${n.id}`;
/** Rows of the active AZs' nodes: a standby node scaled to zero is out of rotation on purpose. */
const localRows = (ctx: ScenarioContext): string[] => ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby).map((n) => rowOf(ctx, n));

/** Waits, sample by sample, until `pred` holds or `ms` pass; returns whether it held. */
async function until(ctx: ScenarioContext, ms: number, pred: (s: Sample) => boolean): Promise<boolean> {
  const end = ctx.now() + ms;
  while (ctx.now() < end) {
    const s = await ctx.observer.tick();
    if (pred(s)) return true;
  }
  return false;
}

function healthy(ctx: ScenarioContext, s: Sample, n: SimNode): boolean {
  const a = s.nodes[n.id];
  return a?.status === "HEALTHY" && a.weight === 100 && l1Full(s.l1[rowOf(ctx, n)]);
}

/** Standby AZ back at zero: every standby node stopped, none booting or stopping. */
function standbyAtZero(ctx: ScenarioContext): boolean {
  const { cloud, standby } = ctx.stack;
  return !cloud || !standby || ctx.stack.nodes.filter((n) => n.az === standby.name).every((n) => cloud.powerOf(n.id) === "stopped");
}

/**
 * Every running node healthy at full weight in its AZ's proxy, every active AZ in the DNS
 * answer, baselines UP, and the standby AZ back at zero (a scenario that woke it waits out
 * the hold and the release, so the next one starts from the scaled-to-zero fleet).
 */
async function steady(ctx: ScenarioContext, timeoutMs = 15_000): Promise<boolean> {
  const active = ctx.stack.azs.filter((a) => !a.standby).map((a) => a.address);
  return until(
    ctx,
    timeoutMs + (ctx.stack.standby ? DRILL_TIMING.standbyHoldMs : 0),
    (s) =>
      standbyAtZero(ctx) &&
      ctx.stack.running().every((n) => healthy(ctx, s, n) && s.l1[`${backendOf(BASELINE_DEFAULT)}/${n.id}`]?.status === "UP" && s.l1[`${backendOf(BASELINE_TUNED)}/${n.id}`]?.status === "UP") &&
      s.dns !== null &&
      active.every((a) => s.dns!.includes(a)),
  );
}

function mark(ctx: ScenarioContext, kind: "inject" | "heal", label: string): number {
  const t = ctx.now();
  ctx.tl.marks.push({ t, kind, label });
  return t;
}

/** Common figures once `injectAt`, `healAt`, `endAt` and the victims are known. */
function finish(ctx: ScenarioContext, r: RunResult, victims: SimNode[], removedPred: (x: L1Sample | undefined) => boolean): void {
  const { tl } = ctx;
  const firstNot = (n: SimNode): number | null => firstAfter(tl.samples, r.injectAt, (s) => s.nodes[n.id]?.status !== "HEALTHY", r.healAt);
  const maxOf = (xs: (number | null)[]): number | null => (xs.length === 0 || xs.some((x) => x === null) ? null : Math.max(...(xs as number[])));
  if (victims.length) {
    r.detectMs = maxOf(victims.map(firstNot));
    r.l1Ms ??= firstAfter(tl.samples, r.injectAt, (s) => victims.every((n) => removedPred(s.l1[rowOf(ctx, n)])), r.healAt);
    const base = (proxy: string): number | null => firstAfter(tl.samples, r.injectAt, (s) => victims.every((n) => l1Removed(s.l1[`${proxy}/${n.id}`])), r.healAt);
    r.baselineMs = { default: base(backendOf(BASELINE_DEFAULT)), tuned: base(backendOf(BASELINE_TUNED)) };
  }
  r.failed = failuresBetween(tl, MAIN_CLIENT, r.injectAt, r.endAt);
  r.failedBaseline = { default: failuresBetween(tl, BASELINE_DEFAULT, r.injectAt, r.endAt), tuned: failuresBetween(tl, BASELINE_TUNED, r.injectAt, r.endAt) };
  const vk = new Set(victims.map((n) => rowOf(ctx, n)));
  r.falseFailovers += removedBetween(tl, localRows(ctx).filter((k) => !vk.has(k)), r.injectAt, r.healAt).length;
  r.victims = victims.map((n) => n.id);
}

/** The runs of one node fault: a victim per run from the active AZs, in turn. */
export interface NodeFault {
  inject(n: SimNode): Promise<void>;
  heal(n: SimNode): Promise<void>;
  /** Longest hold while waiting for the baselines. */
  holdMaxMs: number;
  /** Degraded (lower weight) is the expected L1 action, not removal. */
  degraded?: boolean;
}

let victimSeq = 0;
function nextVictim(ctx: ScenarioContext): SimNode {
  const active = ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby);
  return active[victimSeq++ % active.length];
}

async function runNodeFault(ctx: ScenarioContext, spec: ScenarioSpec, run: number, f: NodeFault): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  const pred = f.degraded ? l1Reduced : l1Removed;
  const row = rowOf(ctx, n);
  r.injectAt = mark(ctx, "inject", `${spec.name} ${n.id}`);
  await f.inject(n);
  await until(ctx, f.holdMaxMs, (s) => pred(s.l1[row]) && l1Removed(s.l1[`${backendOf(BASELINE_DEFAULT)}/${n.id}`]) && l1Removed(s.l1[`${backendOf(BASELINE_TUNED)}/${n.id}`]));
  // Hold a little past L1 so that failed requests caused by the fault are counted.
  await sleep(300);
  r.healAt = mark(ctx, "heal", `heal ${n.id}`);
  await f.heal(n);
  const ok = await until(ctx, 30_000, (s) => healthy(ctx, s, n));
  if (!ok) r.notes.push(`${n.id} did not recover at full weight in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, [n], pred);
  if (f.degraded && r.l1Ms !== null) r.extra.l1AfterThresholdMs = r.l1Ms - DRILL_TIMING.probeLatencyMs;
  r.extra.holdMs = r.healAt - r.injectAt;
  return r;
}

const NODE_FAULTS: Record<string, NodeFault> = {
  crash: { inject: (n) => n.crashInference(), heal: (n) => n.startInference("ready"), holdMaxMs: 8000 },
  "gpu-lost": { inject: (n) => n.gpuFault("gpuLost"), heal: (n) => n.gpuFault(null), holdMaxMs: 4000 },
  xid: {
    inject: (n) => n.xid(79),
    heal: async (n) => {
      await n.stopAgent();
      await n.startAgent();
    },
    holdMaxMs: 4000,
  },
  ecc: { inject: (n) => n.gpuFault("eccUncorrected"), heal: (n) => n.gpuFault(null), holdMaxMs: 4000 },
  "model-unloaded": { inject: (n) => n.setMode("unloaded"), heal: (n) => n.setMode("ready"), holdMaxMs: 4000 },
  wedged: { inject: (n) => n.setMode("wedged"), heal: (n) => n.setMode("ready"), holdMaxMs: 6000 },
  "latency-creep": { inject: (n) => n.setMode({ mode: "slow", slowMs: 900 }), heal: (n) => n.setMode("ready"), holdMaxMs: 6000, degraded: true },
};

/** Polls `GET /az/health` through one AZ's proxy address until stopped; records the first non-200. */
function watchAzHealth(ctx: ScenarioContext, az: DrillAz): { first503: () => number | null; stop(): void } {
  let closed = false;
  let first: number | null = null;
  void (async () => {
    while (!closed) {
      try {
        const r = await fetch(`http://${az.address}:${ctx.stack.port}/az/health`, { signal: AbortSignal.timeout(400) });
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

async function runAzGpuLoss(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const backups = ctx.stack.nodes.filter((n) => n.az !== az.name).map((n) => `${az.proxy}/${n.id}`);
  const backupTotal = (s: Sample): number => backups.reduce((a, k) => a + (s.l1[k]?.total ?? 0), 0);
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
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  const ok = await until(ctx, 30_000, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
  if (!ok) r.notes.push(`${az.name} did not recover in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
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

async function runAzLoss(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
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
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map(async (n) => {
    await n.startInference("ready");
    await n.startAgent();
  }));
  await ctx.stack.startAzProxy(az);
  const back = (s: Sample): boolean => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address);
  if (!(await until(ctx, 30_000, back))) r.notes.push(`${az.name} did not recover in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
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

function leaderNode(ctx: ScenarioContext): SimNode | null {
  const holder = ctx.observer.latestFleet()?.leader;
  if (!holder) return null;
  const matches = ctx.stack.nodes.filter((n) => holder === n.id || holder.startsWith(n.id));
  return matches.sort((a, b) => b.id.length - a.id.length)[0] ?? null;
}

/**
 * Fenced writes a deposed leader got through: a published hash (AZ state, tier) that changed
 * after a higher token was already in the lease, carrying a lower token.
 */
export function staleWrites(fleet: readonly FleetSample[], from: number): number {
  let highest = 0;
  let stale = 0;
  let prev: Record<string, number> = {};
  for (const f of fleet) {
    for (const [k, tok] of Object.entries(f.tokens)) {
      if (f.t >= from && prev[k] !== undefined && tok !== prev[k] && tok < highest) stale++;
    }
    prev = { ...prev, ...f.tokens };
    if (f.leaderToken !== undefined && f.leaderToken !== null) highest = Math.max(highest, f.leaderToken);
  }
  return stale;
}

async function runLeader(ctx: ScenarioContext, spec: ScenarioSpec, run: number, how: "kill" | "pause"): Promise<RunResult> {
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
  if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, n)))) r.notes.push(`${n.id} did not recover in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
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

async function runRedisRestart(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  r.injectAt = mark(ctx, "inject", "redis restart");
  await ctx.stack.redis.restart();
  const restartedAt = ctx.now();
  const leaderBack = (f: FleetSample): boolean => typeof f.leader === "string";
  const published = (f: FleetSample): boolean => ctx.stack.azs.every((a) => f.azState[a.name] !== undefined);
  await until(ctx, 15_000, () => ctx.tl.fleet.some((f) => f.t > restartedAt && leaderBack(f) && published(f)));
  await sleep(1000);
  r.healAt = mark(ctx, "heal", "redis back");
  r.endAt = ctx.now();
  r.leaderMs = firstAfter(ctx.tl.fleet, restartedAt + 1, leaderBack);
  r.extra.republishedMs = firstAfter(ctx.tl.fleet, restartedAt + 1, published);
  r.extra.restartMs = restartedAt - r.injectAt;
  finish(ctx, r, [], l1Removed);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  return r;
}

async function runFlap(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
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

async function runMassProbe(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
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

/** Leader events (`type=standby`, `type=action`…) written since `fromT` (drill clock), with their Redis time on the drill clock. */
async function eventsSince(ctx: ScenarioContext, fromT: number): Promise<{ t: number; f: Record<string, string> }[]> {
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
async function runStandbyWake(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const { standby, cloud } = ctx.stack;
  if (!standby || !cloud) {
    r.notMeasured = "no standby AZ (needs 3 AZs: --nodes 5 or more)";
    return r;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady (or standby not at zero) before injection");
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
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  const back = (s: Sample): boolean => victims.every((n) => healthy(ctx, s, n));
  if (!(await until(ctx, 30_000, back))) r.notes.push(`${az.name} did not recover in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
  // The controller's recovery hysteresis, then the hold, then the release and the stops.
  if (!(await until(ctx, DRILL_TIMING.standbyHoldMs + 15_000, () => standbyAtZero(ctx)))) r.notes.push(`${standby.name} not back at zero ${DRILL_TIMING.standbyHoldMs / 1000} s + 15 s after recovery`);
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

/** Runs one run of one scenario. */
export async function runScenario(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  if (spec.needsFleet && !ctx.fleetWired) {
    const r = blank(spec.name, run);
    r.notMeasured = "fleet layer (registry, leader, controller) not running in the agents: no leader appeared in Redis";
    return r;
  }
  const nf = NODE_FAULTS[spec.name];
  if (nf) return runNodeFault(ctx, spec, run, nf);
  switch (spec.name) {
    case "az-gpu-loss":
      return runAzGpuLoss(ctx, spec, run);
    case "standby-wake":
      return runStandbyWake(ctx, spec, run);
    case "az-loss":
      return runAzLoss(ctx, spec, run);
    case "leader-kill":
      return runLeader(ctx, spec, run, "kill");
    case "leader-pause":
      return runLeader(ctx, spec, run, "pause");
    case "redis-restart":
      return runRedisRestart(ctx, spec, run);
    case "flap":
      return runFlap(ctx, spec, run);
    case "mass-probe":
      return runMassProbe(ctx, spec, run);
    default: {
      const r = blank(spec.name, run);
      r.notMeasured = "no injector for this scenario";
      return r;
    }
  }
}

/** Waits up to `ms` for a leader in Redis: whether the fleet layer runs in the agents. */
export async function detectFleet(url: string, leaderKey: string, ms: number): Promise<boolean> {
  const redis = new Redis(url, { maxRetriesPerRequest: 0, connectTimeout: 500 });
  redis.on("error", () => undefined);
  try {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      try {
        if (await redis.get(leaderKey)) return true;
      } catch {
        // keep trying until the deadline
      }
      await sleep(200);
    }
    return false;
  } finally {
    redis.disconnect();
  }
}
