/**
 * `LLMHA_CAPACITY_ENGINE` and the settings only `karpenter` reads, checked together at start-up
 * with the engine's own parsers: a NodePool list that does not parse, a standby AZ with no
 * NodePools, a schedule in an unknown zone stop the agent with the variable named.
 */
import { Zone } from "../../../contracts/cron";
import { ActuatorSettingError } from "../fleet/actuators/aws/settings";
import { parseStandbyNodePools, parseStandbyPlaceholder, parseStandbySchedule } from "../fleet/actuators/karpenter/settings";
import type { AgentConfig } from "./spec";
import { ConfigError } from "./error";

type CapacitySettings = Pick<AgentConfig, "capacityEngine" | "standbyAz" | "standbyAsgs" | "standbyNodepools" | "standbyPlaceholder" | "standbySchedule" | "standbyScheduleTz" | "actuator" | "inventory" | "role">;

const KARPENTER_ONLY = [
  ["standbyNodepools", "LLMHA_STANDBY_NODEPOOLS"],
  ["standbyPlaceholder", "LLMHA_STANDBY_PLACEHOLDER"],
  ["standbySchedule", "LLMHA_STANDBY_SCHEDULE"],
] as const;

function parsed(variable: string, parse: () => unknown): void {
  try {
    parse();
  } catch (err) {
    if (err instanceof ActuatorSettingError) throw new ConfigError(variable, err.message);
    throw err;
  }
}

export function checkCapacityEngine(cfg: CapacitySettings): void {
  if (cfg.capacityEngine === "asg") {
    for (const [key, env] of KARPENTER_ONLY) if (cfg[key] !== null) throw new ConfigError(env, "is read only with LLMHA_CAPACITY_ENGINE=karpenter (the engine is asg: Auto Scaling groups, LLMHA_STANDBY_ASGS)");
    return;
  }
  if (cfg.standbyAsgs !== null) throw new ConfigError("LLMHA_STANDBY_ASGS", "is for LLMHA_CAPACITY_ENGINE=asg; with karpenter the standby's capacity is LLMHA_STANDBY_NODEPOOLS");
  if (cfg.standbyNodepools !== null) parsed("LLMHA_STANDBY_NODEPOOLS", () => parseStandbyNodePools(cfg.standbyNodepools!));
  if (cfg.standbyPlaceholder !== null) parsed("LLMHA_STANDBY_PLACEHOLDER", () => parseStandbyPlaceholder(cfg.standbyPlaceholder!));
  if (cfg.standbySchedule !== null) {
    parsed("LLMHA_STANDBY_SCHEDULE", () => parseStandbySchedule(cfg.standbySchedule!));
    if (!cfg.standbyAz) throw new ConfigError("LLMHA_STANDBY_SCHEDULE", "needs LLMHA_STANDBY_AZ (the AZ the leader parks and wakes)");
  }
  try {
    new Zone(cfg.standbyScheduleTz);
  } catch {
    throw new ConfigError("LLMHA_STANDBY_SCHEDULE_TZ", `${JSON.stringify(cfg.standbyScheduleTz)} is not an IANA time zone`);
  }
  if (!cfg.standbyAz) return;
  if (cfg.standbyNodepools === null) throw new ConfigError("LLMHA_STANDBY_NODEPOOLS", `is required with LLMHA_CAPACITY_ENGINE=karpenter and LLMHA_STANDBY_AZ (${cfg.standbyAz}): the standby AZ's NodePools, nodepool=gpus,…`);
  // The engine acts through the Kubernetes API the inventory reads (aws: the cluster's; local: the drill's local cloud).
  if (cfg.role !== "node" && (cfg.actuator === "aws" || cfg.actuator === "local") && cfg.inventory === "none") {
    throw new ConfigError("LLMHA_INVENTORY", "is required with LLMHA_CAPACITY_ENGINE=karpenter: NodePools, NodeClaims and the placeholder are read and patched through the Kubernetes API it points at (kubernetes in a cluster)");
  }
}
