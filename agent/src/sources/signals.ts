/**
 * What the sources observe, as plain data. The evaluator is a pure function of these
 * (plus its previous state and the clock); every field is a value, never a promise.
 * `seq` counts results of a source, so soft faults count results, not evaluations.
 */

export interface GpuInfo {
  index: number;
  uuid: string | null;
  busId: string | null;
  temperatureC: number | null;
  powerW: number | null;
  utilizationPct: number | null;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number | null;
  eccUncorrectedVolatile: number | null;
  remappedRowsPending: boolean | null;
  remappedRowsFailure: boolean | null;
  retiredPagesPending: boolean | null;
  /** Clock-event (throttle) reasons that are `Active` and mean trouble (thermal, hardware slowdown). */
  slowdowns: string[];
  /** `gpu_recovery_action`: null when `None` or not reported. */
  recoveryAction: string | null;
}

export type GpuObservation =
  | { kind: "ok"; gpus: GpuInfo[] }
  | { kind: "driver-not-loaded"; detail: string }
  | { kind: "gpu-lost"; detail: string }
  | { kind: "driver-mismatch"; detail: string }
  | { kind: "failed"; exitCode: number | null; detail: string }
  | { kind: "timeout"; detail: string }
  | { kind: "garbage"; detail: string };

export type ModelObservation =
  | { kind: "ready"; served: string[] }
  /** The server says it is loading (llama.cpp 503 "Loading model"). */
  | { kind: "loading"; detail: string }
  /** Nothing listens: normal while a server loads, a crash once it had served. */
  | { kind: "refused"; detail: string }
  /** The server answers but says it is not ready (vLLM/TGI 503, Triton 400). */
  | { kind: "not-ready"; detail: string }
  | { kind: "error"; detail: string }
  | { kind: "timeout"; detail: string }
  | { kind: "garbage"; detail: string };

export type ProbeObservation =
  | { kind: "ok"; latencyMs: number }
  /** A probe still running past the latency threshold: counts as over it (DESIGN.md L1). */
  | { kind: "in-flight"; elapsedMs: number }
  | { kind: "timeout"; elapsedMs: number }
  | { kind: "failed"; detail: string };

export interface EngineObservation {
  running: number;
  waiting: number;
  kvCacheUsage: number | null;
  /** Prompt + generation tokens processed: the engine's progress counter. */
  tokensTotal: number;
}

export interface XidEvent {
  code: number;
  busId: string;
  line: string;
}

export interface Sample<T> {
  seq: number;
  at: number;
  value: T;
}

export interface Signals {
  gpu?: Sample<GpuObservation>;
  model?: Sample<ModelObservation>;
  probe?: Sample<ProbeObservation>;
  /** Start time (epoch ms) of the probe now running, if one is. */
  probeInFlightSince?: number | null;
  engine?: Sample<EngineObservation | null>;
  /** Fatal XIDs seen since the agent started (sticky until restart: a fatal XID needs a GPU reset). */
  fatalXids?: XidEvent[];
  /** Probe latencies of the last N successful probes. */
  probeLatencies?: number[];
}
