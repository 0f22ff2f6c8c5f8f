/**
 * The repair actuator `act` mode uses, from the same settings as the cloud actuator: `aws` →
 * the Kubernetes API (the inventory's URL, token and CA) and EC2; `local` → the drill's local
 * cloud (`LLMHA_LOCAL_CLOUD_URL`), whose simulated instances it cordons, drains, reboots and
 * replaces; `dry-run` → log only; `none` → null (refused at start with `act`, config/load.ts).
 */
import type { AgentConfig } from "../../config/spec";
import type { Logger } from "../../util/log";
import { SERVICE_ACCOUNT_DIR } from "../inventory/inventory";
import { DryRunRepairActuator } from "./repair-dry-run";
import type { RepairActuator } from "./repair-types";
import { KubeRepairActuator } from "./repair-kube";
import { LocalRepairActuator } from "./repair-local";
import type { KubeApiOptions } from "./kube-client";

export type RepairActuatorConfig = Pick<AgentConfig, "actuator" | "awsRegion" | "inventory" | "inventoryTokenFile" | "inventoryCaFile" | "repairNamespace"> & Partial<Pick<AgentConfig, "localCloudUrl">>;

export function createRepairActuator(cfg: RepairActuatorConfig, log: Logger, env: NodeJS.ProcessEnv): RepairActuator | null {
  if (cfg.actuator === "none") return null;
  if (cfg.actuator === "local") {
    if (!cfg.localCloudUrl) throw new Error("LLMHA_REPAIR_MODE=act with LLMHA_ACTUATOR=local needs LLMHA_LOCAL_CLOUD_URL (the drill sets it)");
    return new LocalRepairActuator({ url: cfg.localCloudUrl });
  }
  if (cfg.actuator !== "aws") return new DryRunRepairActuator(log);
  return new KubeRepairActuator({ ...kubeApiOf(cfg, env, "LLMHA_REPAIR_MODE=act"), namespace: cfg.repairNamespace, region: cfg.awsRegion ?? undefined });
}

/**
 * Where the leader reaches the Kubernetes API (repairs and rollouts): in a pod, the cluster's own
 * service and the ServiceAccount's token and CA; else the inventory's URL (a test's API server).
 */
export function kubeApiOf(cfg: Pick<AgentConfig, "inventory" | "inventoryTokenFile" | "inventoryCaFile">, env: NodeJS.ProcessEnv, what: string): KubeApiOptions {
  let url: string;
  if (cfg.inventory === "kubernetes") {
    const host = env.KUBERNETES_SERVICE_HOST;
    if (!host) throw new Error(`${what} needs KUBERNETES_SERVICE_HOST (set in every pod): not running in a cluster?`);
    url = `https://${host.includes(":") ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT ?? "443"}`;
  } else url = cfg.inventory.replace(/\/+$/, "");
  const https = url.startsWith("https:");
  return {
    url,
    tokenFile: https ? cfg.inventoryTokenFile ?? `${SERVICE_ACCOUNT_DIR}/token` : null,
    caFile: https ? cfg.inventoryCaFile ?? `${SERVICE_ACCOUNT_DIR}/ca.crt` : null,
  };
}
