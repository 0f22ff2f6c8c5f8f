/** Checks of single settings that need more than their type (an inventory URL, a cron in a zone), used by load.ts. */
import { safeUrl } from "../util/log";
import { cronProblem, Zone } from "../../../contracts/cron";
import type { AgentConfig } from "./spec";
import { ConfigError } from "./error";

/** `LLMHA_INVENTORY`: `none`, `kubernetes` or an http(s) URL. */
export function checkInventory(v: string): void {
  if (v === "none" || v === "kubernetes") return;
  let u: URL | null = null;
  try {
    u = new URL(v);
  } catch {
    // below
  }
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) throw new ConfigError("LLMHA_INVENTORY", `must be none, kubernetes or an http(s) URL, got ${JSON.stringify(safeUrl(v))}`);
}

/** `LLMHA_PRACTICE_WAKE` must be a cron this agent reads, in a zone it knows, with a standby AZ to practise on. */
export function checkPracticeWake(cfg: Pick<AgentConfig, "practiceWake" | "practiceWakeTz" | "standbyAz">): void {
  if (cfg.practiceWake === null) return;
  const problem = cronProblem(cfg.practiceWake);
  if (problem) throw new ConfigError("LLMHA_PRACTICE_WAKE", problem);
  try {
    new Zone(cfg.practiceWakeTz);
  } catch {
    throw new ConfigError("LLMHA_PRACTICE_WAKE_TZ", `${JSON.stringify(cfg.practiceWakeTz)} is not an IANA time zone`);
  }
  if (!cfg.standbyAz) throw new ConfigError("LLMHA_PRACTICE_WAKE", "needs LLMHA_STANDBY_AZ (the AZ to practise waking)");
}
