import type { Reason, ReasonEffect, ReasonSource } from "../../types";
import { pciKey } from "../sources/gpu";
import type { EngineObservation, GpuObservation, ModelObservation, PciObservation, ProbeObservation, Sample, Signals, XidEvent } from "../sources/signals";

/**
 * Rules: each turns one source's latest observation into reasons. Thresholds come from
 * settings; what is hard (acts at once) and what is soft (needs `fall` results) is here.
 */

export interface RuleSettings {
  gpuCount: number | null;
  model: string | null;
  probeLatencyMs: number;
  /** Requests waiting while the engine's progress counters stand still this long: wedged. */
  wedgeMs: number;
  /** A probe in flight this long with no tokens flowing: stuck (hard). */
  probeStuckMs: number;
  /** Revision the server must report (`LLMHA_MODEL_REVISION`); null: not checked. */
  modelRevision?: string | null;
  /**
   * The revisions the leader's rollout allows now (the `rollout` hash's `allow`: both revisions
   * while one is under way, the fleet's revision after it), checked instead of `modelRevision`
   * when it names any; null or empty: `modelRevision` (no rollout known, Redis never read).
   */
  allowedRevisions?: readonly string[] | null;
}

/** The revisions a served revision is checked against: the rollout's where it names any, else the configured one, else none. */
export function expectedRevisions(s: RuleSettings): readonly string[] {
  if (s.allowedRevisions && s.allowedRevisions.length > 0) return s.allowedRevisions;
  return s.modelRevision ? [s.modelRevision] : [];
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
  // NVSwitch systems: a GPU that Fabric Manager has not registered cannot use NVLink (NCCL fails or
  // falls back); `fabric.state` is null (Not Supported) on systems without a fabric.
  const fabric = gpus.filter((g) => g.fabricState !== null && (!/^completed$/i.test(g.fabricState) || (g.fabricStatus !== null && !/^success$/i.test(g.fabricStatus))));
  if (fabric.length) {
    out.push(r("gpu", "GPU_FABRIC", true, "unhealthy", fabric.map((g) => `GPU ${g.index}: fabric ${g.fabricState}${g.fabricStatus ? `, status ${g.fabricStatus}` : ""}`).join("; ")));
  }
  const slow = gpus.filter((g) => g.slowdowns.length > 0);
  if (slow.length) out.push(r("gpu", "GPU_SLOWDOWN", false, "degraded", slow.map((g) => `GPU ${g.index}: ${g.slowdowns.join("+")}`).join("; ")));
  return out;
}

/**
 * GPUs on the PCI bus against nvidia-smi and the expected count. A GPU can drop off the bus with
 * no XID logged (the driver never saw it go): the bus listing is the independent witness. An
 * empty listing means no NVIDIA GPU is visible there at all (no sysfs, a test machine): no verdict.
 */
export function pciReasons(pci: PciObservation | undefined, gpu: GpuObservation | undefined, s: RuleSettings): Reason[] {
  if (pci?.kind !== "ok" || pci.busIds.length === 0) return [];
  const out: Reason[] = [];
  const smi = gpu?.kind === "ok" ? gpu.gpus : null;
  const expected = s.gpuCount ?? smi?.length ?? null;
  const onBus = new Set(pci.busIds);
  const gone = (smi ?? []).filter((g) => g.busId !== null && !onBus.has(pciKey(g.busId)));
  if (expected !== null && pci.busIds.length < expected) {
    out.push(r("gpu", "GPU_OFF_BUS", true, "unhealthy", `${pci.busIds.length} of ${expected} GPUs on the PCI bus${gone.length ? ` (gone: ${gone.map((g) => g.busId).join(", ")})` : ""}`));
  } else if (gone.length) {
    out.push(r("gpu", "GPU_OFF_BUS", true, "unhealthy", `listed by nvidia-smi, gone from the PCI bus: ${gone.map((g) => g.busId).join(", ")}`));
  }
  if (smi && (s.gpuCount === null || smi.length >= s.gpuCount)) {
    const seen = new Set(smi.map((g) => (g.busId ? pciKey(g.busId) : "")));
    const unseen = pci.busIds.filter((b) => !seen.has(b));
    if (unseen.length) out.push(r("gpu", "GPU_MISSING", true, "unhealthy", `on the PCI bus but not listed by nvidia-smi: ${unseen.join(", ")}`));
  }
  return out;
}

export function xidReasons(xids: readonly XidEvent[], repeated: NonNullable<Signals["xidRepeated"]> = []): Reason[] {
  const out: Reason[] = [];
  if (xids.length) {
    const codes = [...new Set(xids.map((x) => `${x.code}@${x.busId}`))].join(", ");
    out.push(r("gpu", "GPU_XID_FATAL", true, "unhealthy", `fatal XID ${codes}`));
  }
  if (repeated.length) {
    const what = repeated.map((x) => `XID ${x.code}@${x.busId} ${x.count}x in ${Math.round(x.windowMs / 1000)} s`).join(", ");
    out.push(r("gpu", "GPU_XID_REPEATED", true, "unhealthy", what));
  }
  return out;
}

/** `everReady`: the server has served since the agent started; refused then means it died. */
export function modelReasons(obs: ModelObservation, s: RuleSettings, everReady: boolean): Reason[] {
  switch (obs.kind) {
    case "ready": {
      if (s.model !== null && !obs.served.includes(s.model)) {
        return [r("model", "MODEL_MISSING", true, "unhealthy", `${s.model} not served (serving: ${obs.served.join(", ") || "nothing"})`)];
      }
      // Same model everywhere: another revision (or weights) under the same name changes answers.
      // During a rollout either of its revisions is expected (the leader's `allow`), not only the configured one.
      const rev = obs.identity?.revision ?? null;
      const want = expectedRevisions(s);
      if (want.length > 0 && rev !== null && !want.includes(rev)) {
        const rollout = s.allowedRevisions && s.allowedRevisions.length > 0;
        return [r("model", "MODEL_MISMATCH", true, "unhealthy", `serving ${obs.identity?.id ?? "?"} revision ${rev}, expected ${want.join(" or ")}${rollout ? " (the fleet's rollout)" : ""}`)];
      }
      return [];
    }
    case "loading":
      return [r("model", "MODEL_LOADING", true, "loading", obs.detail)];
    case "load-failed":
      return [r("model", "MODEL_LOAD_FAILED", true, "unhealthy", obs.detail)];
    case "refused":
      return everReady
        ? [r("model", "INFERENCE_DOWN", true, "unreachable", obs.detail)]
        : [r("model", "MODEL_LOADING", true, "loading", `${obs.detail} (normal while the model loads)`)];
    case "not-ready":
      return everReady ? [r("model", "INFERENCE_NOT_READY", true, "unhealthy", obs.detail)] : [r("model", "MODEL_LOADING", true, "loading", obs.detail)];
    case "unauthorized":
      // Hard: the key stays wrong until someone fixes the Secret; waiting `fall` periods changes nothing.
      return [r("model", "INFERENCE_AUTH_REFUSED", true, "unhealthy", obs.detail)];
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
    case "wrong-answer":
      return [r("probe", "PROBE_WRONG_ANSWER", false, "unhealthy", obs.detail)];
  }
}

/** When the probe now reported started: in flight since, or its result's time less its elapsed time. */
export function probeStartedAt(probe: Sample<ProbeObservation> | undefined, inFlightSince: number | null): number | null {
  if (inFlightSince !== null) return inFlightSince;
  const v = probe?.value;
  if (v && (v.kind === "timeout" || v.kind === "in-flight")) return probe.at - v.elapsedMs;
  return null;
}

/**
 * A wedged engine: requests wait while the engine's progress counters (tokens, forward passes,
 * iterations) have not moved for `wedgeMs`, measured between engine samples — whatever `/health`
 * says. A busy engine moves its counters every step however long its queue is. The stall counts
 * from the later of the last progress and `queuedSince`, the first sample of the current run of
 * samples with requests waiting: an idle engine (no progress for minutes) that a sample catches
 * with a request just queued has not stalled for minutes.
 */
export function engineReasons(engine: Sample<EngineObservation | null> | undefined, lastProgressAt: number | null, s: RuleSettings, queuedSince: number | null = null): Reason[] {
  const e = engine?.value;
  if (!engine || !e || lastProgressAt === null || e.waiting <= 0) return [];
  const stalledMs = engine.at - Math.max(lastProgressAt, queuedSince ?? lastProgressAt);
  if (stalledMs < s.wedgeMs) return [];
  return [r("engine", "ENGINE_WEDGED", true, "unhealthy", `${e.waiting} requests waiting, ${e.running} running, no progress (${e.family} counters) for ${Math.round(stalledMs)} ms`)];
}

/**
 * The engine's progress counters moved after `since` and are still moving (last seen moving
 * less than `wedgeMs` before the latest engine sample): it is working, whatever our probe sees.
 * A move at the probe's own start (its prompt counted) followed by stillness is not flow.
 */
export function tokensFlowingSince(engine: Sample<EngineObservation | null> | undefined, lastProgressAt: number | null, since: number, wedgeMs: number): boolean {
  return engine?.value != null && lastProgressAt !== null && lastProgressAt > since && engine.at - lastProgressAt < wedgeMs;
}

/**
 * Busy ≠ dead, and stuck for every kind. A probe running or timed out while the engine's counters
 * keep moving since it started and other work is queued or running is a busy engine: `ENGINE_BUSY` (lower
 * weight) instead of `PROBE_SLOW` / `PROBE_TIMEOUT`. Probes unanswered for `probeStuckMs` — one in
 * flight that long, or a run of timeouts since the first of them started — with no tokens
 * flowing (or no engine metrics to tell) is `PROBE_STUCK`, a hard fault.
 */
/**
 * The probe's own codes: when the blast-radius cap holds any of them suspect (the probe check
 * fails on too many nodes at once: a slow shared dependency, a probe prompt the model chokes on),
 * `PROBE_STUCK` — hard, but read off the same probe — is suppressed with them.
 */
export const PROBE_CODES: ReadonlySet<string> = new Set(["PROBE_SLOW", "PROBE_TIMEOUT", "PROBE_FAILED", "PROBE_STUCK"]);

export function probeWithEngine(
  probeOwn: Reason[],
  probe: Sample<ProbeObservation> | undefined,
  inFlightSince: number | null,
  engine: Sample<EngineObservation | null> | undefined,
  lastProgressAt: number | null,
  now: number,
  s: RuleSettings,
  unansweredSince: number | null = null,
  othersProgressAt: number | null = null,
): Reason[] {
  const started = probeStartedAt(probe, inFlightSince);
  if (started === null) return probeOwn;
  // Flow since the unanswered run began: a probe that just started has not seen an engine sample yet.
  const runStart = unansweredSince !== null ? Math.min(unansweredSince, started) : started;
  const flowing = tokensFlowingSince(engine, lastProgressAt, runStart, s.wedgeMs);
  const e = engine?.value;
  // Busy: other work than our probe is queued or running while the counters move.
  if (flowing && e && (e.waiting > 0 || e.running > 1)) {
    const waitingOn = probeOwn.filter((x) => x.code === "PROBE_SLOW" || x.code === "PROBE_TIMEOUT");
    if (waitingOn.length) {
      const rest = probeOwn.filter((x) => !waitingOn.includes(x));
      return [...rest, r("engine", "ENGINE_BUSY", false, "degraded", `busy, not dead: ${e.waiting} waiting, ${e.running} running, ${e.family} counters moving (${waitingOn[0].detail ?? waitingOn[0].code})`)];
    }
    return probeOwn;
  }
  // Unanswered since the first probe of a run of timeouts (the probe timeout may be shorter than the stuck bound), or since this one started.
  const waiting = inFlightSince !== null || probe?.value.kind === "timeout";
  // The bound counts stillness, not the run: tokens that moved after the run began (other than the
  // probe's own prefill, within wedgeMs of its start) restart it. Without this a queue that has just
  // drained (a burst ending) left a run of busy timeouts behind, and the first engine sample with
  // nothing queued made the node PROBE_STUCK before the next probe could answer (seen in `burst`).
  // Progress with other work in the engine (`othersProgressAt`) is never the probe's own prefill: it counts
  // too. Without it, a new probe started just before a burst's last tokens hid them, and the run's first
  // timeout (seconds before) made a node that had just drained its queue PROBE_STUCK (seen in `burst`).
  const ownFree = lastProgressAt !== null && (inFlightSince === null || lastProgressAt - inFlightSince > s.wedgeMs) ? lastProgressAt : null;
  const moved = ownFree === null ? othersProgressAt : othersProgressAt === null ? ownFree : Math.max(ownFree, othersProgressAt);
  const since = unansweredSince ?? inFlightSince;
  const stillSince = since === null || moved === null ? since : Math.max(since, moved);
  if (waiting && stillSince !== null && now - stillSince >= s.probeStuckMs) {
    const why = e ? `no progress in the ${e.family} counters since it started` : "no engine metrics to show progress";
    return [...probeOwn.filter((x) => x.code !== "PROBE_SLOW" && x.code !== "PROBE_TIMEOUT"), r("probe", "PROBE_STUCK", true, "unhealthy", `probe unanswered after ${Math.round(now - (since ?? stillSince))} ms, ${why}`)];
  }
  return probeOwn;
}
