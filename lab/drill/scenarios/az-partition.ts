/**
 * `az-partition`: `az-a` keeps serving its own proxy but is cut from Redis (every
 * az-a node's path to the endpoint) and from the other AZs (az-a's proxy ↔ their nodes, their
 * proxies ↔ az-a's nodes), iptables inside the drill's namespace, for 15 s.
 *
 * What each tier should do (docs/drill.md): the az-a agents serve their local state (their
 * heartbeats fail, their agent-checks do not), so az-a's proxy keeps its nodes; az-a's
 * `/az/health` fails open (Redis unreachable: 200, `stale`), so DNS keeps az-a and its clients
 * stay served where they are; the leader (on the majority side) sees az-a's hashes expire and
 * may publish az-a worse — which never reaches DNS, by design; the other AZs' proxies lose
 * az-a's nodes as backups (their checks fail: correct). A leader that was in az-a loses the
 * lease at its TTL; one on the other side takes it.
 *
 * Judged — one consistent decision, no flapping, no split brain, az-a's clients served: 0 DNS
 * changes, 0 `/az/health` 503s from az-a, 0 failed requests through az-a's proxy, 0 stale
 * writes, 0 token regressions, at most one lease change.
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import type { LinkSpec } from "../../engines/netns";
import type { DrillAz, DrillStack } from "../stack";
import { dnsChanges, firstAfter, l1Removed, type Sample } from "../timeline";
import { azWorsenings, staleWrites } from "./fleet";
import { leaderChanges } from "./gray-watch";
import { shortThroughProxy } from "./proxy";
import { tokenRegressions, watchAzHealth } from "./redis";
import { blank, finish, healthy, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

const HOLD_MS = 15_000;

/** The links that partition `az`: its nodes' paths to the Redis endpoint, its proxy ↔ the other AZs' nodes, their proxies ↔ its nodes. */
export function partitionLinks(stack: DrillStack, az: DrillAz): LinkSpec[] {
  const others = stack.azs.filter((a) => a !== az);
  return [
    ...stack.nodes.filter((n) => n.az === az.name).map((n) => ({ from: n.address, to: "127.0.0.1", port: stack.redis.port })),
    ...others.map((o) => ({ from: az.address, to: `127.1.${o.index}.0/24` })),
    ...others.map((o) => ({ from: o.address, to: `127.1.${az.index}.0/24` })),
  ];
}

export async function runAzPartition(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  const { stack } = ctx;
  if (!ctx.cuts || !stack.redisPaths) {
    r.notMeasured = ctx.cuts ? "the nodes' own Redis paths were not started" : "needs the drill's own network namespace (root) to cut links";
    return r;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = stack.azs[0];
  const health = watchAzHealth(ctx);
  const wl = shortThroughProxy(ctx, az, 4);
  await sleep(1000);
  r.injectAt = mark(ctx, "inject", `${az.name} partitioned from Redis and the other AZs`);
  const links = partitionLinks(stack, az);
  for (const l of links) ctx.cuts.cut(l);
  await sleep(HOLD_MS);
  r.healAt = mark(ctx, "heal", `${az.name} joined again`);
  for (const l of links) ctx.cuts.heal(l);
  const back = (s: Sample): boolean => stack.running().every((n) => healthy(ctx, s, n));
  if (!(await until(ctx, 30_000, back))) r.notes.push("the fleet not back at full weight 30 s after the heal");
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
  await sleep(2000);
  r.endAt = ctx.now();
  await wl.stop();
  const polled = await health.stop();
  finish(ctx, r, [], l1Removed);
  r.victims = [`${az.name} (partitioned)`];
  r.falseFailovers += dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.staleWrites = staleWrites(ctx.tl.fleet, r.injectAt);
  r.extra.tokenRegressions = tokenRegressions(ctx.tl.fleet, r.injectAt);
  r.extra.azHealth503 = polled.bad;
  r.extra.leaseChanges = leaderChanges(ctx.tl.fleet, r.injectAt, r.endAt);
  r.extra.leaseChurn = Math.max(0, (r.extra.leaseChanges as number) - 1);
  const failed = wl.records.filter((x) => !x.ok && x.end >= r.injectAt && x.t <= r.endAt);
  r.extra.fieldFailed = failed.length;
  const worse = azWorsenings(ctx.tl.fleet, r.injectAt, r.endAt);
  const wake = ctx.tl.fleet.some((f) => f.t >= r.injectAt && f.t <= r.healAt && f.standbyWake);
  r.extra.figures =
    `through ${az.name}'s proxy ${wl.records.filter((x) => x.t >= r.injectAt && x.t <= r.healAt).length} requests during the partition, ${failed.length} failed; DNS changes ${dnsChanges(ctx.tl, r.injectAt, r.endAt)}; ` +
    `/az/health 503s ${polled.bad} of ${polled.polls}; lease changes ${r.extra.leaseChanges}; published worse: ${worse.seen.join(", ") || "none"}; standby woken: ${wake ? "yes" : "no"}; token regressions ${r.extra.tokenRegressions}`;
  r.notes.push(r.extra.figures);
  return r;
}
