/**
 * Every server kind, not only vLLM: one active node is made a TGI, a Triton (with its
 * OpenAI-compatible frontend), a llama.cpp and a plain OpenAI-compatible server in turn, each
 * under the drill's traffic; on each, the engine is wedged (completions hang, `/health` stays
 * 200) and then the server crashed, and the time to leave its AZ proxy is measured. The
 * targets: a wedge out within 1.5 s where the server exports progress metrics (TGI,
 * Triton, llama.cpp), within 6 s for a plain OpenAI-compatible server (the probe alone); a crash
 * within the crash scenario's 1.2 s. The node is a vLLM again at the end.
 */
import type { InferenceKind } from "../../../agent/src/config/spec";
import type { SimNode } from "../../sim/sim-node";
import type { ScenarioSpec } from "../scenarios";
import { firstAfter, l1Removed, type Sample } from "../timeline";
import { blank, finish, healthy, mark, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The kinds tried, with whether each exports engine progress metrics the wedge rule reads. */
export const OTHER_KINDS: readonly { kind: InferenceKind; progressMetrics: boolean }[] = [
  { kind: "tgi", progressMetrics: true },
  { kind: "triton", progressMetrics: true },
  { kind: "llamacpp", progressMetrics: true },
  { kind: "openai", progressMetrics: false },
];

/** How long one fault may take to remove the node before the run gives up on it. */
const HOLD_MS = 10_000;

/** Injects a fault on `n`, returns the time to its removal from its AZ proxy (null: not within the hold), heals it and waits for it back. */
async function removalTime(ctx: ScenarioContext, n: SimNode, label: string, inject: () => Promise<void>, heal: () => Promise<void>, notes: string[]): Promise<{ detect: number | null; l1: number | null }> {
  const row = rowOf(ctx, n);
  const t0 = mark(ctx, "inject", `${label} ${n.id}`);
  await inject();
  await until(ctx, HOLD_MS, (s: Sample) => l1Removed(s.l1[row]));
  const heal0 = mark(ctx, "heal", `heal ${n.id}`);
  const l1 = firstAfter(ctx.tl.samples, t0, (s) => l1Removed(s.l1[row]), heal0);
  const detect = firstAfter(ctx.tl.samples, t0, (s) => s.nodes[n.id]?.status !== "HEALTHY", heal0);
  await heal();
  if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, n)))) notes.push(`${n.id} (${n.kind}) not back at full weight 30 s after ${label}`);
  return { detect, l1 };
}

export async function runServerKinds(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const active = ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby);
  const n = active[active.length - 1];
  r.injectAt = ctx.now();
  const rows: string[] = [];
  const wedgedMetrics: (number | null)[] = [];
  const wedgedPlain: (number | null)[] = [];
  const crashes: (number | null)[] = [];
  const detects: (number | null)[] = [];
  try {
    for (const { kind, progressMetrics } of OTHER_KINDS) {
      await n.switchKind(kind);
      if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, n)))) {
        r.notes.push(`${n.id} as ${kind} never served at full weight: not measured`);
        (progressMetrics ? wedgedMetrics : wedgedPlain).push(null);
        crashes.push(null);
        continue;
      }
      const wedged = await removalTime(ctx, n, `wedged (${kind})`, () => n.setMode("wedged"), () => n.setMode("ready"), r.notes);
      const crash = await removalTime(ctx, n, `crash (${kind})`, () => n.crashInference(), () => n.startInference("ready"), r.notes);
      (progressMetrics ? wedgedMetrics : wedgedPlain).push(wedged.l1);
      crashes.push(crash.l1);
      detects.push(wedged.detect, crash.detect);
      const f = (v: number | null): string => (v === null ? "never" : `${(v / 1000).toFixed(2)}s`);
      rows.push(`${kind}: wedged out in ${f(wedged.l1)}, crash out in ${f(crash.l1)}`);
    }
  } finally {
    await n.switchKind("vllm");
  }
  r.healAt = ctx.now();
  if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, n)))) r.notes.push(`${n.id} not back as vLLM at full weight in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, n));
  r.endAt = ctx.now();
  finish(ctx, r, [n], l1Removed);
  const worst = (xs: (number | null)[]): number | null => (xs.length === 0 || xs.some((x) => x === null) ? null : Math.max(...(xs as number[])));
  // Worst over every fault of every kind (the switches between kinds take the node out on purpose: not L1 figures).
  // Detection: the slowest seen (a crash can be out of L1 before an agent sample shows it: no detect figure for it).
  const seen = detects.filter((x): x is number => x !== null);
  r.detectMs = seen.length ? Math.max(...seen) : null;
  r.l1Ms = worst([...wedgedMetrics, ...wedgedPlain, ...crashes]);
  r.baselineMs = { default: null, tuned: null };
  r.extra.wedgedMetricsMs = worst(wedgedMetrics);
  r.extra.wedgedPlainMs = worst(wedgedPlain);
  r.extra.crashKindsMs = worst(crashes);
  r.extra.figures = `${n.id} as ${rows.join("; ")}`;
  r.notes.push(r.extra.figures);
  return r;
}
