/**
 * The repair ladder's settings as the agent's configuration gives them (`LLMHA_REPAIR_MODE`,
 * `LLMHA_REPAIR_SPARE`, `LLMHA_REPAIR_PREDICTIVE`, `LLMHA_REPAIR_PREDICTIVE_BUDGET`): a leaf
 * module, read by config/load.ts and the fleet.
 */

/** `LLMHA_REPAIR_PREDICTIVE`: predictive drains of serving nodes with warning facts (predictive.ts). */
export const REPAIR_PREDICTIVE = ["on", "off"] as const;

/** The ladder's settings from the configuration (the rest keep their defaults). */
export function repairLadderSettings(cfg: { repairPredictive: string; repairPredictiveBudget: number }): { predictive: boolean; predictiveBudget: number } {
  return { predictive: cfg.repairPredictive !== "off", predictiveBudget: cfg.repairPredictiveBudget };
}

/** `off`: no plan; `advise`: the plan is published and shown, nothing is done; `act`: as advise, and the plan is carried out (act.ts): restarts, resets (as reboots), reboots, replacements. */
export const REPAIR_MODES = ["off", "advise", "act"] as const;
export type RepairMode = (typeof REPAIR_MODES)[number];

/** `LLMHA_REPAIR_SPARE`: `az=count,…` → a map; throws a message naming the bad item. */
export function parseRepairSpare(text: string | null): Map<string, number> {
  const out = new Map<string, number>();
  if (text === null) return out;
  for (const raw of text.split(",")) {
    const item = raw.trim();
    if (item === "") continue;
    const m = /^([A-Za-z0-9_.-]{1,64})=(\d{1,4})$/.exec(item);
    if (!m) throw new Error(`${JSON.stringify(item.slice(0, 80))} is not AZ=COUNT (e.g. us-east-1a=2)`);
    out.set(m[1], Number(m[2]));
  }
  return out;
}
