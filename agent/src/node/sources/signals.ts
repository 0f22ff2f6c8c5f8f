import type { Reason } from "../../types";
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
  /** `ecc.errors.corrected.volatile.total` (since the driver loaded); absent or null when not reported. A rising count foretells a hard fault. */
  eccCorrectedVolatile?: number | null;
  remappedRowsPending: boolean | null;
  remappedRowsFailure: boolean | null;
  retiredPagesPending: boolean | null;
  /** Clock-event (throttle) reasons that are `Active` and mean trouble (thermal, hardware slowdown). */
  slowdowns: string[];
  /** `gpu_recovery_action`: null when `None` or not reported. */
  recoveryAction: string | null;
  /** `fabric.state` (NVSwitch systems: `Completed` once Fabric Manager registered the GPU); null when not reported / not supported. */
  fabricState: string | null;
  /** `fabric.status`: `Success`, or the registration error; null when not reported. */
  fabricStatus: string | null;
}

/** NVIDIA GPUs (vendor 0x10de, display/3D class) the PCI bus lists, by bus id (`0000:53:00.0`). */
export type PciObservation = { kind: "ok"; busIds: string[] } | { kind: "error"; detail: string };

/** What the server says it serves, where its API tells: for the fleet's "same model everywhere" check. */
export interface ModelIdentity {
  id: string;
  /** Revision, commit or weights hash (TGI `model_sha`, Triton version). */
  revision: string | null;
  dtype: string | null;
  maxContext: number | null;
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
  | { kind: "ready"; served: string[]; identity?: ModelIdentity }
  /** The server says the model failed to load (Triton `UNAVAILABLE`): corrupted or missing weights. */
  | { kind: "load-failed"; detail: string }
  /** The server says it is loading (llama.cpp 503 "Loading model"). */
  | { kind: "loading"; detail: string }
  /** Nothing listens: normal while a server loads, a crash once it had served. */
  | { kind: "refused"; detail: string }
  /** The server answers but says it is not ready (vLLM/TGI 503, Triton 400). */
  | { kind: "not-ready"; detail: string }
  /** The server refused the agent's API key (401/403 on its API): it serves, but not to us. */
  | { kind: "unauthorized"; detail: string }
  | { kind: "error"; detail: string }
  | { kind: "timeout"; detail: string }
  | { kind: "garbage"; detail: string };

export type ProbeObservation =
  | { kind: "ok"; latencyMs: number }
  /** A probe still running past the latency threshold: counts as over it (docs/design.md, L1). */
  | { kind: "in-flight"; elapsedMs: number }
  | { kind: "timeout"; elapsedMs: number }
  | { kind: "failed"; detail: string }
  /** A completion that does not match `LLMHA_PROBE_EXPECT`: the model answers garbage. */
  | { kind: "wrong-answer"; latencyMs: number; detail: string };

export interface EngineObservation {
  /** Which server's series these are (`vllm`, `tgi`, `triton`, `llamacpp`, `sglang`). */
  family: string;
  running: number;
  waiting: number;
  kvCacheUsage: number | null;
  /** Sum of the family's progress counters (tokens, forward passes, iterations): moves while the engine works. */
  tokensTotal: number;
  /**
   * vLLM's `vllm:corrupted_requests` counter (requests whose logits went NaN) as last read; null
   * (or absent) where the server does not export it: other families, vLLM versions without it.
   * A rise between canary rounds makes the canary re-check at once (`canary/corrupted.ts`).
   */
  corruptedRequests?: number | null;
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
  /**
   * Start time of the first probe of a run that got no answer at all (each timed out, or the
   * last one still runs); null once the server answers a probe, whatever the answer. A probe
   * timeout shorter than `probeStuckMs` must not hide a server that never answers.
   */
  probeUnansweredSince?: number | null;
  engine?: Sample<EngineObservation | null>;
  /** Fatal XIDs seen since the agent started (sticky until restart: a fatal XID needs a GPU reset). */
  fatalXids?: XidEvent[];
  /** Windowed XID rules over their count now (`LLMHA_XID_RULES`). */
  xidRepeated?: { code: number; busId: string; count: number; windowMs: number }[];
  /** NVIDIA GPUs on the PCI bus, read with each GPU check. */
  pci?: Sample<PciObservation>;
  /** Probe latencies of the last N successful probes. */
  probeLatencies?: number[];
  /** The canaries' word: what differed while the node's answers are a mismatch, else null. */
  canaryMismatch?: string | null;
  /** The deep check before traffic while it has not passed (`DEEP_CHECK_PENDING`, `GPU_DIAG_FAILED`), else null. */
  deepCheck?: Reason | null;
}
