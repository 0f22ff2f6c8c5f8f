/**
 * Redis failovers as ElastiCache Multi-AZ has them, on the drill's primary +
 * replica + sentinels behind one endpoint (`lab/engines/redis-ha.ts`):
 *
 * - `redis-failover`: a Sentinel failover to a replica that is caught up; the old primary is
 *   demoted at once and replicates from the new one.
 * - `redis-failover-lag`: the first primary is cut off from its replica and the sentinels and
 *   keeps taking the agents' writes for 3 s, then it is lost; the sentinels promote the
 *   replica, which missed those writes (node hashes expired there while `members` lists the
 *   nodes, an older lease and fence); the old primary comes back as a replica.
 *
 * - `redis-blackhole`: the primary goes silent (SIGSTOP) without closing a connection; the
 *   sentinels promote the replica; clients must leave the silent one by themselves.
 *
 * Judged: no false failover (no AZ published worse, no DNS change, no serving node out of
 * rotation, no `/az/health` 503 for a live AZ), fencing tokens never lower than one seen, no
 * stale write, a leader again within TTL + contend and the registry complete within two
 * heartbeats of the endpoint reaching the new primary.
 */
import { recordKeys } from "../record-keys";
import { Redis } from "ioredis";
import { sleep } from "../../../agent/src/util/net";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { within } from "../../engines/redis-ha";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { dnsChanges, firstAfter, l1Removed, type FleetSample } from "../timeline";
import { azWorsenings, staleWrites } from "./fleet";
import { blank, finish, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Times a leader's token was lower than the highest one seen before it, from `from` on. */
export function tokenRegressions(fleet: readonly FleetSample[], from: number): number {
  let highest = 0;
  let n = 0;
  for (const f of fleet) {
    const tok = f.leaderToken;
    if (typeof tok !== "number") continue;
    if (f.t >= from && tok < highest) n++;
    highest = Math.max(highest, tok);
  }
  return n;
}

/** Polls every active AZ's own `/az/health` listener; counts the 503s (each AZ's nodes stay alive). */
export function watchAzHealth(ctx: ScenarioContext): { stop(): Promise<{ polls: number; bad: number; seen: string[] }> } {
  let on = true;
  let polls = 0;
  let bad = 0;
  const seen: string[] = [];
  const azs = ctx.stack.azs.filter((a) => !a.standby);
  const loop = (async () => {
    while (on) {
      await Promise.all(
        azs.map(async (a) => {
          try {
            const r = await fetch(`http://${a.address}:${ctx.stack.azHealthPort}/az/health`, { signal: AbortSignal.timeout(1000) });
            polls++;
            if (r.status === 503) {
              bad++;
              if (seen.length < 5) seen.push(`${a.name} ${JSON.stringify(await r.json().catch(() => ({})))}`);
            }
          } catch {
            // an unanswered poll is the proxy's trouble, not a 503 (counted by the L1 figures)
          }
        }),
      );
      await sleep(100);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return { polls, bad, seen };
    },
  };
}

/** ms from `from` until every running node's hash exists again, read through the endpoint (null: not within `limitMs`). */
async function registryBack(ctx: ScenarioContext, from: number, limitMs: number): Promise<number | null> {
  const keys = new RedisKeys(ctx.stack.cluster);
  const r = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 500, commandTimeout: 500, retryStrategy: () => 50 });
  r.on("error", () => undefined);
  try {
    const ids = ctx.stack.running().map((n) => n.id);
    const ok = await within(limitMs, async () => (await Promise.all((await recordKeys(r, keys, ids)).map((k) => r.exists(k)))).every((x) => x === 1), 20);
    return ok ? ctx.now() - from : null;
  } finally {
    r.disconnect();
  }
}

/** The endpoint reaches the server with this port (by its `ROLE` and the port it reports). */
export async function endpointOn(url: string, port: number): Promise<boolean> {
  const r = new Redis(url, { maxRetriesPerRequest: 0, connectTimeout: 500, commandTimeout: 500, retryStrategy: () => null, lazyConnect: true });
  r.on("error", () => undefined);
  try {
    await r.connect();
    return /^tcp_port:(\d+)/m.exec(await r.info("server"))?.[1] === String(port) && (await r.info("replication")).includes("role:master");
  } finally {
    r.disconnect();
  }
}

type RedisFault = "failover" | "lag" | "blackhole";

/** How long the cut-off primary takes writes its replica misses: over the drill's node-hash TTL (3 × 500 ms). */
const LAG_MS = 3000;

async function runRedisFault(ctx: ScenarioContext, spec: ScenarioSpec, run: number, fault: RedisFault): Promise<RunResult> {
  const r = blank(spec.name, run);
  const ha = ctx.stack.redis;
  const lag = fault === "lag";
  if (lag && !(await ha.partitionable())) {
    // An earlier scenario moved the primary: put the first one back (a setup step, not the fault).
    const t = ctx.now();
    await ha.restoreFirstPrimary().catch((err: Error) => r.notes.push(`could not make the first server primary again: ${err.message}`));
    if (!(await ha.partitionable())) {
      r.notMeasured = "the first server could not be made the primary seen through its link again";
      return r;
    }
    r.notes.push(`setup: the first Redis server made primary again in ${((ctx.now() - t) / 1000).toFixed(1)} s`);
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const health = watchAzHealth(ctx);
  const [first, second] = ha.servers;
  const before = (await ha.primary()) ?? first;
  const next = before === first ? second : first;
  const what = { failover: "redis sentinel failover", lag: "redis primary cut off from replica and sentinels", blackhole: "redis primary silent (SIGSTOP), its connections left open" }[fault];
  r.injectAt = mark(ctx, "inject", what);
  if (fault === "blackhole") {
    // Every command to it hangs; nothing closes: clients must leave it by themselves.
    await before.pause();
    if (!(await within(45_000, async () => (await ha.sentinelPrimaryPort()) === next.port))) r.notes.push("the sentinels did not promote the replica in 45 s");
    r.extra.promotedMs = ctx.now() - r.injectAt;
    before.kill("SIGKILL");
  } else if (lag) {
    ha.partitionFirstPrimary();
    // The primary keeps taking the agents' writes the replica never gets (longer than a node
    // hash's TTL: on the replica every node hash expires), then it is lost; the sentinels
    // promote the replica with what it had at the cut.
    await sleep(LAG_MS);
    before.kill("SIGKILL");
    if (!(await within(30_000, async () => (await ha.sentinelPrimaryPort()) === next.port))) r.notes.push("the sentinels did not promote the replica in 30 s");
    r.extra.promotedMs = ctx.now() - r.injectAt;
  } else {
    await ha.failover();
    r.extra.promotedMs = ctx.now() - r.injectAt;
  }
  const onNewAt = (await within(15_000, () => endpointOn(ha.url, next.port))) ? ctx.now() : null;
  if (onNewAt === null) r.notes.push("the endpoint did not reach the new primary in 15 s");
  const from = onNewAt ?? ctx.now();
  r.extra.endpointMs = from - r.injectAt;
  r.extra.registryMs = await registryBack(ctx, from, 10_000);
  if (fault !== "failover") {
    // ElastiCache brings the failed primary back as a replica of the new one.
    await before.restart(["--replicaof", "127.0.0.1", String(next.port)]);
  }
  // Ready for the next fault: the sentinels' view rebuilt from what runs now.
  await ha.settle().catch((err: Error) => r.notes.push(`sentinels not settled: ${err.message}`));
  const leads = (f: FleetSample): boolean => typeof f.leader === "string" && f.t > from;
  await until(ctx, DRILL_TIMING.leaseTtlMs + 10_000, () => ctx.tl.fleet.some(leads));
  // Watch past the silence grace: a false DOWN would come once the hold ends.
  await sleep(12_000);
  r.healAt = mark(ctx, "heal", "redis settled");
  r.endAt = ctx.now();
  const polled = await health.stop();
  r.leaderMs = firstAfter(ctx.tl.fleet, from, leads);
  finish(ctx, r, [], l1Removed);
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  r.extra.azWorsened = worse.seen.join(", ") || "none";
  r.extra.azHealth503 = polled.bad;
  r.extra.azHealthPolls = polled.polls;
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt) + worse.count;
  const fmt = (v: unknown): string => (typeof v === "number" ? `${(v / 1000).toFixed(2)}s` : "never");
  r.extra.figures =
    `promoted ${fmt(r.extra.promotedMs)} after the fault, endpoint on it ${fmt(r.extra.endpointMs)}; leader ${fmt(r.leaderMs)} and registry complete ${fmt(r.extra.registryMs)} after that; ` +
    `AZ states worsened: ${r.extra.azWorsened}; /az/health 503s ${polled.bad} of ${polled.polls}${polled.seen.length ? ` (${polled.seen.join("; ")})` : ""}; token regressions ${r.extra.tokenRegressions}`;
  r.notes.push(r.extra.figures);
  return r;
}

export function runRedisFailover(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  return runRedisFault(ctx, spec, run, "failover");
}

export function runRedisFailoverLag(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  return runRedisFault(ctx, spec, run, "lag");
}

export function runRedisBlackhole(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  return runRedisFault(ctx, spec, run, "blackhole");
}

/**
 * `redis-slow`: the leader stops (SIGTERM: it releases the lease) and, at the same moment, Redis
 * holds every write for 1.5 s (`CLIENT PAUSE 1500 WRITE`): the release and the contenders'
 * acquisitions time out on their clients and run in Redis afterwards. One of them must lead within one contend period of Redis taking
 * writes again — not a lease TTL later (an acquisition that ran after its client gave up used
 * to orphan the lease) — and no write may go through with an older token.
 */
export async function runRedisSlow(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const leaderId = ctx.observer.latestFleet()?.leader ?? null;
  const leader = ctx.stack.running().find((n) => leaderId !== null && leaderId.startsWith(`${n.id}/`));
  if (!leader) {
    r.notMeasured = "no leader to take over from";
    return r;
  }
  const admin = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 0, connectTimeout: 1000 });
  admin.on("error", () => undefined);
  const PAUSE_MS = 1500;
  try {
    r.injectAt = mark(ctx, "inject", `stop leader ${leader.id} + redis writes paused ${PAUSE_MS} ms`);
    await Promise.all([admin.call("CLIENT", "PAUSE", PAUSE_MS, "WRITE"), leader.killAgent("SIGTERM")]);
  } finally {
    admin.disconnect();
  }
  const writesBack = r.injectAt + PAUSE_MS;
  const other = (f: FleetSample): boolean => typeof f.leader === "string" && !f.leader.startsWith(`${leader.id}/`) && f.t > writesBack;
  await until(ctx, DRILL_TIMING.leaseTtlMs + 10_000, () => ctx.tl.fleet.some(other));
  r.healAt = mark(ctx, "heal", `restart agent ${leader.id}`);
  await leader.startAgent();
  await sleep(3000);
  r.endAt = ctx.now();
  r.leaderMs = firstAfter(ctx.tl.fleet, writesBack, other);
  // The stopped agent's node drains: out of rotation by design, not a false failover.
  finish(ctx, r, [leader], l1Removed);
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.extra.figures = `a new leader ${r.leaderMs === null ? "never" : `${(r.leaderMs / 1000).toFixed(2)}s`} after Redis took writes again (lease TTL ${DRILL_TIMING.leaseTtlMs / 1000} s, contend ${DRILL_TIMING.leaseContendMs / 1000} s)`;
  r.notes.push(r.extra.figures);
  return r;
}
