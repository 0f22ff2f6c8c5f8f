/**
 * `leader-isolated`: the leader's node cut from Redis (iptables on its path to the
 * endpoint, inside the drill's namespace) while everything else runs — its node keeps serving
 * its AZ proxy. Held two lease TTLs plus 2 s, then healed.
 *
 * Judged: another node holds the lease within TTL + contend of the cut (the isolated one can
 * renew nothing, so its term ends at its TTL and the others contend); 0 stale writes once it
 * is back (whatever it still had queued is fenced); 0 token regressions; no false failover for
 * the other nodes or in DNS. The isolated node's own registry entry expires (its heartbeats
 * cannot reach Redis): reported, not a miss — whether its AZ was published worse is reported too.
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { dnsChanges, firstAfter, l1Removed, type FleetSample } from "../timeline";
import { azWorsenings, leaderNode, staleWrites } from "./fleet";
import { leaderChanges, watchRegistry } from "./gray-watch";
import { tokenRegressions } from "./redis";
import { blank, finish, healthy, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

export async function runLeaderIsolated(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!ctx.cuts || !ctx.stack.redisPaths) {
    r.notMeasured = ctx.cuts ? "the nodes' own Redis paths were not started" : "needs the drill's own network namespace (root) to cut a link";
    return r;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const victim = leaderNode(ctx);
  if (!victim) {
    r.notMeasured = "no leader in Redis";
    return r;
  }
  const old = ctx.observer.latestFleet()?.leader ?? null;
  const link = { from: victim.address, to: "127.0.0.1", port: ctx.stack.redis.port };
  const registry = watchRegistry(ctx, { ignore: [victim.id] });
  r.injectAt = mark(ctx, "inject", `leader ${victim.id} cut from Redis`);
  ctx.cuts.cut(link);
  const other = (f: FleetSample): boolean => typeof f.leader === "string" && f.leader !== old;
  await until(ctx, DRILL_TIMING.leaseTtlMs + DRILL_TIMING.leaseContendMs + 5000, () => ctx.tl.fleet.some((f) => f.t >= r.injectAt && other(f)));
  await sleep(Math.max(0, 2 * DRILL_TIMING.leaseTtlMs + 2000 - (ctx.now() - r.injectAt)));
  r.healAt = mark(ctx, "heal", `${victim.id} reaches Redis again`);
  ctx.cuts.heal(link);
  if (!(await until(ctx, 20_000, (s) => healthy(ctx, s, victim)))) r.notes.push(`${victim.id} not healthy at full weight 20 s after the heal`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, victim));
  // Its late writes, if any, would land now: watch past a TTL.
  await sleep(DRILL_TIMING.leaseTtlMs);
  r.endAt = ctx.now();
  const reg = await registry.stop();
  r.leaderMs = firstAfter(ctx.tl.fleet, r.injectAt, other);
  finish(ctx, r, [], l1Removed);
  r.victims = [`${victim.id} (leader, cut from Redis)`];
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  // One change is the take-over; more is churn (e.g. the isolated one taking it back on heal).
  r.extra.leaderChurn = Math.max(0, leaderChanges(ctx.tl.fleet, r.injectAt, r.endAt) - 1);
  r.extra.othersExpired = reg.samples ? reg.expired.length : null;
  r.extra.figures =
    `new leader ${r.leaderMs === null ? "never" : `${(r.leaderMs / 1000).toFixed(2)}s`} after the cut; lease changes after the take-over ${r.extra.leaderChurn}; ` +
    `other nodes' hashes expired: ${reg.expired.join(", ") || "none"}; AZ states worsened: ${worse.seen.join(", ") || "none"} (the isolated node's heartbeats cannot reach Redis); token regressions ${r.extra.tokenRegressions}`;
  r.notes.push(r.extra.figures);
  return r;
}
