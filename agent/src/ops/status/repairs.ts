/**
 * The repair plan as `llm-ha status` shows it: the leader's `repair:plan` hash (fleet/repair/plan.ts)
 * split into advised actions and held nodes, with the quarantined hosts, and (`act` mode) the step
 * each repair under way is at, from `repair:active`.
 */
import { parseActive } from "../../fleet/repair/act";
import { PLAN_META, planEntries } from "../../fleet/repair/plan";
import type { RepairRow, RepairsView } from "./types";

const collator = new Intl.Collator("en", { numeric: true });

export function repairsView(h: Record<string, string>, now: number, staleAfterMs: number, activeHash: Record<string, string> = {}): RepairsView | null {
  const at = Number(h[PLAN_META.updatedAt]);
  if (!Number.isFinite(at) || at <= 0) return null;
  const active = parseActive(activeHash);
  const rows: RepairRow[] = [...planEntries(h)]
    .filter(([, e]) => e.action !== "none")
    .map(([nodeId, e]) => {
      const a = active.get(nodeId);
      const step = a ? { step: { name: a.step === "failed" ? `failed at ${a.failedStep ?? "?"}` : a.step, ageMs: Math.max(0, now - a.since), detail: a.detail } } : {};
      return { nodeId, az: e.az, host: e.host, action: e.action, wanted: e.wanted, reason: e.reason, fault: e.fault, bound: e.bound ?? null, since: e.since, ageMs: Math.max(0, now - e.since), ...step };
    })
    .sort((a, b) => collator.compare(a.az, b.az) || collator.compare(a.nodeId, b.nodeId));
  return {
    mode: h[PLAN_META.mode] || "advise",
    updatedAt: at,
    ageMs: Math.max(0, now - at),
    stale: !(now - at <= staleAfterMs),
    advised: rows.filter((r) => r.action !== "held"),
    held: rows.filter((r) => r.action === "held"),
    quarantined: (h[PLAN_META.quarantined] ?? "").split(",").filter(Boolean),
  };
}
