/**
 * A planned move cuts nothing (issue 17): one active node drained as a scale-in or a node
 * drain does it — its agent answers `drain` and leaves, the inference server stops once the
 * requests it holds have finished — then booted again. Judged under the steady traffic and the
 * SDK-default class's ~1 s streams: no failed request in either, no other node out of rotation.
 */
import type { ScenarioSpec } from "../scenarios";
import { l1Removed, type Sample } from "../timeline";
import { blank, finish, healthy, mark, nextVictim, steady, until, type RunResult, type ScenarioContext } from "./runner";

export async function runNodeDrain(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const victim = nextVictim(ctx);
  const inFlight = await victim.inFlight();
  r.injectAt = mark(ctx, "inject", `drain ${victim.id}`);
  await victim.halt();
  r.extra.drainMs = ctx.now() - r.injectAt;
  r.extra.inFlightAtDrain = inFlight;
  r.healAt = mark(ctx, "heal", `boot ${victim.id}`);
  await victim.boot();
  const back = (s: Sample): boolean => healthy(ctx, s, victim);
  if (!(await until(ctx, 30_000, back))) r.notes.push(`${victim.id} not back at full weight in 30 s`);
  r.endAt = ctx.now();
  finish(ctx, r, [victim], l1Removed);
  r.extra.figures = `${victim.id} drained and stopped in ${((r.extra.drainMs as number) / 1000).toFixed(2)}s (${inFlight ?? "?"} requests in flight at the start); failed: plain ${r.failed}, sdk ${r.failedSdk}`;
  r.notes.push(r.extra.figures);
  return r;
}
