/**
 * `redis-latency`: Redis 300 ms away for 30 s — every node's path to the endpoint
 * (placement.ts) holds each byte 150 ms each way, so every command's answer comes 300 ms late
 * (as a congested or far link would make it), then back to none.
 *
 * Judged: no false failover (no serving node out of L1, no DNS change, no AZ published
 * worse), no leader churn (the lease renews every 1 s with a 3 s TTL: a 300 ms round trip fits
 * inside a renew, so the settings promise none), heartbeats late but no node hash expired
 * (the hash lives 3 heartbeats, 1.5 s), 0 stale writes, 0 token regressions.
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { dnsChanges, l1Removed } from "../timeline";
import { azWorsenings, staleWrites } from "./fleet";
import { leaderChanges, watchRegistry } from "./gray-watch";
import { tokenRegressions } from "./redis";
import { blank, finish, mark, steady, type RunResult, type ScenarioContext } from "./runner";

/** One-way delay on every node's Redis path: 300 ms a round trip. */
export const REDIS_ONE_WAY_MS = 150;
const HOLD_MS = 30_000;

export async function runRedisLatency(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!ctx.stack.redisPaths) {
    r.notMeasured = "the nodes' own Redis paths were not started";
    return r;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const paths = ctx.stack.redisPaths.all();
  const registry = watchRegistry(ctx);
  r.injectAt = mark(ctx, "inject", `redis 300 ms away from every node for ${HOLD_MS / 1000} s`);
  for (const p of paths) p.setDelay(REDIS_ONE_WAY_MS);
  await sleep(HOLD_MS);
  for (const p of paths) p.setDelay(0);
  r.healAt = mark(ctx, "heal", "redis near again");
  // Past a node hash's TTL and a lease TTL: an expiry or a lost lease would show by now.
  await sleep(5000);
  r.endAt = ctx.now();
  const reg = await registry.stop();
  finish(ctx, r, [], l1Removed);
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt) + worse.count;
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  r.extra.leaderChanges = leaderChanges(ctx.tl.fleet, r.injectAt, r.endAt);
  r.extra.nodesExpired = reg.samples ? reg.expired.length : null;
  r.extra.maxHeartbeatAgeMs = reg.samples ? reg.maxHeartbeatAgeMs : null;
  r.victims = ["redis (every node's path)"];
  r.extra.figures =
    `heartbeats up to ${((reg.maxHeartbeatAgeMs ?? 0) / 1000).toFixed(2)}s old (${reg.samples} samples); node hashes expired: ${reg.expired.join(", ") || "none"}; ` +
    `lease holder changes ${r.extra.leaderChanges}; AZ states worsened: ${worse.seen.join(", ") || "none"}; token regressions ${r.extra.tokenRegressions}`;
  r.notes.push(r.extra.figures);
  return r;
}
