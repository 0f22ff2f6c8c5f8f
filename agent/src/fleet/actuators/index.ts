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

export type ActuatorConfig = Pick<AgentConfig, "actuator" | "awsRegion" | "standbyAz" | "standbyAsgs" | "shiftResources" | "azIds" | "localCloudUrl"> &
  Partial<Pick<AgentConfig, "standbyFallback" | "standbyWakeBoundMs" | "standbyHealthyBoundMs" | "reservedGroups">>;

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

/** The implementation alone (no fencing). The settings were validated by `loadConfig`. */
export async function createActuatorImpl(cfg: ActuatorConfig, log: Logger, metrics?: Registry): Promise<Actuator | null> {
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
