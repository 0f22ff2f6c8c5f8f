import { isObj, objectSetting, type Obj, type Settings } from "./read";

/** What the leader's repair ladder does about a broken GPU node (`LLMHA_REPAIR_MODE`, docs/actuators.md). */
export const REPAIR_MODES = Object.freeze(["advise", "act", "off"] as const);
export type RepairMode = (typeof REPAIR_MODES)[number];

/** The largest spare count an AZ may hold back (`LLMHA_REPAIR_SPARE`). */
export const MAX_REPAIR_SPARE = 1000;
/** The largest predictive-drain budget per 24 h (`LLMHA_REPAIR_PREDICTIVE_BUDGET`, the agent's bound). */
export const MAX_PREDICTIVE_BUDGET = 1000;

/**
 * `llm-ha:repair`: the repair ladder's mode and the spare nodes per AZ it keeps out of a
 * drain. `advise` (the default) plans and shows the plan (`llm-ha status`) and changes
 * nothing; `act` cordons, drains, restarts pods and reboots instances, and the stack gives the
 * controller the IAM and RBAC grants for it; `off` runs no ladder.
 */
export interface RepairConfig {
  mode: RepairMode;
  /** AZ → spare nodes (`LLMHA_REPAIR_SPARE`); absent when none are given. */
  spare?: Record<string, number>;
  /** Predictive drains per 24 h, fleet-wide (`LLMHA_REPAIR_PREDICTIVE_BUDGET`); absent: the agent's default (2). */
  predictiveBudget?: number;
}

/** `llm-ha:repair`, validated against the stack's AZs; every problem names its key. */
export function repairOf(s: Settings, azs: string[]): RepairConfig {
  const { p, key } = s;
  const r = repairObject(s);
  for (const k of Object.keys(r)) if (!["mode", "spare", "predictiveBudget"].includes(k)) p.add(key(`repair.${k}`), "unknown setting; known: mode, spare, predictiveBudget");
  let mode: RepairMode = "advise";
  if (r.mode !== undefined) {
    if (REPAIR_MODES.includes(r.mode as RepairMode)) mode = r.mode as RepairMode;
    else p.add(key("repair.mode"), `${JSON.stringify(r.mode)} must be one of ${REPAIR_MODES.join(", ")}`);
  }
  const b = r.predictiveBudget;
  let budget: { predictiveBudget?: number } = {};
  if (b !== undefined) {
    if (Number.isInteger(b) && (b as number) >= 0 && (b as number) <= MAX_PREDICTIVE_BUDGET) budget = { predictiveBudget: b as number };
    else p.add(key("repair.predictiveBudget"), `${JSON.stringify(b)} must be a whole number from 0 to ${MAX_PREDICTIVE_BUDGET} (predictive drains per 24 h)`);
  }
  if (r.spare === undefined) return { mode, ...budget };
  if (!isObj(r.spare)) {
    p.add(key("repair.spare"), `must map an AZ of ${key("azs")} to a spare node count, e.g. {${azs[0] ?? "us-east-1a"}: 1}`);
    return { mode, ...budget };
  }
  const spare: Record<string, number> = {};
  for (const [az, n] of Object.entries(r.spare)) {
    if (!azs.includes(az)) p.add(key(`repair.spare.${az}`), `is not an AZ of ${key("azs")} (${azs.join(", ")})`);
    else if (!Number.isInteger(n) || (n as number) < 0 || (n as number) > MAX_REPAIR_SPARE) p.add(key(`repair.spare.${az}`), `${JSON.stringify(n)} must be a whole number from 0 to ${MAX_REPAIR_SPARE}`);
    else spare[az] = n as number;
  }
  return Object.keys(spare).length > 0 ? { mode, spare, ...budget } : { mode, ...budget };
}

/** The `llm-ha:repair` object, or `{}` (a bare value reported with the command meant). */
function repairObject(s: Settings): Obj {
  return objectSetting(s, "repair", "{mode, spare, predictiveBudget}", `pulumi config set --path '${s.key("repair.mode")}' act (or advise, off)`);
}

/** `LLMHA_REPAIR_SPARE` of the spare counts: `az=count,…` in the stack's AZ order. */
export function repairSpareSetting(spare: Record<string, number>, azs: string[]): string {
  return azs.filter((az) => spare[az] !== undefined).map((az) => `${az}=${spare[az]}`).join(",");
}
