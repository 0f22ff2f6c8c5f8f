import type { Reason, ReasonEffect, ReasonSource } from "../types";
import type { EngineObservation, GpuObservation, ModelObservation, ProbeObservation, Sample, XidEvent } from "../sources/signals";

/**
 * Rules: each turns one source's latest observation into reasons. Thresholds come from
 * settings; what is hard (acts at once) and what is soft (needs `fall` results) is here.
 */

export interface RuleSettings {
  gpuCount: number | null;
  model: string | null;
  probeLatencyMs: number;
  wedgeMs: number;
}

function r(source: ReasonSource, code: string, hard: boolean, effect: ReasonEffect, detail?: string): Reason {
  return detail === undefined ? { source, code, hard, effect } : { source, code, hard, effect, detail };
}

export function gpuReasons(obs: GpuObservation, s: RuleSettings): Reason[] {
  switch (obs.kind) {
    case "driver-not-loaded":
      return [r("gpu", "GPU_DRIVER_NOT_LOADED", true, "unhealthy", obs.detail)];
    case "gpu-lost":
      return [r("gpu", "GPU_LOST", true, "unhealthy", obs.detail)];
    case "driver-mismatch":
      return [r("gpu", "GPU_DRIVER_MISMATCH", true, "unhealthy", obs.detail)];
    case "failed":
      return [r("gpu", "GPU_QUERY_FAILED", false, "unknown", obs.detail)];
    case "timeout":
      // Acts on the first result: one timed-out query already spans the whole GPU timeout
      // (5 s, five periods), as long as `fall` quick failures; waiting for `fall` of them
      // drained a node with a hung nvidia-smi only after 10-15 s.
      return [r("gpu", "GPU_QUERY_TIMEOUT", true, "unknown", obs.detail)];
    case "garbage":
      return [r("gpu", "GPU_QUERY_GARBAGE", false, "unknown", obs.detail)];
    case "ok":
      break;
  }
  const out: Reason[] = [];
  const gpus = obs.gpus;
  // Fewer GPUs than expected: EKS treats it as XID 79 (fallen off the bus).
  if (s.gpuCount !== null && gpus.length < s.gpuCount) {
    out.push(r("gpu", "GPU_MISSING", true, "unhealthy", `${gpus.length} of ${s.gpuCount} GPUs visible`));
  }
  const on = (pred: (g: (typeof gpus)[number]) => boolean): string => gpus.filter(pred).map((g) => g.index).join(",");
  const ecc = on((g) => (g.eccUncorrectedVolatile ?? 0) > 0);
  if (ecc) out.push(r("gpu", "GPU_ECC_UNCORRECTED", true, "unhealthy", `uncorrected volatile ECC errors on GPU ${ecc}`));
  const remapFail = on((g) => g.remappedRowsFailure === true);
  if (remapFail) out.push(r("gpu", "GPU_ROW_REMAP_FAILURE", true, "unhealthy", `row remapping failed on GPU ${remapFail}`));
  const recovery = gpus.filter((g) => g.recoveryAction !== null);
  if (recovery.length) {
    out.push(r("gpu", "GPU_RECOVERY_ACTION", true, "unhealthy", recovery.map((g) => `GPU ${g.index}: ${g.recoveryAction}`).join("; ")));
  }
  const remapPending = on((g) => g.remappedRowsPending === true);
  if (remapPending) out.push(r("gpu", "GPU_ROW_REMAP_PENDING", false, "degraded", `row remap pending (reset needed) on GPU ${remapPending}`));
  const retired = on((g) => g.retiredPagesPending === true);
  if (retired) out.push(r("gpu", "GPU_RETIRED_PAGES_PENDING", false, "degraded", `page retirement pending on GPU ${retired}`));
  const slow = gpus.filter((g) => g.slowdowns.length > 0);
  if (slow.length) out.push(r("gpu", "GPU_SLOWDOWN", false, "degraded", slow.map((g) => `GPU ${g.index}: ${g.slowdowns.join("+")}`).join("; ")));
  return out;
}

export function xidReasons(xids: readonly XidEvent[]): Reason[] {
  if (xids.length === 0) return [];
  const codes = [...new Set(xids.map((x) => `${x.code}@${x.busId}`))].join(", ");
  return [r("gpu", "GPU_XID_FATAL", true, "unhealthy", `fatal XID ${codes}`)];
}

/** `everReady`: the server has served since the agent started; refused then means it died. */
export function modelReasons(obs: ModelObservation, s: RuleSettings, everReady: boolean): Reason[] {
  switch (obs.kind) {
    case "ready":
      if (s.model !== null && !obs.served.includes(s.model)) {
        return [r("model", "MODEL_MISSING", true, "unhealthy", `${s.model} not served (serving: ${obs.served.join(", ") || "nothing"})`)];
      }
      return [];
    case "loading":
      return [r("model", "MODEL_LOADING", true, "loading", obs.detail)];
    case "refused":
      return everReady
        ? [r("model", "INFERENCE_DOWN", true, "unreachable", obs.detail)]
        : [r("model", "MODEL_LOADING", true, "loading", `${obs.detail} (normal while the model loads)`)];
    case "not-ready":
      return everReady ? [r("model", "INFERENCE_NOT_READY", true, "unhealthy", obs.detail)] : [r("model", "MODEL_LOADING", true, "loading", obs.detail)];
    case "error":
      return [r("model", "INFERENCE_ERROR", false, "unhealthy", obs.detail)];
    case "timeout":
      return [r("model", "INFERENCE_TIMEOUT", false, "unreachable", obs.detail)];
    case "garbage":
      return [r("model", "INFERENCE_BAD_ANSWER", false, "unhealthy", obs.detail)];
  }
}

export function probeReasons(obs: ProbeObservation, s: RuleSettings): Reason[] {
  switch (obs.kind) {
    case "ok":
      return obs.latencyMs > s.probeLatencyMs ? [r("probe", "PROBE_SLOW", false, "degraded", `probe took ${Math.round(obs.latencyMs)} ms > ${s.probeLatencyMs} ms`)] : [];
    case "in-flight":
      return [r("probe", "PROBE_SLOW", false, "degraded", `probe still running after ${Math.round(obs.elapsedMs)} ms > ${s.probeLatencyMs} ms`)];
    case "timeout":
      return [r("probe", "PROBE_TIMEOUT", false, "unhealthy", `probe gave no answer in ${Math.round(obs.elapsedMs)} ms`)];
    case "failed":
      return [r("probe", "PROBE_FAILED", false, "unhealthy", obs.detail)];
  }
}

/**
 * A wedged engine: requests wait, the token counters have not moved for `wedgeMs`, and
 * the probe is stuck or failing — while `/health` may still say 200.
 */
export function engineReasons(
  engine: Sample<EngineObservation | null> | undefined,
  lastProgressAt: number | null,
  probe: Sample<ProbeObservation> | undefined,
  probeInFlightSince: number | null,
  now: number,
  s: RuleSettings,
): Reason[] {
  const e = engine?.value;
  if (!e || lastProgressAt === null || e.waiting <= 0) return [];
  const stalledMs = now - lastProgressAt;
  if (stalledMs < s.wedgeMs) return [];
  const probeStuck = probeInFlightSince !== null && now - probeInFlightSince >= s.wedgeMs;
  const probeFailing = probe !== undefined && (probe.value.kind === "timeout" || probe.value.kind === "failed");
  if (!probeStuck && !probeFailing) return [];
  return [r("engine", "ENGINE_WEDGED", true, "unhealthy", `${e.waiting} requests waiting, no token progress for ${Math.round(stalledMs)} ms, probe ${probeStuck ? "stuck" : "failing"}`)];
}
