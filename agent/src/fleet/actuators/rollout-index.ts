/**
 * The rollout actuator the leader uses, from `LLMHA_ACTUATOR`: `dry-run` → log only (granularity
 * node); otherwise none yet here (null: a start is refused with its reason in the `rollout`
 * hash). The drill's local cloud and Kubernetes have their own (`rollout-local.ts`, `rollout-kube.ts`).
 */
import type { AgentConfig } from "../../config/spec";
import type { Logger } from "../../util/log";
import type { RolloutActuator } from "../rollout/types";
import { DryRunRolloutActuator } from "./rollout-dry-run";

export function createRolloutActuator(cfg: Pick<AgentConfig, "actuator" | "role">, log: Logger): RolloutActuator | null {
  if (cfg.role === "node") return null;
  if (cfg.actuator === "dry-run") return new DryRunRolloutActuator(log);
  return null;
}
