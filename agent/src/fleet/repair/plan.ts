/**
 * The published repair plan (`repair:plan`, a hash the leader writes fenced): one field per
 * node id → JSON of its decision, plus `:updatedAt`, `:mode` and `:quarantined` (names no node
 * id can have) and the fence's `token, leader, at`. Read by `llm-ha status`.
 */
import { REPAIR_ACTIONS, type RepairAction } from "./ladder";

/** One node's entry. `since`: epoch ms the decision (action and the action it waits for) was first made. */
export interface PlanEntry {
  action: RepairAction | "held" | "none";
  wanted: RepairAction | null;
  reason: string;
  since: number;
  host: string;
  az: string;
  fault: string;
  bound?: string;
}

export const PLAN_META = { updatedAt: ":updatedAt", mode: ":mode", quarantined: ":quarantined" } as const;
const NOT_NODES = new Set([...Object.values(PLAN_META), "token", "leader", "at"]);

export function encodePlanEntry(e: PlanEntry): string {
  return JSON.stringify(e);
}

const ACTIONS: readonly string[] = [...REPAIR_ACTIONS, "held", "none"];

/** An entry as written, or null when the value is not one (a hand-edited or corrupted hash). */
export function parsePlanEntry(text: string | undefined): PlanEntry | null {
  if (!text) return null;
  try {
    const v = JSON.parse(text) as Partial<PlanEntry>;
    if (typeof v !== "object" || v === null || !ACTIONS.includes(v.action as string)) return null;
    return {
      action: v.action as PlanEntry["action"],
      wanted: (REPAIR_ACTIONS as readonly string[]).includes(v.wanted as string) ? (v.wanted as RepairAction) : null,
      reason: String(v.reason ?? "").slice(0, 500),
      since: Number(v.since) || 0,
      host: String(v.host ?? "").slice(0, 128),
      az: String(v.az ?? "").slice(0, 64),
      fault: String(v.fault ?? "").slice(0, 32),
      ...(v.bound ? { bound: String(v.bound).slice(0, 32) } : {}),
    };
  } catch {
    return null;
  }
}

/** The node entries of a plan hash (meta and fence fields left out, unreadable values dropped). */
export function planEntries(h: Record<string, string>): Map<string, PlanEntry> {
  const out = new Map<string, PlanEntry>();
  for (const [id, v] of Object.entries(h)) {
    if (NOT_NODES.has(id)) continue;
    const e = parsePlanEntry(v);
    if (e) out.set(id, e);
  }
  return out;
}
