// The node decision the repair tests' simulated agents report: HEALTHY, or UNHEALTHY on a fatal XID.
import type { Decision, Reason } from "../../agent/src/types";

export function repairDecision(broken: boolean): Decision {
  const now = Date.now();
  const base = { since: now, checkedAt: now, loadScore: 1, pending: [] as Reason[], suppressed: [] as Reason[] };
  if (!broken) return { ...base, status: "HEALTHY", phase: "serving", weight: 100, reasons: [] };
  return { ...base, status: "UNHEALTHY", phase: "down", weight: 0, reasons: [{ source: "gpu", code: "GPU_XID_FATAL", hard: true, effect: "unhealthy" }] };
}
