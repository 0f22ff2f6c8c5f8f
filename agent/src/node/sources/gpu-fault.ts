/**
 * The GPU facts behind a node's hard reasons, as the agent publishes them in its node record
 * (`gpuFault`, a short JSON) for the leader's repair ladder: reason codes alone do not say
 * which XID fired or what the driver asks for, and the cheapest repair depends on both.
 */
import type { Signals } from "./signals";
import { parseGpuWarnings, type GpuWarnings } from "./gpu-warn";

export interface GpuFault {
  /** XIDs acted on now: fatal ones, and windowed or application ones past their count. */
  xids: number[];
  /** What the driver asks for (`gpu_recovery_action` other than None: `GPU Reset`, `Node Reboot`, `Drain P2P`, `Drain and Reset`), null when nothing. */
  recovery: string | null;
  /** Row remapping: `failure` (no spare rows left), `pending` (a GPU reset applies it), null when neither. */
  remap: "failure" | "pending" | null;
  /**
   * Warning facts (`gpu-warn.ts`): corrected ECC errors and their 24 h rise, slowdown episodes in the
   * last hour. Absent when none. Written also when there is no fault (`xids: []`): a leader older than
   * this field reads such a record as no fault, and this leader reads a record without it as no warning.
   */
  warn?: GpuWarnings;
}

/** Longest `gpuFault` value an agent writes (a record is bounded; readers reject longer). */
export const GPU_FAULT_MAX_CHARS = 512;

/** The facts in the agent's current signals; null when there is none. */
export function gpuFaultOf(s: Pick<Signals, "gpu" | "fatalXids" | "xidRepeated">, warn: GpuWarnings | null = null): GpuFault | null {
  const xids = [...new Set([...(s.fatalXids ?? []).map((x) => x.code), ...(s.xidRepeated ?? []).map((x) => x.code)])].sort((a, b) => a - b);
  const g = s.gpu?.value;
  const gpus = g?.kind === "ok" ? g.gpus : [];
  const recovery = gpus.map((x) => x.recoveryAction).find((a): a is string => a !== null) ?? null;
  const remap = gpus.some((x) => x.remappedRowsFailure === true) ? "failure" : gpus.some((x) => x.remappedRowsPending === true) ? "pending" : null;
  if (xids.length === 0 && recovery === null && remap === null && warn === null) return null;
  return { xids, recovery, remap, ...(warn ? { warn } : {}) };
}

/** The record's field value ("" when no fact). */
export function encodeGpuFault(f: GpuFault | null): string {
  if (!f) return "";
  const warn = f.warn ? { warn: { ecc: f.warn.ecc, eccRise: f.warn.eccRise, slow: f.warn.slow } } : {};
  const text = JSON.stringify({ xids: f.xids.slice(0, 32), recovery: f.recovery?.slice(0, 64) ?? null, remap: f.remap, ...warn });
  return text.length <= GPU_FAULT_MAX_CHARS ? text : "";
}

/** Reads the field back; anything that is not what an agent writes reads as no fact (null). Unknown fields are ignored (a newer agent's record). */
export function parseGpuFault(text: string | null | undefined): GpuFault | null {
  if (!text || text.length > GPU_FAULT_MAX_CHARS) return null;
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (typeof v !== "object" || v === null || !Array.isArray(v.xids)) return null;
    const xids = v.xids.filter((x): x is number => Number.isInteger(x) && (x as number) > 0 && (x as number) < 10_000);
    const recovery = typeof v.recovery === "string" && v.recovery !== "" ? v.recovery.slice(0, 64) : null;
    const remap = v.remap === "failure" || v.remap === "pending" ? v.remap : null;
    const warn = parseGpuWarnings(v.warn);
    return { xids, recovery, remap, ...(warn ? { warn } : {}) };
  } catch {
    return null;
  }
}
