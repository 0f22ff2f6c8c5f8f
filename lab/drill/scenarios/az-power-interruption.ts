/**
 * `az-power-interruption`, as AWS FIS's "AZ Availability: Power Interruption":
 * everything placed in `az-a` fails at once — its proxy, its nodes' inference servers and
 * agents (SIGKILL), the leader (placed on an `az-a` node first), the Redis primary (placed
 * in `az-a`: SIGKILL; the sentinels in the other AZs promote the replica in `az-b`) and the
 * Kafka broker placed in `az-a` (down; its partitions keep it as leader, queue-probe.ts). Heal:
 * the old primary back as a replica, the broker up, the AZ's processes started again.
 *
 * Judged: DNS drops `az-a` within the L3 target (5 s); a new leader within lease TTL + contend
 * after the endpoint reaches the new primary (Redis writable again); the healthy AZs never
 * published worse; 0 stale writes, 0 token regressions; the tier never L4 while other AZs
 * serve; SDK-class failures only for streams whose server or proxy died (every scenario's rule);
 * the L4 queue, written every 100 ms throughout, acknowledges every write.
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { firstAfter, l1Removed, type FleetSample, type Sample } from "../timeline";
import { azWorsenings, staleWrites } from "./fleet";
import { placeLeader, redisServerIn } from "../placement";
import { endpointOn, tokenRegressions } from "./redis";
import { QueueProbe } from "./queue-probe";
import type { DrillAz } from "../stack";
import type { SimNode } from "../../sim/sim-node";
import type { RedisServerHandle } from "../../engines/redis-server";
import { blank, finish, healthy, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** What a power interruption in one AZ takes out, once the drill placed the Redis primary and the leader there. */
export interface PowerCut {
  az: DrillAz;
  dying: RedisServerHandle;
  survivor: RedisServerHandle;
  victims: SimNode[];
  queue: QueueProbe | null;
  brokerDown?: Promise<unknown>;
}

/**
 * The setup both the drill scenario and the game day's local FIS start from: the Redis server
 * placed in the first AZ is the primary, the L4 queue probe running, the fleet steady, the
 * leader on one of that AZ's nodes. A reason instead when the world has no such server.
 */
export async function preparePowerCut(ctx: ScenarioContext, notes: string[]): Promise<PowerCut | string> {
  const { stack } = ctx;
  const az = stack.azs[0];
  const ha = stack.redis;
  const primaryIdx = redisServerIn(stack.placement, az.name);
  if (primaryIdx === null) return `no Redis server placed in ${az.name}`;
  const dying = ha.servers[primaryIdx];
  const survivor = ha.servers[1 - primaryIdx];
  if ((await ha.primary()) !== dying) await ha.restoreFirstPrimary().catch((err: Error) => notes.push(`setup: ${err.message}`));
  const queue = await QueueProbe.start({ cluster: stack.cluster, placement: stack.placement, now: ctx.now }).catch((err: Error) => {
    notes.push(`setup: no Kafka cluster to fail a broker of: ${err.message}`);
    return null;
  });
  if (!(await steady(ctx))) notes.push("fleet not steady before injection");
  const victims = stack.nodes.filter((n) => n.az === az.name && n.running);
  try {
    if (!stack.redisPaths) throw new Error("no Redis paths to place the leader with");
    const ms = await placeLeader(stack, stack.redisPaths, victims[0]);
    notes.push(`setup: leader placed on ${victims[0].id} in ${(ms / 1000).toFixed(1)} s`);
  } catch (err) {
    notes.push(`setup: ${(err as Error).message}`);
  }
  if (!(await steady(ctx))) notes.push("fleet not steady after placing the leader");
  return { az, dying, survivor, victims, queue };
}

/** The fault: the AZ's proxy, its Redis server (the primary), its Kafka broker and every node's server and agent, at once. */
export async function cutPower(ctx: ScenarioContext, c: PowerCut, notes: string[]): Promise<void> {
  ctx.stack.killAzProxy(c.az);
  c.dying.kill("SIGKILL");
  c.brokerDown = c.queue?.failAz(c.az.name).catch((err: Error) => notes.push(`Kafka broker not failed: ${err.message}`));
  await Promise.all(c.victims.map((n) => Promise.all([n.crashInference(), n.killAgent("SIGKILL")])));
}

/** Power back: the broker up, the old primary back as a replica of the promoted one, the nodes and the proxy started again. */
export async function restorePower(ctx: ScenarioContext, c: PowerCut, notes: string[]): Promise<void> {
  await c.brokerDown;
  await c.queue?.healAz().catch((err: Error) => notes.push(`Kafka broker not back: ${err.message}`));
  await c.dying.restart(["--replicaof", "127.0.0.1", String(c.survivor.port)]);
  await ctx.stack.redis.settle().catch((err: Error) => notes.push(`sentinels not settled: ${err.message}`));
  await Promise.all(c.victims.map(async (n) => {
    await n.startInference("ready");
    await n.startAgent();
  }));
  await ctx.stack.startAzProxy(c.az);
}

export async function runAzPowerInterruption(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const cut = await preparePowerCut(ctx, r.notes);
  if (typeof cut === "string") {
    r.notMeasured = cut;
    return r;
  }
  try {
    return await interrupt(ctx, r, cut);
  } finally {
    await cut.queue?.stop();
  }
}

async function interrupt(ctx: ScenarioContext, r: RunResult, cut: PowerCut): Promise<RunResult> {
  const { az, dying, survivor, victims, queue } = cut;
  const ha = ctx.stack.redis;
  const stack = ctx.stack;
  const oldLeader = ctx.observer.latestFleet()?.leader ?? null;
  r.injectAt = mark(ctx, "inject", `power interruption in ${az.name}: proxy, nodes, leader, Redis primary, Kafka broker`);
  await cutPower(ctx, cut, r.notes);
  const gone = (s: Sample): boolean => s.dns !== null && !s.dns.includes(az.address);
  const onNew = (await (async () => {
    const end = Date.now() + 30_000;
    while (Date.now() < end) {
      if (await endpointOn(ha.url, survivor.port).catch(() => false)) return true;
      await sleep(100);
    }
    return false;
  })()) ? ctx.now() : null;
  if (onNew === null) r.notes.push("the endpoint did not reach the promoted replica in 30 s");
  const writableAt = onNew ?? ctx.now();
  r.extra.redisWritableMs = writableAt - r.injectAt;
  const newLeader = (f: FleetSample): boolean => typeof f.leader === "string" && f.leader !== oldLeader;
  await until(ctx, 15_000, (s) => gone(s) && ctx.tl.fleet.some((f) => f.t >= writableAt && newLeader(f)));
  await sleep(3000);
  r.healAt = mark(ctx, "heal", `${az.name} powered again`);
  await restorePower(ctx, cut, r.notes);
  const back = (s: Sample): boolean => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address);
  if (!(await until(ctx, 40_000, back))) r.notes.push(`${az.name} did not recover in 40 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
  await sleep(300);
  r.endAt = ctx.now();
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, gone, r.healAt);
  const led = firstAfter(ctx.tl.fleet, writableAt, newLeader);
  r.leaderMs = led;
  finish(ctx, r, [], l1Removed);
  const q = queue?.figures(r.injectAt, r.healAt) ?? null;
  r.victims = [`${az.name}: proxy, ${victims.map((n) => n.id).join(", ")}, leader, redis primary ${dying.port}${q?.failedBrokers.length ? `, kafka ${q.failedBrokers.join(", ")}` : ""}`];
  r.detectMs = r.dnsMs;
  const healthyAzs = stack.azs.filter((a) => a !== az).map((a) => a.name);
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.healAt);
  r.extra.healthyWorsened = worse.seen.filter((w) => healthyAzs.includes(w.split(" ")[0])).length;
  r.extra.l4Entered = ctx.tl.fleet.some((f) => f.t >= r.injectAt && f.t <= r.healAt && f.tier === "L4") ? 1 : 0;
  // Without a cluster (python3 missing) the count stays unset and the report says it was not measured.
  if (q) r.extra.queueFailed = q.failed;
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  const fmt = (v: number | null): string => (v === null ? "never" : `${(v / 1000).toFixed(2)}s`);
  r.extra.figures =
    `DNS without ${az.name} ${fmt(r.dnsMs)}; Redis writable on the promoted replica ${fmt(writableAt - r.injectAt)} after the fault, a new leader ${fmt(led)} after that (TTL + contend ${((DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs) / 1000).toFixed(1)}s); ` +
    `AZ states worsened: ${worse.seen.join(", ") || "none"}; L4 entered ${r.extra.l4Entered ? "yes" : "no"}; token regressions ${r.extra.tokenRegressions}; ` +
    (q ? `L4 queue with ${q.failedBrokers.join(", ") || "no broker"} down: ${q.writes - q.failed} of ${q.writes} writes acknowledged, ${q.redirected} to another broker's partition, slowest ${q.maxMs} ms` : "L4 queue not measured");
  r.notes.push(r.extra.figures);
  return r;
}
