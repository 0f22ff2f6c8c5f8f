/**
 * `LLMHA_ACTUATOR` → the implementation, behind the fencing gate. `aws` loads the AWS SDK
 * only when chosen; `none` gives null (the leader publishes desired state and acts on nothing).
 */
import type { Redis } from "ioredis";
import type { Registry } from "prom-client";
import type { AgentConfig } from "../../config/spec";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import { ActuatorMetrics, FencedActuator, type TokenCheck } from "./gate";
import { LocalActuator } from "./local";
import type { Actuator } from "./types";
import { withCapacityEngine } from "./capacity";
import { KarpenterEngine } from "./karpenter/standby";
import { parseStandbyNodePools, parseStandbyPlaceholder } from "./karpenter/settings";
import { kubeApiOf } from "./repair-index";

export type ActuatorConfig = Pick<AgentConfig, "actuator" | "awsRegion" | "standbyAz" | "standbyAsgs" | "shiftResources" | "azIds" | "localCloudUrl"> &
  Partial<Pick<AgentConfig, "standbyFallback" | "standbyWakeBoundMs" | "standbyHealthyBoundMs" | "reservedGroups" | "capacityEngine" | "standbyNodepools" | "standbyPlaceholder" | "inventory" | "inventoryTokenFile" | "inventoryCaFile">>;

export interface ActuatorDeps {
  redis: Redis;
  keys: RedisKeys;
  lease: TokenCheck;
  log: Logger;
  /** The agent's registry: `llmha_actuator_*` series go there. */
  metrics: Registry;
  /** Lease holder id, written with each action event. */
  holder: string;
}

/**
 * The implementation alone (no fencing), with the standby's capacity engine: `karpenter` takes
 * the standby actions of `aws` and `local` (the drill's local cloud serves the same Kubernetes
 * paths); `dry-run` stays dry. The settings were validated by `loadConfig`.
 */
export async function createActuatorImpl(cfg: ActuatorConfig, log: Logger, metrics?: Registry, env: NodeJS.ProcessEnv = process.env): Promise<Actuator | null> {
  const actuator = await createActuatorKind(cfg, log, metrics);
  if (!actuator || cfg.capacityEngine !== "karpenter" || !cfg.standbyNodepools || (cfg.actuator !== "aws" && cfg.actuator !== "local")) return actuator;
  const api = kubeApiOf({ inventory: cfg.inventory ?? "none", inventoryTokenFile: cfg.inventoryTokenFile ?? "", inventoryCaFile: cfg.inventoryCaFile ?? "" }, env, "LLMHA_CAPACITY_ENGINE=karpenter");
  const engine = new KarpenterEngine({
    api,
    pools: parseStandbyNodePools(cfg.standbyNodepools),
    placeholder: cfg.standbyPlaceholder ? parseStandbyPlaceholder(cfg.standbyPlaceholder) : null,
    standbyAz: cfg.standbyAz ?? undefined,
    wakeBoundMs: cfg.standbyWakeBoundMs ?? undefined,
    healthyBoundMs: cfg.standbyHealthyBoundMs ?? undefined,
  });
  log.info({ engine: "karpenter", pools: cfg.standbyNodepools, placeholder: cfg.standbyPlaceholder ?? null }, "standby capacity engine: Karpenter NodePools");
  return withCapacityEngine(actuator, engine);
}

async function createActuatorKind(cfg: ActuatorConfig, log: Logger, metrics?: Registry): Promise<Actuator | null> {
  if (cfg.actuator === "none") return null;
  if (cfg.actuator === "local") return new LocalActuator({ url: cfg.localCloudUrl!, wakeBoundMs: cfg.standbyWakeBoundMs ?? undefined, healthyBoundMs: cfg.standbyHealthyBoundMs ?? undefined });
  const { parseStandbyGroups, parseAzIds, parseReservedGroups } = await import("./aws.js");
  const named = {
    standbyGroups: cfg.standbyAsgs ? parseStandbyGroups(cfg.standbyAsgs) : [],
    shiftResources: cfg.shiftResources,
    azIds: cfg.azIds ? parseAzIds(cfg.azIds) : {},
  };
  if (cfg.actuator === "dry-run") {
    const { DryRunActuator } = await import("./dry-run.js");
    return new DryRunActuator({ log, ...named });
  }
  const { AwsActuator } = await import("./aws.js");
  return new AwsActuator({
    region: cfg.awsRegion!,
    ...named,
    standbyAz: cfg.standbyAz ?? undefined,
    standbyFallback: cfg.standbyFallback ? parseStandbyGroups(cfg.standbyFallback, "LLMHA_STANDBY_FALLBACK") : [],
    wakeBoundMs: cfg.standbyWakeBoundMs ?? undefined,
    healthyBoundMs: cfg.standbyHealthyBoundMs ?? undefined,
    reservedGroups: cfg.reservedGroups ? parseReservedGroups(cfg.reservedGroups) : [],
    log,
    registry: metrics,
  });
}

/** The configured actuator behind `FencedActuator`, or null for `none`. */
export async function createActuator(cfg: ActuatorConfig, deps: ActuatorDeps): Promise<FencedActuator | null> {
  const inner = await createActuatorImpl(cfg, deps.log, deps.metrics);
  if (!inner) return null;
  return new FencedActuator(inner, {
    redis: deps.redis,
    keys: deps.keys,
    lease: deps.lease,
    log: deps.log,
    metrics: new ActuatorMetrics(deps.metrics, inner.kind),
    holder: deps.holder,
  });
}
