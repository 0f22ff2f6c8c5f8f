/**
 * Node faults (tier L1): crash, GPU lost, fatal XID, uncorrectable ECC, model unloaded,
 * wedged engine, latency creep. Each run hurts one node of the active AZs, holds until its
 * proxy row and both baselines have acted (or a hold limit), heals, and waits for the node
 * back at full weight.
 */
import type { SimNode } from "../../sim/sim-node";
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_TIMING } from "../settings";
import { backendOf, BASELINE_DEFAULT, BASELINE_TUNED } from "../stack";
import { firstAfter, l1Reduced, l1Removed } from "../timeline";
import { inFlightOf } from "./proxy-measure";
import { blank, finish, healthy, MAIN_CLIENT, mark, nextVictim, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The runs of one node fault: a victim per run from the active AZs, in turn. */
export interface NodeFault {
  inject(n: SimNode): Promise<void>;
  heal(n: SimNode): Promise<void>;
  /** Longest hold while waiting for the baselines. */
  holdMaxMs: number;
  /** Degraded (lower weight) is the expected L1 action, not removal. */
  degraded?: boolean;
  /**
   * The fault kills the server under the requests it holds: those cannot be replayed (a
   * proxy cannot tell a crash from a request that crashed its server, so it never retries
   * an empty response), and the run reports the failures beyond them.
   */
  killsInFlight?: boolean;
}

/** One run of a node fault; a degraded fault is judged by the lowered weight, and its L1 time is also given net of the latency threshold. */
export async function runNodeFault(ctx: ScenarioContext, spec: ScenarioSpec, run: number, f: NodeFault): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  const pred = f.degraded ? l1Reduced : l1Removed;
  const row = rowOf(ctx, n);
  const inFlight = f.killsInFlight ? await inFlightOf(n) : null;
  r.injectAt = mark(ctx, "inject", `${spec.name} ${n.id}`);
  await f.inject(n);
  const injectedAt = ctx.now();
  await until(ctx, f.holdMaxMs, (s) => pred(s.l1[row]) && l1Removed(s.l1[`${backendOf(BASELINE_DEFAULT)}/${n.id}`]) && l1Removed(s.l1[`${backendOf(BASELINE_TUNED)}/${n.id}`]));
  // Hold a little past L1 so that failed requests caused by the fault are counted.
  await sleep(300);
  r.healAt = mark(ctx, "heal", `heal ${n.id}`);
  await f.heal(n);
  const ok = await until(ctx, 30_000, (s) => healthy(ctx, s, n));
  if (!ok) r.notes.push(`${n.id} did not recover at full weight in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, [n], pred);
  if (f.degraded && r.l1Ms !== null) r.extra.l1AfterThresholdMs = r.l1Ms - DRILL_TIMING.probeLatencyMs;
  r.extra.holdMs = r.healAt - r.injectAt;
  if (f.killsInFlight) {
    // Requests that began before the kill had ended (the process exited) and failed after the
    // kill began: the dead server may have held them. Judged by when they began, not when their
    // failure was seen: on a loaded host the client sees a closed socket late.
    const held = ctx.tl.failures.filter((x) => x.client === MAIN_CLIENT && x.t <= injectedAt && (x.end ?? x.t) >= r.injectAt).length;
    r.extra.inFlightAtKill = inFlight;
    r.extra.failedBeyondInFlight = Math.max(0, r.failed - Math.max(inFlight ?? 0, held));
  }
  return r;
}

/** Each node fault's injection and heal; the hold limits leave the slower baselines time to act. */
export const NODE_FAULTS: Record<string, NodeFault> = {
  crash: { inject: (n) => n.crashInference(), heal: (n) => n.startInference("ready"), holdMaxMs: 8000, killsInFlight: true },
  "gpu-lost": { inject: (n) => n.gpuFault("gpuLost"), heal: (n) => n.gpuFault(null), holdMaxMs: 4000 },
  xid: {
    inject: (n) => n.xid(79),
    heal: async (n) => {
      await n.stopAgent();
      await n.startAgent();
    },
    holdMaxMs: 4000,
  },
  ecc: { inject: (n) => n.gpuFault("eccUncorrected"), heal: (n) => n.gpuFault(null), holdMaxMs: 4000 },
  "model-unloaded": { inject: (n) => n.setMode("unloaded"), heal: (n) => n.setMode("ready"), holdMaxMs: 4000 },
  wedged: { inject: (n) => n.setMode("wedged"), heal: (n) => n.setMode("ready"), holdMaxMs: 6000 },
  "latency-creep": { inject: (n) => n.setMode({ mode: "slow", slowMs: 900 }), heal: (n) => n.setMode("ready"), holdMaxMs: 6000, degraded: true },
};
