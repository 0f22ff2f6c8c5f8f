/**
 * The deep check before traffic, as pure functions of (check state, signals, clock): a node that
 * boots, wakes or comes back from a repair (the agent starts), or whose inference server became
 * ready again after not being ready (a restart), joins rotation only once
 * - DCGM's quick diagnostic passed (at agent start only, where dcgmi is used),
 * - every signal has reported clean at least once since the check began (the smoke: the GPU
 *   query with the expected GPU count, the model ready, a probe answered, the engine metrics
 *   where the agent reads them), and
 * - one canary round completed without a mismatch (canaries off: the smoke alone).
 * Until then the decision carries `DEEP_CHECK_PENDING` (effect `loading`: `drain`, `/readyz` 503);
 * a failed diagnostic is the hard `GPU_DIAG_FAILED`, which the repair ladder treats as a GPU fault.
 * The timers and the processes live in `deep-check-runner.ts`.
 */
import type { Reason } from "../types";
import { gpuReasons, type RuleSettings } from "./evaluator/rules";
import type { Signals } from "./sources/signals";

export const DEEP_CHECK_MODES = ["auto", "dcgmi", "smoke", "off"] as const;
export type DeepCheckMode = (typeof DEEP_CHECK_MODES)[number];

export const SMOKE_SIGNALS = ["gpu", "model", "probe", "engine"] as const;
export type SmokeSignal = (typeof SMOKE_SIGNALS)[number];

const SIGNAL_NAMES: Record<SmokeSignal, string> = { gpu: "GPU query", model: "model ready", probe: "probe", engine: "engine metrics" };

/** The diagnostic's part of a check. `none`: not part of it (the note says why). */
export type DiagPart =
  | { readonly kind: "none"; readonly note: string }
  | { readonly kind: "running"; readonly since: number }
  | { readonly kind: "passed" }
  /** `hard`: a test failed (GPU_DIAG_FAILED); else the diag could not run where dcgmi is required. */
  | { readonly kind: "failed"; readonly detail: string; readonly hard: boolean; readonly at: number };

/** The canary round's part. `off`: no canaries on this node. */
export type CanaryPart =
  | { readonly kind: "off" }
  | { readonly kind: "waiting"; readonly since: number; readonly lastFailure: string | null }
  | { readonly kind: "passed"; readonly note: string };

export interface DeepCheckState {
  /** What began it: the agent starting (boot, wake, reboot) or the inference server ready again. */
  readonly trigger: "agent start" | "server restart";
  readonly startedAt: number;
  /** Each signal's sample number when the check began: only later samples count. */
  readonly since: Readonly<Record<SmokeSignal, number>>;
  /** The signals seen clean since. */
  readonly clean: readonly SmokeSignal[];
  readonly diag: DiagPart;
  readonly canary: CanaryPart;
}

export type DeepCheckVerdict =
  | { readonly kind: "passed"; readonly notes: readonly string[] }
  | { readonly kind: "pending"; readonly waiting: readonly string[]; readonly failed: readonly string[] }
  | { readonly kind: "failed"; readonly detail: string };

export interface SmokeSettings extends RuleSettings {
  /** The agent reads the engine's metrics and they have answered once: they must answer clean in the check too. */
  engineWanted: boolean;
}

function seqs(signals: Signals): Record<SmokeSignal, number> {
  return { gpu: signals.gpu?.seq ?? 0, model: signals.model?.seq ?? 0, probe: signals.probe?.seq ?? 0, engine: signals.engine?.seq ?? 0 };
}

export function beginCheck(trigger: DeepCheckState["trigger"], now: number, signals: Signals, diag: DiagPart, canaryOn: boolean): DeepCheckState {
  return { trigger, startedAt: now, since: seqs(signals), clean: [], diag, canary: canaryOn ? { kind: "waiting", since: now, lastFailure: null } : { kind: "off" } };
}

/** Whether each signal's current sample, newer than the check, is clean. */
function cleanNow(signals: Signals, s: RuleSettings): Record<SmokeSignal, boolean> {
  const g = signals.gpu?.value;
  const m = signals.model?.value;
  return {
    gpu: g?.kind === "ok" && !gpuReasons(g, s).some((r) => r.hard),
    model: m?.kind === "ready" && (s.model === null || m.served.includes(s.model)),
    probe: signals.probe?.value.kind === "ok",
    engine: signals.engine !== undefined && signals.engine.value !== null,
  };
}

/** The check after one look at the signals: each signal clean in a sample newer than the check is seen. */
export function observeSmoke(st: DeepCheckState, signals: Signals, s: RuleSettings): DeepCheckState {
  // Every signal already seen clean: nothing to add (the agent looks on every evaluation, several a second).
  if (st.clean.length === SMOKE_SIGNALS.length) return st;
  const now = seqs(signals);
  const ok = cleanNow(signals, s);
  const add = SMOKE_SIGNALS.filter((k) => !st.clean.includes(k) && now[k] > st.since[k] && ok[k]);
  return add.length ? { ...st, clean: [...st.clean, ...add] } : st;
}

/** What the check says now. */
export function deepCheckVerdict(st: DeepCheckState, s: Pick<SmokeSettings, "engineWanted">): DeepCheckVerdict {
  if (st.diag.kind === "failed" && st.diag.hard) return { kind: "failed", detail: st.diag.detail };
  const waiting: string[] = [];
  const failed: string[] = [];
  if (st.diag.kind === "running") waiting.push("dcgmi diag");
  if (st.diag.kind === "failed") failed.push(st.diag.detail);
  for (const k of SMOKE_SIGNALS) if ((k !== "engine" || s.engineWanted) && !st.clean.includes(k)) waiting.push(SIGNAL_NAMES[k]);
  if (st.canary.kind === "waiting") {
    waiting.push("canary round");
    if (st.canary.lastFailure) failed.push(`last canary round: ${st.canary.lastFailure}`);
  }
  if (waiting.length || failed.length) return { kind: "pending", waiting, failed };
  const notes = [st.diag.kind === "none" ? st.diag.note : "dcgmi diag -r 1 passed", st.canary.kind === "passed" ? st.canary.note : "canaries off: smoke only"];
  return { kind: "passed", notes };
}

/** The reason the decision carries for a verdict; null once it passed. */
export function deepCheckReason(v: DeepCheckVerdict, st: DeepCheckState): Reason | null {
  if (v.kind === "passed") return null;
  if (v.kind === "failed") return { source: "gpu", code: "GPU_DIAG_FAILED", hard: true, effect: "unhealthy", detail: `dcgmi diag -r 1: ${v.detail}` };
  const parts = [v.waiting.length ? `waiting for: ${v.waiting.join(", ")}` : "", ...v.failed].filter(Boolean);
  return { source: "agent", code: "DEEP_CHECK_PENDING", hard: true, effect: "loading", detail: `deep check (${st.trigger}) ${parts.join("; ")}` };
}

/** One canary round as the runner reports it. */
export interface CanaryRoundResult {
  startedAt: number;
  outcome: "match" | "mismatch" | "none";
  detail: string;
  /** Answers judged against the fleet's expectation (else only self-checked). */
  againstFleet: boolean;
  /** Canary requests answered in the round. */
  answered: number;
  model: string | null;
}

/** The canary part after one round: a round that began after the check and answered without a mismatch passes it. */
export function canaryRoundSeen(st: DeepCheckState, r: CanaryRoundResult): DeepCheckState {
  if (st.canary.kind !== "waiting" || r.startedAt < st.canary.since) return st;
  if (r.answered === 0) return { ...st, canary: { ...st.canary, lastFailure: "no canary answered" } };
  if (r.outcome === "mismatch") return { ...st, canary: { ...st.canary, lastFailure: `mismatch: ${r.detail}` } };
  const note = r.againstFleet ? "canary round matched the fleet's answers" : `canary round self-checked only (no fleet expectation yet for ${r.model ?? "the model"})`;
  return { ...st, canary: { kind: "passed", note } };
}
