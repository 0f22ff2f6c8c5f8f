/**
 * The shared runner of every scenario family: the result and context types, the wait for a
 * steady fleet before injection, the sample-by-sample wait, the inject/heal marks, victim
 * selection, and the figures common to every run (detection, L1, baselines, failed requests,
 * false failovers). The families under this folder build their runs from these pieces, so
 * every scenario is measured the same way.
 */
import type { SimNode } from "../../sim/sim-node";
import type { Observer } from "../observer";
import type { LinkCuts } from "../../engines/netns";
import { Redis } from "ioredis";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { sleep } from "../../../agent/src/util/net";
import { DRILL_TIMING, DRILL_WAKE_BACKOFF_MS } from "../settings";
import type { LocalCloud } from "../local-cloud";
import { backendOf, BASELINE_DEFAULT, BASELINE_TUNED, type DrillAz, type DrillStack } from "../stack";
import { SDK_CLIENT } from "../sdk-traffic";
import { countContinued, countCuts, type ContinuedCount, type CutCount, type Death } from "../cuts";
import { failuresBetween, firstAfter, l1Full, l1Removed, removedBetween, type L1Sample, type Sample, type Timeline } from "../timeline";

/** The traffic client that goes through llm-ha's proxies; the baseline clients are measured beside it. */
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
  /** Requests of the SDK-default client class (`llm-ha-sdk`) that failed after the SDK's own retries. */
  failedSdk: number;
  /**
   * Streams cut (a response begun, then broken) of every client class, and of the SDK class;
   * `hadTo`: those whose own server or AZ proxy died under them (`cuts.ts`).
   */
  cuts: { all: CutCount; sdk: CutCount };
  /** Streams the continuation relay carried on; of the greedy ones, how many read exactly as an undisturbed run. */
  continued: ContinuedCount;
  /** SDK-class failures nothing could have saved beyond its cuts that had to be (no server anywhere: set by the scenario). */
  failedSdkNoServer: number;
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
  /** Link cuts between drill members (iptables in the drill's own network namespace); null outside one. */
  cuts: LinkCuts | null;
}

/** A result with nothing measured yet; a run fills in what it saw. */
export function blank(scenario: string, run: number): RunResult {
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
    failedSdk: 0,
    cuts: { all: { cut: 0, hadTo: 0 }, sdk: { cut: 0, hadTo: 0 } },
    continued: { n: 0, greedy: 0, exact: 0 },
    failedSdkNoServer: 0,
    failedBaseline: { default: 0, tuned: 0 },
    falseFailovers: 0,
    staleWrites: null,
    baselineMs: { default: null, tuned: null },
    extra: {},
    notes: [],
  };
}

/** A node's row in its own AZ's proxy stats (`proxy/node`). */
export const rowOf = (ctx: ScenarioContext, n: SimNode): string => `${ctx.stack.azOf(n).proxy}/${n.id}`;
/** Rows of the active AZs' nodes: a standby node scaled to zero is out of rotation on purpose. */
export const localRows = (ctx: ScenarioContext): string[] => ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby).map((n) => rowOf(ctx, n));

/** Waits, sample by sample, until `pred` holds or `ms` pass; returns whether it held. */
export async function until(ctx: ScenarioContext, ms: number, pred: (s: Sample) => boolean): Promise<boolean> {
  const end = ctx.now() + ms;
  while (ctx.now() < end) {
    const s = await ctx.observer.tick();
    if (pred(s)) return true;
  }
  return false;
}

/** Back to normal: HEALTHY for the agent, full weight, and fully up in its AZ's proxy. */
export function healthy(ctx: ScenarioContext, s: Sample, n: SimNode): boolean {
  const a = s.nodes[n.id];
  return a?.status === "HEALTHY" && a.weight === 100 && l1Full(s.l1[rowOf(ctx, n)]);
}

/** Standby AZ back at zero: every standby node stopped, none booting or stopping. */
export function standbyAtZero(ctx: ScenarioContext): boolean {
  const { cloud, standby } = ctx.stack;
  return !cloud || !standby || ctx.stack.nodes.filter((n) => n.az === standby.name).every((n) => cloud.powerOf(n.id) === "stopped");
}

/**
 * Every running node healthy at full weight in its AZ's proxy, every active AZ in the DNS
 * answer, baselines UP, and the standby AZ back at zero (a scenario that woke it waits out
 * the hold and the release, so the next one starts from the scaled-to-zero fleet).
 */
export async function steady(ctx: ScenarioContext, timeoutMs = 15_000): Promise<boolean> {
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

/** Records an inject or heal mark on the timeline (the report draws them) and returns its time. */
export function mark(ctx: ScenarioContext, kind: "inject" | "heal", label: string): number {
  const t = ctx.now();
  ctx.tl.marks.push({ t, kind, label });
  return t;
}

/** Common figures once `injectAt`, `healAt`, `endAt` and the victims are known. */
export function finish(ctx: ScenarioContext, r: RunResult, victims: SimNode[], removedPred: (x: L1Sample | undefined) => boolean): void {
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
  r.failedSdk = failuresBetween(tl, SDK_CLIENT, r.injectAt, r.endAt);
  const offset = Date.now() - ctx.now();
  const deaths: Death[] = ctx.stack.deaths().map((d) => ({ ...d, t: d.at - offset }));
  r.cuts = { all: countCuts(tl.failures, null, r.injectAt, r.endAt, deaths), sdk: countCuts(tl.failures, SDK_CLIENT, r.injectAt, r.endAt, deaths) };
  r.continued = countContinued(tl.continued, r.injectAt, r.endAt);
  r.failedBaseline = { default: failuresBetween(tl, BASELINE_DEFAULT, r.injectAt, r.endAt), tuned: failuresBetween(tl, BASELINE_TUNED, r.injectAt, r.endAt) };
  const vk = new Set(victims.map((n) => rowOf(ctx, n)));
  r.falseFailovers += removedBetween(tl, localRows(ctx).filter((k) => !vk.has(k)), r.injectAt, r.healAt).length;
  r.victims = victims.map((n) => n.id);
}

// One counter for the whole drill, shared by every family that picks a single victim (node
// faults and the flap), so successive runs keep rotating through the active nodes as before.
let victimSeq = 0;
/** The next victim from the active AZs, in turn. */
export function nextVictim(ctx: ScenarioContext): SimNode {
  const active = ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby);
  return active[victimSeq++ % active.length];
}

/**
 * The standby AZ and the local cloud a standby scenario needs, once the fleet is steady (a
 * note when it is not); null with `r.notMeasured` set when the drill runs without a standby AZ.
 */
export async function standbyReady(ctx: ScenarioContext, r: RunResult): Promise<{ standby: DrillAz; cloud: LocalCloud } | null> {
  const { standby, cloud } = ctx.stack;
  if (!standby || !cloud) {
    r.notMeasured = "no standby AZ (needs 3 AZs: --nodes 5 or more)";
    return null;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady (or standby not at zero) before injection");
  await waitOutWakeBackoff(ctx, r);
  return { standby, cloud };
}

/**
 * A wake that ended with no healthy standby node (global-outage loses the standby's GPUs too)
 * makes the leader's next wake wait (LLMHA_STANDBY_WAKE_BACKOFF_MS, scaled down in the drill).
 * That is the product working, and it must not leak into the next scenario, which would then
 * measure the back-off instead of its own wake: a standby scenario starts once none is pending,
 * and notes how long it waited.
 */
/** The longest the drill waits for a back-off: the drill's first one doubled twice. */
const WAKE_BACKOFF_WAIT_CAP_MS = 4 * DRILL_WAKE_BACKOFF_MS;

async function waitOutWakeBackoff(ctx: ScenarioContext, r: RunResult): Promise<void> {
  const redis = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1, lazyConnect: true, connectTimeout: 1000 });
  redis.on("error", () => undefined);
  try {
    const key = new RedisKeys(ctx.stack.cluster).actuation;
    const [until_, reason] = await redis.hmget(key, "standby.backoffUntil", "standby.backoffReason").catch(() => [null, null]);
    const waitMs = Number(until_ || 0) - Date.now();
    if (!(waitMs > 0)) return;
    const capped = Math.min(waitMs, WAKE_BACKOFF_WAIT_CAP_MS);
    ctx.progress(`  waiting ${(capped / 1000).toFixed(1)} s for the wake back-off an earlier scenario left (${reason || "no reason given"})`);
    await sleep(capped + DRILL_TIMING.intervalMs);
    r.notes.push(`started ${(capped / 1000).toFixed(1)} s late: a wake back-off left by an earlier scenario (${(reason || "").slice(0, 160)})`);
  } finally {
    redis.disconnect();
  }
}

/**
 * The heal of a standby scenario: the AZ's GPUs back (a `heal` mark), the AZ back at full
 * weight (`recoveryMs`), then the controller's hysteresis, the hold and the release until the
 * standby is at zero again; a note for each that does not come.
 */
/**
 * After a heal: waits up to 30 s for `back`, records when it first held (`recoveryMs`, from the
 * heal) and a note naming `what` when it never did.
 */
export async function awaitRecovery(ctx: ScenarioContext, r: RunResult, what: string, back: (s: Sample) => boolean): Promise<void> {
  // A sample is stamped when it starts: on a loaded machine one begun before the heal can end
  // after it (its reads 0.7 s late), and stopping on it left no sample after the heal to time
  // the recovery by ("never" for a node that was back).
  if (!(await until(ctx, 30_000, (s) => s.t >= r.healAt && back(s)))) r.notes.push(`${what} did not recover in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
}

export async function healAzThenStandbyBack(ctx: ScenarioContext, r: RunResult, az: DrillAz, victims: SimNode[], standby: DrillAz): Promise<void> {
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)));
  if (!(await until(ctx, DRILL_TIMING.standbyHoldMs + 15_000, () => standbyAtZero(ctx)))) r.notes.push(`${standby.name} not back at zero ${DRILL_TIMING.standbyHoldMs / 1000} s + 15 s after recovery`);
}
