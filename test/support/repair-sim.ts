/**
 * GPU-node stand-ins for the repair ladder's `act` tests: each a real `Fleet` on a real
 * redis-server whose report says HEALTHY or carries a GPU fault (`fault`), acting through an
 * in-memory cluster (MemoryRepairActuator).
 */
import { Registry } from "prom-client";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import { parseActive, type RepairActSettings } from "../../agent/src/fleet/repair/act";
import type { RepairSettings } from "../../agent/src/fleet/repair/ladder";
import type { ControllerSettings } from "../../agent/src/fleet/controller/state";
import type { MemoryRepairActuator } from "../../agent/src/fleet/actuators/repair-memory";
import { StaticInventory, type InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import { encodeGpuFault, type GpuFault } from "../../agent/src/node/sources/gpu-fault";
import { testLogger } from "../redis/helpers";
import { repairDecision } from "./repair-decision";

const log = testLogger();

export interface Sim {
  fleet: Fleet;
  fault: GpuFault | null;
  /** Warning facts reported while the node serves (HEALTHY): what a predictive drain watches. */
  warned?: GpuFault | null;
  prom: Registry;
}

export interface SimOptions {
  contend: boolean;
  cluster: MemoryRepairActuator;
  inventory?: InventoryNode[];
  spare?: Map<string, number>;
}

/** `sim` starts one node of `clusterName`; `fleetOf` the three of a test: a1 (leads) and a2 in AZ a, b1 in AZ b. */
export function repairSims(
  redisUrl: () => string,
  t: { intervalMs: number; lease: { ttlMs: number; renewMs: number; contendMs: number; marginMs: number }; act: Partial<RepairActSettings>; settings?: Partial<RepairSettings>; warningScanMs?: number; controller?: Partial<ControllerSettings> },
) {
  function sim(clusterName: string, nodeId: string, az: string, o: SimOptions): Sim {
    const prom = new Registry();
    const fleet = new Fleet({
      redisUrl: redisUrl(), cluster: clusterName, nodeId, az, intervalMs: t.intervalMs, log, metrics: prom, lease: t.lease, contend: o.contend,
      inventory: o.inventory ? new StaticInventory(o.inventory) : undefined, controller: t.controller,
      repair: { mode: "act", actuator: o.cluster, act: t.act, spare: o.spare, settings: t.settings, warningScanMs: t.warningScanMs },
    });
    const s: Sim = { fleet, fault: null, prom };
    fleet.start((): NodeReport => ({
      nodeId, az, decision: repairDecision(s.fault !== null), gpus: s.fault ? 0 : 8, gpusExpected: 8, model: "m", gpuFault: encodeGpuFault(s.fault ?? s.warned ?? null),
    }));
    return s;
  }
  function fleetOf(name: string, o: Omit<SimOptions, "contend">): { keys: RedisKeys; leader: Sim; node: Sim; all: Sim[] } {
    const leader = sim(name, "a1", "a", { ...o, contend: true });
    const node = sim(name, "a2", "a", { ...o, contend: false });
    const b1 = sim(name, "b1", "b", { ...o, contend: false });
    return { keys: new RedisKeys(name), leader, node, all: [leader, node, b1] };
  }
  return { sim, fleetOf };
}

export async function gauge(prom: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = (await prom.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as { value: number; labels: Record<string, string | number> }[] | undefined)?.find((v) => Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x))?.value;
}

/** The `repair.*` events but the advice, as field maps. */
export async function events(s: Sim, keys: RedisKeys, prefix = "repair."): Promise<Record<string, string>[]> {
  return (await s.fleet.client.redis.xrange(keys.events, "-", "+"))
    .map(([, f]) => Object.fromEntries(f.flatMap((_, i) => (i % 2 ? [] : [[f[i], f[i + 1]]]))) as Record<string, string>)
    .filter((e) => e.type?.startsWith(prefix) && e.type !== "repair.advised");
}

export const active = async (s: Sim, keys: RedisKeys) => parseActive(await s.fleet.client.redis.hgetall(keys.repairActive));
