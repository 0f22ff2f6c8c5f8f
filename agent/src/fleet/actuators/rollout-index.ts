/**
 * The rollout actuator the leader uses, from `LLMHA_ACTUATOR`: `dry-run` → log only (granularity
 * node); `local` → the drill's local cloud (`LLMHA_LOCAL_CLOUD_URL`: one simulated node at a
 * time); otherwise none (null: a start is refused with its reason in the `rollout` hash).
 */
import type { AgentConfig } from "../../config/spec";
import type { Logger } from "../../util/log";
import type { RolloutActuator } from "../rollout/types";
import { DryRunRolloutActuator } from "./rollout-dry-run";
import { localRolloutActuator } from "./rollout-local";

export function createRolloutActuator(cfg: Pick<AgentConfig, "actuator" | "role"> & Partial<Pick<AgentConfig, "localCloudUrl">>, log: Logger): RolloutActuator | null {
  if (cfg.role === "node") return null;
  if (cfg.actuator === "dry-run") return new DryRunRolloutActuator(log);
  if (cfg.actuator === "local" && cfg.localCloudUrl) return localRolloutActuator({ url: cfg.localCloudUrl, log });
  return null;
}
