/**
 * The deep check before traffic as pure functions: (check state, signals, clock) → pending with
 * what it waits for, passed, or failed; the dcgmi diag's JSON read as DCGM documents it; and the
 * evaluator keeping the node out (loading) until the check passes, then ramping at once.
 */
import { describe, expect, it } from "vitest";
import { beginCheck, canaryRoundSeen, deepCheckReason, deepCheckVerdict, observeSmoke, type DeepCheckState } from "../../agent/src/node/deep-check";
import { DEFAULT_WARMUP_STEPS, evaluate, initialState, type EvaluatorSettings } from "../../agent/src/node/evaluator/evaluate";
import { parseDiag } from "../../agent/src/node/sources/dcgmi";
import type { GpuInfo, Signals } from "../../agent/src/node/sources/signals";

const S: EvaluatorSettings = {
  gpuCount: 2, model: "m", probeLatencyMs: 5000, wedgeMs: 500, probeStuckMs: 4000, modelRevision: null,
  fall: 3, rise: 2, warmupStepMs: 0, warmupSteps: DEFAULT_WARMUP_STEPS, degradedWeight: 50,
};
const gpu = (i: number): GpuInfo => ({
  index: i, uuid: `GPU-${i}`, busId: `00000000:1${i}:00.0`, temperatureC: 40, powerW: 70, utilizationPct: 0, memoryUsedMiB: 0, memoryTotalMiB: 81559,
  eccUncorrectedVolatile: 0, remappedRowsPending: false, remappedRowsFailure: false, retiredPagesPending: false, slowdowns: [], recoveryAction: null, fabricState: null, fabricStatus: null,
});

/** Signals with every source reporting clean at sample `seq`. */
function clean(seq: number, gpus = 2): Signals {
  return {
    gpu: { seq, at: seq, value: { kind: "ok", gpus: Array.from({ length: gpus }, (_, i) => gpu(i)) } as never },
    model: { seq, at: seq, value: { kind: "ready", served: ["m"] } as never },
    probe: { seq, at: seq, value: { kind: "ok", latencyMs: 20 } },
    engine: { seq, at: seq, value: { running: 0, waiting: 0, tokensTotal: 1 } as never },
    fatalXids: [], probeLatencies: [20], probeInFlightSince: null,
  };
}

const fleetMatch = { startedAt: 10, outcome: "match" as const, detail: "", againstFleet: true, answered: 3, model: "m" };

describe("the deep check's verdict", () => {
  it("waits for every signal clean in a sample newer than the check, then for the canary round", () => {
    let st = beginCheck("agent start", 0, clean(5), { kind: "none", note: "no dcgmi" }, true);
    // Samples from before the check do not count, clean as they are.
    st = observeSmoke(st, clean(5), S);
    let v = deepCheckVerdict(st, { engineWanted: true });
    expect(v).toEqual({ kind: "pending", waiting: ["GPU query", "model ready", "probe", "engine metrics", "canary round"], failed: [] });
    expect(deepCheckReason(v, st)).toMatchObject({ source: "agent", code: "DEEP_CHECK_PENDING", hard: true, effect: "loading" });
    st = observeSmoke(st, { ...clean(6), probe: undefined }, S);
    v = deepCheckVerdict(st, { engineWanted: true });
    expect(deepCheckReason(v, st)?.detail).toBe("deep check (agent start) waiting for: probe, canary round");
    st = observeSmoke(st, clean(7), S);
    expect(deepCheckVerdict(st, { engineWanted: true })).toMatchObject({ waiting: ["canary round"] });
    st = canaryRoundSeen(st, fleetMatch);
    v = deepCheckVerdict(st, { engineWanted: true });
    expect(v).toEqual({ kind: "passed", notes: ["no dcgmi", "canary round matched the fleet's answers"] });
    expect(deepCheckReason(v, st)).toBeNull();
  });

  it("a GPU count short of the expected one is not clean; the engine is waited for only where wanted", () => {
    let st = beginCheck("server restart", 0, {}, { kind: "none", note: "" }, false);
    st = observeSmoke(st, clean(1, 1), S);
    expect(deepCheckVerdict(st, { engineWanted: false })).toMatchObject({ kind: "pending", waiting: ["GPU query"] });
    st = observeSmoke(st, clean(2, 2), S);
    expect(deepCheckVerdict(st, { engineWanted: false })).toEqual({ kind: "passed", notes: ["", "canaries off: smoke only"] });
  });

  it("a canary round that mismatches or answers nothing keeps it pending and says so; one from before the check does not count", () => {
    let st: DeepCheckState = observeSmoke(beginCheck("server restart", 100, {}, { kind: "none", note: "" }, true), clean(1), S);
    expect(canaryRoundSeen(st, { ...fleetMatch, startedAt: 50 })).toBe(st);
    st = canaryRoundSeen(st, { ...fleetMatch, startedAt: 120, outcome: "mismatch", detail: "p1: token 3 differs" });
    const v = deepCheckVerdict(st, { engineWanted: true });
    expect(deepCheckReason(v, st)?.detail).toBe("deep check (server restart) waiting for: canary round; last canary round: mismatch: p1: token 3 differs");
    st = canaryRoundSeen(st, { ...fleetMatch, startedAt: 130, answered: 0 });
    expect(deepCheckVerdict(st, { engineWanted: true })).toMatchObject({ failed: ["last canary round: no canary answered"] });
    // No fleet expectation yet: the self-check alone passes it, and the note says so.
    st = canaryRoundSeen(st, { ...fleetMatch, startedAt: 140, outcome: "none", againstFleet: false });
    expect(deepCheckVerdict(st, { engineWanted: true })).toEqual({ kind: "passed", notes: ["", "canary round self-checked only (no fleet expectation yet for m)"] });
  });

  it("a failed diag test is the hard GPU_DIAG_FAILED whatever else is clean; a diag that could not run where required keeps it pending", () => {
    const failed = observeSmoke(beginCheck("agent start", 0, {}, { kind: "failed", detail: "software failed on GPU 3 (pages)", hard: true, at: 1 }, false), clean(1), S);
    const v = deepCheckVerdict(failed, { engineWanted: true });
    expect(deepCheckReason(v, failed)).toEqual({ source: "gpu", code: "GPU_DIAG_FAILED", hard: true, effect: "unhealthy", detail: "dcgmi diag -r 1: software failed on GPU 3 (pages)" });
    const norun = observeSmoke(beginCheck("agent start", 0, {}, { kind: "failed", detail: "dcgmi not found", hard: false, at: 1 }, false), clean(1), S);
    expect(deepCheckReason(deepCheckVerdict(norun, { engineWanted: true }), norun)).toMatchObject({ code: "DEEP_CHECK_PENDING", detail: "deep check (agent start) dcgmi not found" });
    const running = beginCheck("agent start", 0, {}, { kind: "running", since: 0 }, false);
    expect(deepCheckVerdict(observeSmoke(running, clean(1), S), { engineWanted: true })).toMatchObject({ waiting: ["dcgmi diag"] });
  });
});

describe("dcgmi diag -r 1 -j as DCGM documents it", () => {
  const doc = (status: string, extra: Record<string, unknown> = {}): string =>
    JSON.stringify({
      "DCGM Diagnostic": {
        test_categories: [{ category: "Deployment", tests: [{ name: "software", results: [{ entity_group: "GPU", entity_group_id: 1, entity_id: 0, status: "Pass" }, { entity_group: "GPU", entity_group_id: 1, entity_id: 3, status, ...extra }], test_summary: { status } }] }],
      },
      metadata: { version: "4.2.3" },
    });
  it("reads a pass, a failed test with its GPU and message, a diag that could not run", () => {
    expect(parseDiag(0, doc("Pass"))).toEqual({ kind: "passed", tests: 1 });
    expect(parseDiag(0, doc("Skip"))).toEqual({ kind: "passed", tests: 1 });
    expect(parseDiag(226, doc("Fail", { warnings: [{ error_category: 10, error_id: 26, error_severity: 2, warning: "pending page retirements" }] }))).toEqual({
      kind: "failed",
      failures: [{ test: "software", gpu: 3, message: "pending page retirements" }],
    });
    expect(parseDiag(1, "Error: unable to establish a connection to the specified host: localhost\n")).toMatchObject({ kind: "error", detail: expect.stringContaining("without its JSON result") });
    expect(parseDiag(1, JSON.stringify({ "DCGM Diagnostic": { runtime_error: "the diag is already running" } }))).toMatchObject({ kind: "error", detail: expect.stringContaining("already running") });
    expect(parseDiag(1, doc("Pass"))).toMatchObject({ kind: "error" });
  });
});

describe("the evaluator with the deep check", () => {
  it("keeps the node out (loading) while the check is pending, and ramps as soon as it passes: rise was counted meanwhile", () => {
    const pending = { source: "agent" as const, code: "DEEP_CHECK_PENDING", hard: true, effect: "loading" as const, detail: "waiting for: canary round" };
    let st = initialState(0);
    for (let i = 1; i <= 3; i++) {
      st = evaluate({ ...clean(i), deepCheck: pending }, st, i * 1000, S);
      expect(st.decision).toMatchObject({ phase: "loading", status: "UNHEALTHY", weight: 0 });
      expect(st.decision.reasons.map((r) => r.code)).toEqual(["DEEP_CHECK_PENDING"]);
    }
    st = evaluate({ ...clean(4), deepCheck: null }, st, 4000, S);
    expect(st.decision).toMatchObject({ phase: "serving", status: "HEALTHY", weight: 100 });
  });

  it("without the check (off), the old rise applies", () => {
    let st = initialState(0);
    st = evaluate(clean(1), st, 1000, S);
    expect(st.decision.reasons.map((r) => r.code)).toEqual(["RECOVERING"]);
  });
});
