import { describe, expect, it } from "vitest";
import { DEFAULT_WARMUP_STEPS, evaluate, initialState, type EvaluatorSettings, type EvaluatorState } from "../../agent/src/node/evaluator/evaluate";
import type { EngineObservation, GpuObservation, ModelObservation, ProbeObservation, Sample, Signals } from "../../agent/src/node/sources/signals";

const S: EvaluatorSettings = {
  gpuCount: 8,
  model: "m",
  probeLatencyMs: 1000,
  wedgeMs: 1500,
  probeStuckMs: 4000,
  fall: 3,
  rise: 2,
  warmupStepMs: 1000,
  warmupSteps: DEFAULT_WARMUP_STEPS,
  degradedWeight: 50,
};

const gpu = (n = 8): GpuObservation => ({
  kind: "ok",
  gpus: Array.from({ length: n }, (_, index) => ({
    index,
    uuid: `GPU-${index}`,
    busId: null,
    temperatureC: 40,
    powerW: 70,
    utilizationPct: 0,
    memoryUsedMiB: 0,
    memoryTotalMiB: 81559,
    eccUncorrectedVolatile: 0,
    remappedRowsPending: false,
    remappedRowsFailure: false,
    retiredPagesPending: false,
    slowdowns: [],
    recoveryAction: null,
    fabricState: null,
    fabricStatus: null,
  })),
});
const ready: ModelObservation = { kind: "ready", served: ["m"] };

/** Drives the evaluator like the agent does: each step is one new result per source. */
class Driver {
  state: EvaluatorState;
  now = 1_000_000;
  seq = 0;
  signals: Signals = {};
  constructor(readonly settings = S) {
    this.state = initialState(this.now);
  }
  step(o: { gpu?: GpuObservation; model?: ModelObservation; probe?: ProbeObservation }, dt = 1000, suspects?: Set<string>): EvaluatorState {
    this.now += dt;
    const at = this.now;
    this.signals = {
      ...this.signals,
      gpu: { seq: ++this.seq, at, value: o.gpu ?? gpu() },
      model: { seq: ++this.seq, at, value: o.model ?? ready },
      ...(o.probe ? { probe: { seq: ++this.seq, at, value: o.probe } } : {}),
    };
    this.state = evaluate(this.signals, this.state, this.now, this.settings, suspects);
    return this.state;
  }
  /** An engine sample: `tokens` its progress counter, `waiting` and `running` its queue and batch. */
  engine(tokens: number, waiting: number, at: number, running = 0): Sample<EngineObservation | null> {
    return { seq: ++this.seq, at, value: { family: "vllm", running, waiting, kvCacheUsage: 0, tokensTotal: tokens } };
  }
  healthy(): void {
    for (let i = 0; i < 10; i++) this.step({});
    expect(this.state.decision).toMatchObject({ status: "HEALTHY", phase: "serving", weight: 100 });
  }
}

describe("evaluator", () => {
  it("starts UNKNOWN, needs rise clean results, then ramps 25 → 50 → 75 → 100", () => {
    const d = new Driver();
    expect(d.state.decision.status).toBe("UNKNOWN");
    expect(d.state.decision.reasons[0].code).toBe("AGENT_STARTING");
    d.step({});
    expect(d.state.decision.phase).toBe("down");
    expect(d.state.decision.reasons[0].code).toBe("RECOVERING");
    const weights: number[] = [];
    for (let i = 0; i < 6; i++) weights.push(d.step({}).decision.weight);
    expect(weights).toEqual([25, 50, 75, 100, 100, 100]);
    expect(d.state.decision.status).toBe("HEALTHY");
  });

  it("acts on a hard fault at the first result, with a machine-readable reason", () => {
    const d = new Driver();
    d.healthy();
    const s = d.step({ gpu: { kind: "gpu-lost", detail: "GPU is lost" } });
    expect(s.decision).toMatchObject({ status: "UNHEALTHY", phase: "down", weight: 0 });
    expect(s.decision.reasons).toEqual([{ source: "gpu", code: "GPU_LOST", hard: true, effect: "unhealthy", detail: "GPU is lost" }]);
  });

  it("needs `fall` results of a soft fault, and reports the ones before as pending", () => {
    const d = new Driver();
    d.healthy();
    const err: ModelObservation = { kind: "error", detail: "500" };
    expect(d.step({ model: err }).decision.status).toBe("HEALTHY");
    expect(d.state.decision.pending.map((r) => r.code)).toEqual(["INFERENCE_ERROR"]);
    expect(d.step({ model: err }).decision.status).toBe("HEALTHY");
    expect(d.step({ model: err }).decision.status).toBe("UNHEALTHY");
  });

  it("counts results, not evaluations: re-evaluating the same result does not advance fall", () => {
    const d = new Driver();
    d.healthy();
    d.step({ model: { kind: "timeout", detail: "t" } });
    for (let i = 0; i < 5; i++) d.state = evaluate(d.signals, d.state, (d.now += 10), S);
    expect(d.state.decision.status).toBe("HEALTHY");
    expect(d.state.softCounts.INFERENCE_TIMEOUT).toBe(1);
  });

  it("a flapping soft fault never reaches fall", () => {
    const d = new Driver();
    d.healthy();
    for (let i = 0; i < 20; i++) d.step({ probe: i % 2 ? { kind: "ok", latencyMs: 10 } : { kind: "failed", detail: "x" } });
    expect(d.state.decision.status).toBe("HEALTHY");
  });

  it("connection refused before the server ever served is LOADING (drain), after it is a crash", () => {
    const fresh = new Driver();
    const s = fresh.step({ model: { kind: "refused", detail: "refused" } });
    expect(s.decision).toMatchObject({ status: "UNHEALTHY", phase: "loading" });
    expect(s.decision.reasons[0].code).toBe("MODEL_LOADING");
    const d = new Driver();
    d.healthy();
    const c = d.step({ model: { kind: "refused", detail: "refused" } });
    expect(c.decision).toMatchObject({ status: "UNREACHABLE", phase: "down" });
    expect(c.decision.reasons[0].code).toBe("INFERENCE_DOWN");
  });

  it("a missing model or fewer GPUs than expected are hard faults", () => {
    const d = new Driver();
    d.healthy();
    expect(d.step({ model: { kind: "ready", served: ["other"] } }).decision.reasons[0].code).toBe("MODEL_MISSING");
    const e = new Driver();
    e.healthy();
    expect(e.step({ gpu: gpu(7) }).decision.reasons[0].code).toBe("GPU_MISSING");
  });

  it("slow probes make the node DEGRADED with a lower weight, still serving", () => {
    const d = new Driver();
    d.healthy();
    for (let i = 0; i < 3; i++) d.step({ probe: { kind: "in-flight", elapsedMs: 1200 } });
    expect(d.state.decision).toMatchObject({ status: "DEGRADED", phase: "serving", weight: 50 });
    expect(d.state.decision.reasons[0].code).toBe("PROBE_SLOW");
  });

  it("soft faults the controller marked suspect are reported as suppressed, not acted on", () => {
    const d = new Driver();
    d.healthy();
    for (let i = 0; i < 5; i++) d.step({ probe: { kind: "failed", detail: "x" } }, 1000, new Set(["PROBE_FAILED"]));
    expect(d.state.decision.status).toBe("HEALTHY");
    expect(d.state.decision.suppressed.map((r) => r.code)).toEqual(["PROBE_FAILED"]);
  });

  it("PROBE_STUCK is suppressed with the probe's soft codes when the cap holds any of them suspect (a fleet-wide slowdown), and acts alone otherwise", () => {
    const d = new Driver();
    d.healthy();
    // Probes unanswered for 5 s (a run of timeouts), no engine metrics.
    d.signals.probeUnansweredSince = d.now - 4000;
    d.signals.probeInFlightSince = d.now + 500;
    const capped = d.step({ probe: { kind: "in-flight", elapsedMs: 500 } }, 1000, new Set(["PROBE_SLOW", "PROBE_TIMEOUT"]));
    expect(capped.decision.status).not.toBe("UNHEALTHY");
    expect(capped.decision.suppressed.map((r) => r.code)).toContain("PROBE_STUCK");
    const alone = d.step({ probe: { kind: "in-flight", elapsedMs: 1500 } }, 1000);
    expect(alone.decision).toMatchObject({ status: "UNHEALTHY", phase: "down" });
    expect(alone.decision.reasons.map((r) => r.code)).toContain("PROBE_STUCK");
  });

  it("a wedged engine (waiting, no progress for wedgeMs between engine samples) is a hard fault although /health is fine", () => {
    const d = new Driver();
    d.healthy();
    const engine = (tokens: number, waiting: number, at: number) => d.engine(tokens, waiting, at, 1);
    d.signals.engine = engine(100, 0, d.now);
    d.step({}, 0);
    d.signals.engine = engine(120, 3, d.now + 200);
    expect(d.step({}, 200).decision.status).toBe("HEALTHY");
    d.signals.engine = engine(120, 3, d.now + 1000);
    expect(d.step({}, 1000).decision.status).toBe("HEALTHY");
    d.signals.engine = engine(120, 3, d.now + 500);
    const s = d.step({}, 500);
    expect(s.decision.status).toBe("UNHEALTHY");
    expect(s.decision.reasons[0].code).toBe("ENGINE_WEDGED");
  });

  it("an idle engine caught with a request just queued is not wedged: the stall counts from the first sample with requests waiting", () => {
    const d = new Driver();
    d.healthy();
    const engine = (tokens: number, waiting: number, at: number) => d.engine(tokens, waiting, at);
    d.signals.engine = engine(100, 0, d.now);
    d.step({}, 0);
    // A minute idle (the counters still), then a sample that sees a request queued for a moment.
    d.signals.engine = engine(100, 0, d.now + 60_000);
    d.step({}, 60_000);
    d.signals.engine = engine(100, 1, d.now + 1000);
    expect(d.step({}, 1000).decision.status).toBe("HEALTHY");
    // Scheduled: nothing waits at the next sample, the run of queued samples ends.
    d.signals.engine = engine(104, 0, d.now + 1000);
    expect(d.step({}, 1000).decision.status).toBe("HEALTHY");
    // Queued again, and this time the counters stay still for wedgeMs (1.5 s here) of queued samples.
    d.signals.engine = engine(104, 2, d.now + 1000);
    expect(d.step({}, 1000).decision.status).toBe("HEALTHY");
    d.signals.engine = engine(104, 2, d.now + 1000);
    expect(d.step({}, 1000).decision.status).toBe("HEALTHY");
    d.signals.engine = engine(104, 3, d.now + 500);
    const s = d.step({}, 500);
    expect(s.decision.status).toBe("UNHEALTHY");
    expect(s.decision.reasons[0].code).toBe("ENGINE_WEDGED");
  });

  it("an engine holding the agent's probe: the stall counts from the probe's send, not from the first queued sample", () => {
    const d = new Driver();
    d.healthy();
    const engine = (tokens: number, waiting: number, at: number) => d.engine(tokens, waiting, at);
    d.signals.engine = engine(100, 0, d.now);
    d.step({}, 0);
    const sent = d.now + 1000;
    d.signals.probeInFlightSince = sent;
    // First seen queued 100 ms after the send, then 1.5 s (wedgeMs here) after the send: wedged.
    d.signals.engine = engine(100, 1, sent + 100);
    expect(d.step({}, 1100).decision.status).toBe("HEALTHY");
    d.signals.engine = engine(100, 1, sent + 1500);
    expect(d.step({}, 1400).decision.reasons.map((r) => r.code)).toContain("ENGINE_WEDGED");
  });

  it("the first reason is the one that holds the node out: a wedged engine holding a slow, then stuck probe is down #ENGINE_WEDGED", () => {
    const d = new Driver();
    d.healthy();
    const sent = d.now + 500;
    d.signals.engine = d.engine(100, 0, d.now);
    d.step({}, 0);
    // The probe runs past its threshold (soft PROBE_SLOW, active after `fall` results) while the engine holds it queued.
    d.signals.probeInFlightSince = sent;
    for (let i = 1; i <= 3; i++) d.step({ probe: { kind: "in-flight", elapsedMs: 1000 + i * 100 } }, i === 1 ? 1600 : 100);
    d.signals.engine = d.engine(100, 1, sent + 1600);
    const wedged = d.step({ probe: { kind: "in-flight", elapsedMs: 1600 } }, 0);
    expect(wedged.decision.status).toBe("UNHEALTHY");
    expect(wedged.decision.reasons.map((r) => r.code)).toEqual(["ENGINE_WEDGED", "PROBE_SLOW"]);
    // Past the stuck bound too: both hard and unhealthy, the engine's own evidence (the cause) first.
    d.signals.engine = d.engine(100, 1, sent + 4300);
    const stuck = d.step({ probe: { kind: "in-flight", elapsedMs: 4300 } }, 3000);
    expect(stuck.decision.reasons.map((r) => r.code)).toEqual(["ENGINE_WEDGED", "PROBE_STUCK"]);
  });

  it("recovery after a fault goes through rise and the ramp again", () => {
    const d = new Driver();
    d.healthy();
    d.step({ gpu: { kind: "gpu-lost", detail: "x" } });
    const w: number[] = [];
    for (let i = 0; i < 6; i++) w.push(d.step({}).decision.weight);
    expect(w).toEqual([0, 25, 50, 75, 100, 100]);
  });

  it("is pure: the same inputs give the same state", () => {
    const d = new Driver();
    d.healthy();
    const a = evaluate(d.signals, d.state, d.now + 5, S);
    const b = evaluate(d.signals, d.state, d.now + 5, S);
    expect(a).toEqual(b);
  });
});
