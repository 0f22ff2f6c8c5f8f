/**
 * `redis-failover-then-leader-kill`: the compound fault a black-box check found.
 * The Redis primary moves (Sentinel failover; the endpoint follows the promoted replica),
 * the old node stays reachable and later takes writes again — as a Sentinel setup does on the
 * far side of a partition until it demotes it: here `REPLICAOF NO ONE` on it while the
 * endpoint no longer sends anything there — then the leader is killed.
 *
 * Judged: a new leader within lease TTL + contend, on the endpoint's primary (the lease read
 * on the new primary names it), holding its term (the lease holder does not change for two
 * TTLs after); no agent connection left on the old node (`CLIENT LIST`, by the `llmha-` names
 * the agents give every connection); 0 stale writes, 0 token regressions, 0 false failovers.
 */
import type { Redis } from "ioredis";
import { sleep } from "../../../agent/src/util/net";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { parseLeaseValue } from "../../../agent/src/fleet/redis/lease";
import type { RedisServerHandle } from "../../engines/redis-server";
import { call, within } from "../../engines/redis-ha";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { dnsChanges, firstAfter, l1Removed, type FleetSample } from "../timeline";
import { azWorsenings, leaderNode, staleWrites } from "./fleet";
import { endpointOn, tokenRegressions } from "./redis";
import { awaitRecovery, blank, finish, healthy, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The endpoint's server line for a data server (`redis_primary/r1`, `/r2`: `redis-ha.ts`). */
function endpointServer(ctx: ScenarioContext, s: RedisServerHandle): string {
  return `redis_primary/r${ctx.stack.redis.servers.indexOf(s) + 1}`;
}

/** Runs `fn` on one data server directly (not through the endpoint), as the lab admin the endpoint URL names. */
export function onServer<T>(ctx: ScenarioContext, s: RedisServerHandle, fn: (r: Redis) => Promise<T>): Promise<T> {
  const url = new URL(ctx.stack.redis.url);
  return call(s.port, fn, url.username ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) } : undefined);
}

/** An endpoint runtime command, tried a few times (its admin socket answers slowly on a loaded host). */
async function endpointCommand(ctx: ScenarioContext, cmd: string): Promise<void> {
  for (let i = 1; ; i++) {
    try {
      await ctx.stack.redis.endpoint.command(cmd);
      return;
    } catch (err) {
      if (i >= 4) throw err;
      await sleep(250);
    }
  }
}

/** Connections of llm-ha agents on a data server (`CLIENT LIST`, names `llmha-<node>/<pid>-…`). */
export function agentClientsOn(ctx: ScenarioContext, s: RedisServerHandle): Promise<string[]> {
  return onServer(ctx, s, async (r) =>
    String(await r.call("CLIENT", "LIST"))
      .split("\n")
      .map((l) => /\bname=(\S+)/.exec(l)?.[1] ?? "")
      .filter((n) => n.startsWith("llmha-")),
  );
}

/** The lease holder written on one data server. */
function holderOn(ctx: ScenarioContext, s: RedisServerHandle): Promise<string | null> {
  return onServer(ctx, s, async (r) => {
    const v = await r.get(new RedisKeys(ctx.stack.cluster).leader);
    return v ? (parseLeaseValue(v)?.holder ?? v) : null;
  });
}

/** How long the old node takes writes again before the leader is killed. */
const WRITABLE_MS = 2000;

export async function runRedisFailoverThenLeaderKill(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const ha = ctx.stack.redis;
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const [first, second] = ha.servers;
  const old = (await ha.primary()) ?? first;
  const next = old === first ? second : first;
  r.injectAt = mark(ctx, "inject", "redis failover; the old node writable again; the leader killed");
  await ha.failover();
  if (!(await within(15_000, () => endpointOn(ha.url, next.port)))) r.notes.push("the endpoint did not reach the new primary in 15 s");
  r.extra.endpointMs = ctx.now() - r.injectAt;
  // The far side of a partition: the endpoint's name is on the new primary (nothing new goes to
  // the old node), but the old node is reachable and takes writes again on whatever still talks to it.
  await endpointCommand(ctx, `disable server ${endpointServer(ctx, old)}`);
  try {
    await onServer(ctx, old, (a) => a.call("REPLICAOF", "NO", "ONE"));
  } catch (err) {
    r.notMeasured = `could not make the old node (port ${old.port}) writable again: ${(err as Error).message}`;
    await healOld(ctx, old, next);
    return r;
  }
  await sleep(WRITABLE_MS);
  r.extra.oldNodeClientsBeforeKill = (await agentClientsOn(ctx, old).catch(() => [])).length;
  const victim = leaderNode(ctx);
  if (!victim) {
    r.notMeasured = "no leader in Redis before the kill";
    await healOld(ctx, old, next);
    return r;
  }
  const before = ctx.observer.latestFleet()?.leader ?? null;
  const killAt = mark(ctx, "inject", `leader ${victim.id} killed`);
  await victim.killAgent("SIGKILL");
  const newLeader = (f: FleetSample): boolean => typeof f.leader === "string" && f.leader !== before;
  await until(ctx, DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs + 10_000, () => ctx.tl.fleet.some((f) => f.t >= killAt && newLeader(f)));
  r.leaderMs = firstAfter(ctx.tl.fleet, killAt, newLeader);
  const elected = ctx.tl.fleet.find((f) => f.t >= killAt && newLeader(f))?.leader ?? null;
  r.extra.newLeader = elected;
  // Holding its term: the same holder for two TTLs (every renew on the primary the endpoint names).
  await sleep(2 * DRILL_TIMING.leaseTtlMs);
  const since = r.leaderMs === null ? ctx.now() : killAt + r.leaderMs;
  const holders = new Set(ctx.tl.fleet.filter((f) => f.t >= since && typeof f.leader === "string").map((f) => f.leader));
  r.extra.leaderChanges = elected === null ? null : holders.size - 1;
  const onPrimary = await holderOn(ctx, next).catch(() => null);
  r.extra.leaseNotOnPrimary = elected !== null && onPrimary === elected ? 0 : 1;
  const left = await agentClientsOn(ctx, old).catch(() => null);
  r.extra.oldNodeClients = left === null ? null : left.length;
  if (left?.length) r.notes.push(`agent connections on the old node: ${[...new Set(left)].slice(0, 6).join(", ")}`);
  r.healAt = mark(ctx, "heal", `old node a replica again; ${victim.id} restarted`);
  await healOld(ctx, old, next);
  await victim.startAgent();
  await awaitRecovery(ctx, r, victim.id, (s) => healthy(ctx, s, victim));
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  r.victims = [`${victim.id} (leader)`, `redis ${old.port} (old primary)`];
  // The killed agent's node goes unreported until it is back (its hash expires): its own AZ
  // published DEGRADED is the fleet seeing that, not a false failover; DOWN, another AZ or a DNS change is.
  const seenNode = `${ctx.stack.azOf(victim).name} OK→DEGRADED`;
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  const falseWorse = worse.seen.filter((w) => w !== seenNode);
  if (falseWorse.length < worse.seen.length) r.notes.push(`${seenNode} while ${victim.id}'s agent was down (expected: its node unreported)`);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt) + falseWorse.length;
  const fmt = (v: unknown): string => (typeof v === "number" ? `${(v / 1000).toFixed(2)}s` : "never");
  r.extra.figures =
    `endpoint on the new primary ${fmt(r.extra.endpointMs)}; agent connections on the old node before the kill ${r.extra.oldNodeClientsBeforeKill}, after ${r.extra.oldNodeClients}; ` +
    `new leader ${fmt(r.leaderMs)} after the kill (${elected ?? "none"}), lease on the new primary ${r.extra.leaseNotOnPrimary === 0 ? "yes" : "no"}, holder changes after ${r.extra.leaderChanges}; token regressions ${r.extra.tokenRegressions}`;
  r.notes.push(r.extra.figures);
  return r;
}

/** The old node a replica of the new primary again, back in the endpoint, the sentinels settled. */
async function healOld(ctx: ScenarioContext, old: RedisServerHandle, next: RedisServerHandle): Promise<void> {
  const ha = ctx.stack.redis;
  // The sentinels would demote it anyway, later.
  await onServer(ctx, old, (a) => a.call("REPLICAOF", "127.0.0.1", String(next.port))).catch(() => undefined);
  await endpointCommand(ctx, `enable server ${endpointServer(ctx, old)}`).catch(() => undefined);
  await ha.settle().catch(() => undefined);
}
