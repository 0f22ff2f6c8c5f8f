/** The rollout runner for the fleet: the rollout actuator behind its fencing gate, the token from the lease, the metrics on the agent's registry. */
import type { Redis } from "ioredis";
import type { Registry } from "prom-client";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { LeaderLease } from "../redis/lease";
import type { Logger } from "../../util/log";
import { FencedRolloutActuator } from "../actuators/rollout-gate";
import { RolloutMetrics } from "./metrics";
import { RolloutRunner } from "./runner";
import { resolveRolloutSettings } from "./settings";
import type { GateName, RolloutActuator, RolloutRequest, RolloutSettings } from "./types";

/** `Fleet`'s `rollout` option. */
export interface FleetRolloutOptions {
  /** What changes the revision a node serves; null: none (a start is refused, with the reason in the `rollout` hash). */
  actuator: RolloutActuator | null;
  settings?: Partial<RolloutSettings>;
  /** A second request source read each period (the Pulumi program's ConfigMap). */
  extraRequest?: () => Promise<RolloutRequest | null>;
  /** The gates checked (tests); default all. */
  gates?: readonly GateName[];
}

export function rolloutRunner(
  f: { redis: Redis; keys: RedisKeys; writer: FencedWriter; lease: LeaderLease; log: Logger; metrics: Registry; intervalMs: number; canary: boolean; floorShare: number; standbyAz: string | null },
  o: FleetRolloutOptions,
): RolloutRunner {
  const metrics = new RolloutMetrics(f.metrics);
  const token = (): number | null => f.lease.current?.token ?? null;
  const actuator = o.actuator
    ? new FencedRolloutActuator(o.actuator, { redis: f.redis, keys: f.keys, lease: { currentToken: token }, log: f.log, holder: f.lease.holderId, metrics })
    : null;
  if (!o.actuator) f.log.child({ component: "rollout" }).debug("no rollout actuator: a rollout start is refused, with its reason in the rollout hash");
  return new RolloutRunner({
    redis: f.redis, keys: f.keys, writer: f.writer, log: f.log, actuator, token, settings: resolveRolloutSettings(o.settings),
    floorShare: f.floorShare, standbyAz: f.standbyAz, canary: f.canary,
    // Agents write their perf sample every period: one older than five is a node that stopped (or a clock far off).
    perfMaxAgeMs: 5 * f.intervalMs, extraRequest: o.extraRequest, metrics, gates: o.gates,
  });
}
