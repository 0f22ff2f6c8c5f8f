/**
 * `health-flood`: an unauthenticated address holds 1,000 connections open against one AZ's proxy —
 * half on its `/az/health` listener, half on its API frontend; of each half, half idle and half
 * slowloris (a request head that never ends). What it must not do:
 *
 * - fail the AZ's health check: `/az/health` polled from another address (as Route53's checkers
 *   and the drill's DNS server are) answers 200 within 2 s every time, and DNS never drops the AZ;
 * - slow the keyed clients: their p50 through the flooded proxy over their quiet p50, against the
 *   same ratio for the same requests sent straight to the servers in the same moments (what the
 *   machine's load costs both), at most 1.1; none of their requests fails.
 *
 * What holds it: per-source connection caps and short header and idle timeouts on both frontends
 * (contracts/haproxy-edge.ts); without them 70 idle connections were enough to time the checker out.
 */
import { sleep } from "../../../agent/src/util/net";
import { holdInChild } from "../hold-flood";
import { paced } from "../paced";
import type { ScenarioSpec } from "../scenarios";
import { l1Removed } from "../timeline";
import { pollEndpoints } from "./proxy-measure";
import { sameMomentSlowdown } from "./edge";
import { blank, finish, mark, steady, type RunResult, type ScenarioContext } from "./runner";

/** Connections the attacker holds, in all. */
export const HEALTH_FLOOD_CONNECTIONS = 1000;

/** A health check answered later than this failed (Route53 waits 4 s for the connection, then 2 s for the answer). */
const CHECK_LIMIT_MS = 2000;

export async function runHealthFlood(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs.find((a) => !a.standby)!;
  const { store, sync } = ctx.stack.edge;
  const tenant = await store.add(`health-flood-${run}`, { rps: 1000, concurrency: 100 }, "drill health-flood");
  const want = await store.revision();
  for (let i = 0; i < 100 && sync.state.revision !== want; i++) await sleep(50);
  // From a process of its own, as from another host: its reconnects (thousands a second once
  // the proxy closes those past the address's share) must not delay the clients measured here.
  const quarter = HEALTH_FLOOD_CONNECTIONS / 4;
  const held = await holdInChild([
    { host: az.address, port: ctx.stack.azHealthPort, n: quarter, mode: "idle" },
    { host: az.address, port: ctx.stack.azHealthPort, n: quarter, mode: "slowloris" },
    { host: az.address, port: ctx.stack.port, n: quarter, mode: "idle" },
    { host: az.address, port: ctx.stack.port, n: quarter, mode: "slowloris" },
  ]);
  const apiUrl = `http://${az.address}:${ctx.stack.port}`;
  const servers = ctx.stack.running().filter((n) => n.az === az.name);
  let sr = 0;
  const keyed = paced(() => apiUrl, () => ({ authorization: `Bearer ${tenant.key}` }), 20, ctx.now);
  // The baseline in the same moment: the same requests straight to the AZ's servers.
  const direct = paced(() => servers[sr++ % servers.length].inferenceUrl, () => ({}), 20, ctx.now);
  const checks = pollEndpoints([{ url: `http://${az.address}:${ctx.stack.azHealthPort}/az/health` }], ctx.now, 100, CHECK_LIMIT_MS);
  await sleep(6000);
  r.injectAt = mark(ctx, "inject", `${spec.name}: ${HEALTH_FLOOD_CONNECTIONS} idle and slowloris connections on ${az.name}'s /az/health listener and API frontend`);
  held.go();
  const floodFrom = ctx.now();
  await sleep(10_000);
  r.healAt = mark(ctx, "heal", `${spec.name}: flood stopped`);
  const opened = await held.stop();
  const floodS = (ctx.now() - floodFrom) / 1000;
  await sleep(1000);
  await Promise.all([keyed.stop(), direct.stop(), checks.stop()]);
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  const polled = checks.polls[0].filter((p) => p.t >= r.injectAt && p.t <= r.healAt);
  const failedChecks = polled.filter((p) => p.status !== 200);
  // DNS: the AZ's address missing from an answer while the flood ran.
  const dnsDrops = ctx.tl.samples.filter((s) => s.t >= r.injectAt && s.t <= r.endAt && s.dns !== null && !s.dns.includes(az.address)).length;
  r.falseFailovers += dnsDrops > 0 ? 1 : 0;
  Object.assign(r.extra, {
    healthChecks: polled.length,
    healthChecksFailed: failedChecks.length,
    healthCheckMaxMs: polled.length ? Math.max(...polled.map((p) => p.ms)) : null,
    dnsDrops,
    ...sameMomentSlowdown(keyed.records, direct.records, [r.injectAt - 5000, r.injectAt], [r.injectAt + 1000, r.healAt]),
    legitFailed: keyed.records.filter((s) => s.t >= r.injectAt && s.t < r.healAt && s.status !== 200).length,
    legitSent: keyed.records.length,
    floodConnects: opened,
    floodConnectsPerS: Math.round(opened / floodS),
  });
  r.extra.figures =
    `${HEALTH_FLOOD_CONNECTIONS} connections from another address on ${az.name}: /az/health ${polled.length - failedChecks.length} of ${polled.length} checks answered 200 within ${CHECK_LIMIT_MS / 1000} s ` +
    `(slowest ${r.extra.healthCheckMaxMs ?? "?"} ms), DNS dropped the AZ in ${dnsDrops} samples; keyed p50 ${r.extra.quietP50Ms} → ${r.extra.floodP50Ms} ms ` +
    `(straight to the servers ${r.extra.directQuietP50Ms} → ${r.extra.directFloodP50Ms} ms: the edge's own ×${r.extra.floodP50Ratio}), ${r.extra.legitFailed} keyed requests failed; the flood opened ${opened} connections (${r.extra.floodConnectsPerS}/s)`;
  r.notes.push(r.extra.figures as string);
  return r;
}
