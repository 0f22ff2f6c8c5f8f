/**
 * The repair history (`repair:history`, a hash the leader writes fenced in `act` mode): one
 * field per host (the cloud instance id, or the node id without an inventory) → JSON list of
 * the repairs acted on there, `[{action, at, nodeId, outcome, fault}]`, trimmed to the
 * quarantine window on every write. The ladder's escalation (a restart that did not hold, a
 * fault back after a reboot) reads it; in `advise` mode nothing writes it.
 */
import type { FencedWriter } from "../redis/fenced";
import { REPAIR_ACTIONS, type FaultClass, type RepairAction, type RepairRecord } from "./ladder";

export interface HistoryEntry {
  action: RepairAction;
  /** Epoch ms the action was taken. */
  at: number;
  nodeId: string;
  /** `applied`, `failed`, or `dry-run` (an actuator that calls nothing: not a repair, never escalated on). */
  outcome: "applied" | "failed" | "dry-run";
  fault: FaultClass | string;
}

const FENCE_FIELDS = new Set(["token", "leader", "at"]);
/** Entries kept per host at most (a window's worth of repairs is a handful). */
const MAX_PER_HOST = 50;

export function parseHistory(h: Record<string, string>): Map<string, HistoryEntry[]> {
  const out = new Map<string, HistoryEntry[]>();
  for (const [host, text] of Object.entries(h)) {
    if (FENCE_FIELDS.has(host)) continue;
    try {
      const list = JSON.parse(text) as unknown;
      if (!Array.isArray(list)) continue;
      const ok = (list as Partial<HistoryEntry>[]).filter(
        (e) => e && (REPAIR_ACTIONS as readonly string[]).includes(e.action as string) && Number.isFinite(e.at) && typeof e.nodeId === "string",
      ).map((e) => ({ action: e.action!, at: Number(e.at), nodeId: String(e.nodeId).slice(0, 253), outcome: e.outcome === "failed" || e.outcome === "dry-run" ? e.outcome : "applied", fault: String(e.fault ?? "").slice(0, 32) }) as HistoryEntry);
      out.set(host, ok);
    } catch {
      // a hand-edited or corrupted field: no history for that host
    }
  }
  return out;
}

/** The ladder's records: every action taken (dry-run ones left out), done when taken; a replace or quarantine that succeeded terminated its host. */
export function historyRecords(h: ReadonlyMap<string, readonly HistoryEntry[]>): RepairRecord[] {
  const out: RepairRecord[] = [];
  for (const [host, list] of h) {
    for (const e of list) {
      if (e.outcome === "dry-run") continue;
      const terminated = e.outcome === "applied" && (e.action === "replace" || e.action === "quarantine");
      out.push({ nodeId: e.nodeId, host, action: e.action, fault: e.fault as FaultClass, at: e.at, doneAt: e.at, ...(terminated ? { terminated } : {}) });
    }
  }
  return out;
}

/** Appends an entry to a host's list, drops those older than the window, writes the field (fenced). */
export async function recordRepair(
  writer: FencedWriter, key: string, history: Map<string, HistoryEntry[]>, host: string, entry: HistoryEntry, windowMs: number,
): Promise<{ accepted: boolean }> {
  const list = [...(history.get(host) ?? []), entry].filter((e) => entry.at - e.at <= windowMs).slice(-MAX_PER_HOST);
  const r = await writer.hset(key, { [host]: JSON.stringify(list) });
  if (r.accepted) history.set(host, list);
  return r;
}
