import { REASON_EFFECTS, type Decision, type NodeStatus, type Reason, type ReasonEffect, type ServingPhase } from "../../types";
import type { Signals } from "../sources/signals";
import { measured, quantile } from "../../util/stats";
import { engineReasons, gpuReasons, modelReasons, pciReasons, probeReasons, PROBE_CODES, probeWithEngine, xidReasons, type RuleSettings } from "./rules";

/**
 * The evaluator: a pure function of (signals, previous state, clock). Hard faults act on
 * the first result, soft faults after `fall` results of their source in a row; recovery
 * needs `rise` clean periods, then a warmup ramp. Timers live at the edges, not here.
 */

export interface EvaluatorSettings extends RuleSettings {
  fall: number;
  rise: number;
  warmupStepMs: number;
  /** Weight shares of the warmup ramp, ending at 100. */
  warmupSteps: readonly number[];
  degradedWeight: number;
}

export const DEFAULT_WARMUP_STEPS: readonly number[] = Object.freeze([25, 50, 75, 100]);

type SourceName = "gpu" | "model" | "probe" | "engine";

export interface EvaluatorState {
  readonly decision: Decision;
  /** The inference server has answered ready since the agent started. */
  readonly everReady: boolean;
  /** Consecutive results per soft-fault code. */
  readonly softCounts: Readonly<Record<string, number>>;
  readonly lastSeq: Readonly<Record<SourceName, number>>;
  /** Clean model results in a row while recovering. */
  readonly okStreak: number;
  /** When the warmup ramp started, or null when not ramping. */
  readonly warmupStartedAt: number | null;
  /**
   * The engine's token counter, when it last moved, and when it last moved with other work than
   * one request in the engine (`running > 1` or anything `waiting`): progress that cannot be our
   * probe's own prefill.
   */
  readonly progress: { readonly tokens: number; readonly at: number; readonly othersAt: number | null } | null;
  /** The first engine sample of the current run of samples with requests waiting; null when the last had none. */
  readonly queuedSince: number | null;
}

const BLOCKING: ReadonlySet<ReasonEffect> = new Set(["unreachable", "unhealthy", "loading", "unknown"]);

export function initialState(now: number): EvaluatorState {
  return {
    decision: {
      status: "UNKNOWN",
      phase: "down",
      weight: 0,
      reasons: [{ source: "agent", code: "AGENT_STARTING", hard: true, effect: "unknown", detail: "no results yet" }],
      pending: [],
      suppressed: [],
      since: now,
      checkedAt: now,
      loadScore: 0,
    },
    everReady: false,
    softCounts: {},
    lastSeq: { gpu: 0, model: 0, probe: 0, engine: 0 },
    okStreak: 0,
    warmupStartedAt: null,
    progress: null,
    queuedSince: null,
  };
}

function statusOf(effect: ReasonEffect): NodeStatus {
  switch (effect) {
    case "unreachable":
      return "UNREACHABLE";
    case "unhealthy":
    case "loading":
      return "UNHEALTHY";
    case "unknown":
      return "UNKNOWN";
    case "degraded":
      return "DEGRADED";
  }
}

function loadScore(signals: Signals): number {
  const e = signals.engine?.value;
  if (e) return Math.round((e.running + 2 * e.waiting + 10 * (e.kvCacheUsage ?? 0)) * 100) / 100;
  const p50 = quantile(measured(signals.probeLatencies ?? []), 0.5);
  return p50 === null ? 0 : Math.round(p50) / 1000;
}

export function evaluate(signals: Signals, prev: EvaluatorState, now: number, s: EvaluatorSettings, suspects: ReadonlySet<string> = new Set()): EvaluatorState {
  const seq: Record<SourceName, number> = {
    gpu: signals.gpu?.seq ?? 0,
    model: signals.model?.seq ?? 0,
    probe: signals.probe?.seq ?? 0,
    engine: signals.engine?.seq ?? 0,
  };
  const advanced = (src: SourceName): boolean => seq[src] !== prev.lastSeq[src];

  const model = signals.model?.value;
  const everReady = prev.everReady || (model?.kind === "ready" && (s.model === null || model.served.includes(s.model)));

  let progress = prev.progress;
  const eng = signals.engine?.value;
  if (eng && (progress === null || eng.tokensTotal !== progress.tokens)) {
    const at = signals.engine?.at ?? now;
    progress = { tokens: eng.tokensTotal, at, othersAt: eng.running > 1 || eng.waiting > 0 ? at : (progress?.othersAt ?? null) };
  }

  let queuedSince = prev.queuedSince;
  if (signals.engine && advanced("engine")) queuedSince = eng && eng.waiting > 0 ? (queuedSince ?? signals.engine.at) : null;

  const observed: Reason[] = [];
  // No traffic before both nvidia-smi and the model check have answered once: a node whose
  // first GPU reading is slow (a loaded host) would otherwise serve with 0 GPUs in its heartbeat.
  const awaiting = [signals.gpu ? null : "nvidia-smi", model ? null : "the model check"].filter((x) => x !== null);
  if (awaiting.length) observed.push({ source: "agent", code: "AGENT_STARTING", hard: true, effect: "unknown", detail: `no result yet from ${awaiting.join(" or ")}` });
  if (signals.gpu) observed.push(...gpuReasons(signals.gpu.value, s));
  observed.push(...pciReasons(signals.pci?.value, signals.gpu?.value, s));
  observed.push(...xidReasons(signals.fatalXids ?? [], signals.xidRepeated ?? []));
  if (model) observed.push(...modelReasons(model, s, prev.everReady));
  const modelReady = model?.kind === "ready";
  const progressAt = progress?.at ?? null;
  // The engine's own counters before the probe: a wedged engine also leaves the probe stuck, and
  // ENGINE_WEDGED (requests waiting, no progress) names the cause where PROBE_STUCK names the symptom.
  // The agent's own probe unanswered since before the first queued sample has waited since it was sent.
  const probeAt = signals.probeInFlightSince ?? null;
  observed.push(...engineReasons(signals.engine, progressAt, s, queuedSince !== null && probeAt !== null ? Math.min(queuedSince, probeAt) : queuedSince));
  if (modelReady) {
    const own = signals.probe ? probeReasons(signals.probe.value, s) : [];
    observed.push(...probeWithEngine(own, signals.probe, probeAt, signals.engine, progressAt, now, s, signals.probeUnansweredSince ?? null, progress?.othersAt ?? null));
  }
  // Wrong answers with 200: hard, the node is out until its answers match after a restart.
  // The deep check before traffic (deep-check.ts): out until it passes.
  if (signals.deepCheck) observed.push(signals.deepCheck);
  if (signals.canaryMismatch) observed.push({ source: "probe", code: "CANARY_MISMATCH", hard: true, effect: "unhealthy", detail: `canary answers differ from the expected ones: ${signals.canaryMismatch}` });

  const softCounts: Record<string, number> = {};
  const active: Reason[] = [];
  const pending: Reason[] = [];
  const suppressed: Reason[] = [];
  const probeSuspect = [...PROBE_CODES].some((c) => suspects.has(c));
  for (const reason of observed) {
    if (reason.hard) {
      if (reason.code === "PROBE_STUCK" && probeSuspect) suppressed.push(reason);
      else active.push(reason);
      continue;
    }
    const before = prev.softCounts[reason.code] ?? 0;
    const count = reason.source === "agent" || advanced(reason.source) ? before + 1 : Math.max(before, 1);
    softCounts[reason.code] = count;
    if (suspects.has(reason.code)) suppressed.push(reason);
    else if (count >= s.fall) active.push(reason);
    else pending.push(reason);
  }

  const prevD = prev.decision;
  // Worst effect first (a stable sort keeps the order observed within one effect): the first reason is
  // the one that set the status, and the agent-check reply names it (`down #CODE`). Observed order put a
  // soft PROBE_SLOW first while a hard ENGINE_WEDGED held the node out: `down #PROBE_SLOW`.
  active.sort((a, b) => REASON_EFFECTS.indexOf(a.effect) - REASON_EFFECTS.indexOf(b.effect));
  const worst: ReasonEffect | null = active[0]?.effect ?? null;
  let status: NodeStatus;
  let phase: ServingPhase;
  let weight: number;
  let reasons: Reason[] = active;
  let okStreak = prev.okStreak;
  let warmupStartedAt = prev.warmupStartedAt;

  if (worst !== null && BLOCKING.has(worst)) {
    status = statusOf(worst);
    phase = worst === "loading" ? "loading" : "down";
    weight = 0;
    // Held out by the deep check alone, clean periods still count: once it passes, the node
    // need not wait `rise` more periods (the check has seen every signal clean already).
    const gateOnly = active.every((r) => r.code === "DEEP_CHECK_PENDING") && pending.length === 0;
    okStreak = gateOnly && (prevD.phase === "down" || prevD.phase === "loading") ? (advanced("model") ? okStreak + 1 : okStreak) : 0;
    warmupStartedAt = null;
  } else {
    const wasBlocked = prevD.phase === "down" || prevD.phase === "loading";
    if (wasBlocked) {
      const clean = pending.length === 0;
      // Rise counts clean periods, clocked by the model check (it runs every period).
      okStreak = clean ? (advanced("model") ? okStreak + 1 : okStreak) : 0;
      if (okStreak < s.rise) {
        // Still out until `rise` clean results: keep the old status, say why.
        const r: Reason = { source: "agent", code: "RECOVERING", hard: true, effect: "unknown", detail: `${okStreak}/${s.rise} clean results` };
        return {
          decision: { ...prevD, reasons: [r], pending, suppressed, checkedAt: now, loadScore: loadScore(signals) },
          everReady,
          softCounts,
          lastSeq: seq,
          okStreak,
          warmupStartedAt: null,
          progress,
          queuedSince,
        };
      }
      warmupStartedAt = s.warmupStepMs > 0 ? now : null;
    }
    okStreak = 0;
    const steps = s.warmupSteps.length ? s.warmupSteps : DEFAULT_WARMUP_STEPS;
    if (warmupStartedAt !== null) {
      const step = Math.floor((now - warmupStartedAt) / s.warmupStepMs);
      if (step >= steps.length - 1) warmupStartedAt = null;
      weight = steps[Math.min(step, steps.length - 1)];
    } else {
      weight = 100;
    }
    phase = warmupStartedAt !== null ? "warmup" : "serving";
    status = worst === "degraded" ? "DEGRADED" : "HEALTHY";
    if (status === "DEGRADED") weight = Math.min(weight, s.degradedWeight);
    reasons = active;
  }

  return {
    decision: {
      status,
      phase,
      weight,
      reasons,
      pending,
      suppressed,
      since: status === prevD.status ? prevD.since : now,
      checkedAt: now,
      loadScore: loadScore(signals),
    },
    everReady,
    softCounts,
    lastSeq: seq,
    okStreak,
    warmupStartedAt,
    progress,
    queuedSince,
  };
}
