/** `act` mode's runner for the fleet: the repair actuator behind its fencing gate, the token from the lease. */
import type { Redis } from "ioredis";
import type { Registry } from "prom-client";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { LeaderLease } from "../redis/lease";
import type { Logger } from "../../util/log";
import { FencedRepairActuator, RepairStepMetrics } from "../actuators/repair-gate";
import type { RepairActuator } from "../actuators/repair-types";
import { RepairRunner, type RepairActSettings } from "./act";
import { DEFAULT_REPAIR_SETTINGS } from "./ladder";

export function repairRunner(o: {
  redis: Redis; keys: RedisKeys; writer: FencedWriter; lease: LeaderLease; log: Logger; metrics: Registry;
  actuator?: RepairActuator | null; settings?: Partial<RepairActSettings>;
}): RepairRunner | undefined {
  if (!o.actuator) return undefined;
  const token = (): number | null => o.lease.current?.token ?? null;
  const actuator = new FencedRepairActuator(o.actuator, {
    redis: o.redis, keys: o.keys, lease: { currentToken: token }, log: o.log, holder: o.lease.holderId, metrics: new RepairStepMetrics(o.metrics, o.actuator.kind),
  });
  return new RepairRunner({ redis: o.redis, keys: o.keys, writer: o.writer, actuator, log: o.log, token, settings: o.settings, windowMs: DEFAULT_REPAIR_SETTINGS.quarantineWindowMs });
}
