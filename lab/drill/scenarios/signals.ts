/**
 * The engine signals in the drill: `burst` (busy ≠ dead: a queue of 1,000 requests while tokens
 * flow must not take the node out) and `corrupt-weights` (the inference server restarts on
 * corrupted weights and fails to load: the node leaves and stays out until good weights load).
 */
import type { SimNode } from "../../sim/sim-node";
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { dnsChanges, firstAfter, l1Removed, removedBetween } from "../timeline";
import type { NodeFault } from "./node";
import { blank, finish, healthy, localRows, mark, nextVictim, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Requests of the burst, all sent at once to one node's inference server. */
export const BURST_REQUESTS = 1000;
/** The victim's batch while the burst runs: the rest wait in its queue. */
const BURST_BATCH = 16;
const BURST_TOKENS = 40;
const BURST_HOLD_MS = 8000;

/** The node faults of this family (measured by `runNodeFault`). */
export const SIGNAL_FAULTS: Record<string, NodeFault> = {
  // A restart onto corrupted weights: the server exits during load (Triton: the model UNAVAILABLE).
  "corrupt-weights": {
    inject: async (n) => {
      await n.crashInference();
      await n.startInference("failed-load");
    },
    heal: async (n) => {
      await n.crashInference();
      await n.startInference("ready");
    },
    holdMaxMs: 4000,
  },
};

/** Sends `count` completions at once straight to a node's server; resolves when each has ended or been cut off. */
function burst(n: SimNode, count: number, signal: AbortSignal): Promise<unknown> {
  const body = JSON.stringify({ model: n.opts.model ?? "llm-ha/test-model", prompt: "burst", max_tokens: BURST_TOKENS });
  return Promise.all(
    Array.from({ length: count }, () =>
      fetch(`${n.inferenceUrl}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, signal }).then(
        (r) => r.text(),
        () => undefined,
      ),
    ),
  );
}

/**
 * Busy ≠ dead: 1,000 requests queue on one node (batch 16, 40 tokens each: about a minute of
 * work) while its tokens flow. Its agent may lower its weight (`ENGINE_BUSY`, DEGRADED) but any
 * removal from its proxy — or of any other node — is a false failover.
 */
export async function runBurst(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  await n.setMode({ maxRunning: BURST_BATCH });
  const abort = new AbortController();
  r.injectAt = mark(ctx, "inject", `burst of ${BURST_REQUESTS} on ${n.id}`);
  const sent = burst(n, BURST_REQUESTS, abort.signal);
  await until(ctx, BURST_HOLD_MS, () => false);
  const status = await n.agentGet("/status").catch(() => null);
  const codes = ((status?.body.reasons as { code: string }[] | undefined) ?? []).map((x) => x.code);
  r.healAt = mark(ctx, "heal", `burst cut off on ${n.id}`);
  abort.abort();
  await sent;
  // The fake works through 1,000 closed connections first: on a loaded machine its admin port can
  // miss the 1 s limit (seen at load 20), which ended the whole drill. A few tries, then go on.
  for (let i = 0; ; i++) {
    const err = await n.setMode({ maxRunning: 0 }).then(() => null, (e: unknown) => e);
    if (err === null) break;
    if (i === 4) throw err;
    await sleep(500);
  }
  await until(ctx, 15_000, (s) => healthy(ctx, s, n));
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  r.victims = [n.id];
  const removed = removedBetween(ctx.tl, localRows(ctx), r.injectAt, r.endAt);
  const dns = dnsChanges(ctx.tl, r.injectAt, r.endAt);
  r.falseFailovers = removed.length + dns;
  if (removed.length || dns) r.notes.push(`false failovers: ${removed.length ? `out of rotation ${removed.join(",")}` : ""}${dns ? ` DNS changed ${dns}×` : ""}`);
  r.detectMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => s.nodes[n.id]?.status !== "HEALTHY", r.healAt);
  r.extra.burstRequests = BURST_REQUESTS;
  r.extra.reasonsAtEnd = codes.join(",") || "none";
  r.extra.degradedSamples = ctx.tl.samples.filter((s) => s.t >= r.injectAt && s.t <= r.healAt && s.nodes[n.id]?.status === "DEGRADED").length;
  // Through the end, not only the hold: the false failover `burst` once counted in every run came just after it ended.
  r.extra.victimRemoved = ctx.tl.samples.some((s) => s.t >= r.injectAt && s.t <= r.endAt && l1Removed(s.l1[rowOf(ctx, n)])) ? 1 : 0;
  return r;
}
