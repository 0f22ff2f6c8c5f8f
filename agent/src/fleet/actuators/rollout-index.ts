/**
 * The rollout actuator the leader uses, from `LLMHA_ACTUATOR`: `dry-run` → log only (granularity
 * node); `local` → the drill's local cloud (`LLMHA_LOCAL_CLOUD_URL`: one simulated node at a
 * time); `aws` with a Kubernetes inventory → the AZs' inference Deployments in
 * `LLMHA_ROLLOUT_NAMESPACE` (one AZ at a time), and the `llm-ha-rollout` ConfigMap the Pulumi
 * program writes read as a request; otherwise none (null: a start is refused with its reason in
 * the `rollout` hash).
 */
import type { AgentConfig } from "../../config/spec";
import type { Logger } from "../../util/log";
import type { RolloutActuator, RolloutRequest } from "../rollout/types";
import { kubeApiOf } from "./repair-index";
import { DryRunRolloutActuator } from "./rollout-dry-run";
import { kubeRolloutActuator, kubeRolloutRequests } from "./rollout-kube";
import { localRolloutActuator } from "./rollout-local";

export type RolloutActuatorConfig = Pick<AgentConfig, "actuator" | "role" | "inventory" | "inventoryTokenFile" | "inventoryCaFile" | "rolloutNamespace"> & Partial<Pick<AgentConfig, "localCloudUrl">>;

export interface RolloutWiring {
  actuator: RolloutActuator | null;
  /** The Pulumi program's wanted revision (the ConfigMap), read each period beside `rollout:request`. */
  extraRequest?: () => Promise<RolloutRequest | null>;
}

export function createRolloutActuator(cfg: RolloutActuatorConfig, log: Logger, env: NodeJS.ProcessEnv = process.env): RolloutWiring {
  if (cfg.role === "node") return { actuator: null };
  if (cfg.actuator === "dry-run") return { actuator: new DryRunRolloutActuator(log) };
  if (cfg.actuator === "local" && cfg.localCloudUrl) return { actuator: localRolloutActuator({ url: cfg.localCloudUrl, log }) };
  if (cfg.actuator === "aws" && cfg.inventory) {
    const api = { ...kubeApiOf(cfg, env, "a rollout with LLMHA_ACTUATOR=aws"), namespace: cfg.rolloutNamespace, log };
    return { actuator: kubeRolloutActuator(api), extraRequest: () => kubeRolloutRequests(api) };
  }
  return { actuator: null };
}
