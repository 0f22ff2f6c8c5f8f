/**
 * `cross-az-loss`: 20 % of the connections between AZs lost — every AZ proxy's new
 * connections to another AZ's nodes (requests and agent-checks alike) refused one SYN in five
 * (iptables `statistic`, inside the drill's namespace; each AZ proxy connects from its own
 * address) — while every GPU of `az-a` is lost, so `az-a`'s proxy spills its traffic to the
 * other AZs' nodes (L2) over exactly those links. Short requests through `az-a`'s proxy all along.
 *
 * Judged: the spill still serves within az-gpu-loss's L2 target (cross ≤ 3 s), the requests
 * through `az-a`'s proxy all answered (HAProxy retries a refused connection on another server:
 * `retries 1`, `option redispatch`), no backup server taken out of rotation by lost checks
 * (`backupsOut`), no false failover elsewhere.
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import type { LinkSpec } from "../../engines/netns";
import type { DrillStack } from "../stack";
import { firstAfter, l1Removed, removedBetween, type Sample } from "../timeline";
import { shortThroughProxy } from "./proxy";
import { awaitRecovery, blank, finish, healthy, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Share of cross-AZ connections lost. */
export const CROSS_AZ_LOSS = 0.2;
const HOLD_MS = 10_000;

/** Every AZ proxy's new connections to another AZ's nodes, `share` of them refused. */
export function crossAzLinks(stack: DrillStack, share: number): LinkSpec[] {
  return stack.azs.flatMap((from) => stack.azs.filter((to) => to !== from).map((to) => ({ from: from.address, to: `127.1.${to.index}.0/24`, share })));
}

export async function runCrossAzLoss(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!ctx.cuts) {
    r.notMeasured = "needs the drill's own network namespace (root) to lose cross-AZ connections";
    return r;
  }
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const backupRows = ctx.stack.nodes.filter((n) => n.az !== az.name && n.running).map((n) => `${az.proxy}/${n.id}`);
  const backupTotal = (s: Sample): number => backupRows.reduce((a, k) => a + (s.l1[k]?.total ?? 0), 0);
  const wl = shortThroughProxy(ctx, az, 6);
  await sleep(1000);
  r.injectAt = mark(ctx, "inject", `${CROSS_AZ_LOSS * 100} % of cross-AZ connections lost; ${az.name}'s GPUs lost`);
  const links = crossAzLinks(ctx.stack, CROSS_AZ_LOSS);
  for (const l of links) ctx.cuts.cut(l);
  const before = backupTotal(ctx.observer.latest()!);
  await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
  const crossed = (s: Sample): boolean => backupTotal(s) > before;
  await until(ctx, 10_000, crossed);
  const from = ctx.now();
  await sleep(HOLD_MS);
  r.healAt = mark(ctx, "heal", `${az.name}'s GPUs back; cross-AZ links whole`);
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  for (const l of links) ctx.cuts.heal(l);
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
  await sleep(300);
  r.endAt = ctx.now();
  await wl.stop();
  finish(ctx, r, victims, l1Removed);
  r.crossMs = firstAfter(ctx.tl.samples, r.injectAt, crossed, r.healAt);
  const sent = wl.records.filter((x) => x.t >= from && x.t <= r.healAt);
  const failed = wl.records.filter((x) => !x.ok && x.end >= r.injectAt && x.t <= r.endAt);
  r.extra.fieldFailed = failed.length;
  r.extra.fieldSent = sent.length;
  r.extra.backupsOut = removedBetween(ctx.tl, backupRows, r.injectAt, r.healAt).length;
  r.extra.figures =
    `${az.name}'s traffic on other AZs' nodes ${r.crossMs === null ? "never" : `${(r.crossMs / 1000).toFixed(2)}s`} after the fault; ` +
    `through ${az.name}'s proxy ${sent.length} requests in the ${HOLD_MS / 1000} s spill, ${failed.length} failed${failed.length ? ` (${[...new Set(failed.map((f) => f.why))].slice(0, 3).join("; ")})` : ""}; ` +
    `backup rows taken out by lost checks: ${r.extra.backupsOut}`;
  r.notes.push(r.extra.figures);
  return r;
}
