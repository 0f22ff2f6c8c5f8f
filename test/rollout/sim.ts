/**
 * A fleet for the rollout runner's tests on a real redis-server: GPU nodes (each a real `Fleet`
 * that heartbeats what the in-memory rollout actuator makes it serve, and writes its `perf`
 * sample into its record each period) and controller-only leaders (`register: false`) that step
 * the rollout through the same actuator.
 */
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import type { MemoryRolloutActuator } from "../../agent/src/fleet/actuators/rollout-memory";
import type { FleetRolloutOptions } from "../../agent/src/fleet/rollout/wire";
import type { NodePerf, RolloutState } from "../../agent/src/fleet/rollout/types";
import { waitFor } from "../../agent/src/util/net";
import { testLogger } from "../redis/helpers";
import { repairDecision } from "../support/repair-decision";

const log = testLogger();
export const I = 200;
const LEASE = { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 };

export interface Sim {
  fleet: Fleet;
  prom: Registry;
  stop(): Promise<void>;
}

export interface RolloutFleet {
  keys: RedisKeys;
  nodes: Sim[];
  leaders: Sim[];
  /** The leader now, null when none leads. */
  leader(): Sim | null;
  state(): Promise<RolloutState | null>;
  hash(): Promise<Record<string, string>>;
  /** A client of the test's own (outlives any leader). */
  redis: Redis;
  stop(): Promise<void>;
}

/** Nodes a1,a2,b1,b2,c1,c2 (8 GPUs each) serving `v1` until the actuator switches them; `perf` per revision. */
export async function rolloutFleet(url: string, cluster: string, act: MemoryRolloutActuator, o: { leaders?: number; perf?: (rev: string) => Partial<NodePerf>; rollout?: Partial<FleetRolloutOptions> } = {}): Promise<RolloutFleet> {
  const keys = new RedisKeys(cluster);
  const rollout: FleetRolloutOptions = { actuator: act, ...o.rollout };
  const leaders: Sim[] = [];
  for (let i = 0; i < (o.leaders ?? 1); i++) {
    const prom = new Registry();
    const fleet = new Fleet({ redisUrl: url, cluster, nodeId: `ctl${i}`, az: "controller", intervalMs: I, log, metrics: prom, lease: LEASE, contend: true, register: false, rollout });
    fleet.start(() => {
      throw new Error("the controller registers no node");
    });
    leaders.push({ fleet, prom, stop: () => fleet.stop() });
  }
  const nodes: Sim[] = [];
  for (const az of ["a", "b", "c"]) {
    for (const i of [1, 2]) {
      const nodeId = `${az}${i}`;
      const prom = new Registry();
      const fleet = new Fleet({ redisUrl: url, cluster, nodeId, az, intervalMs: I, log, metrics: prom, lease: LEASE, contend: false, rollout });
      fleet.start((): NodeReport => ({ nodeId, az, decision: repairDecision(false), gpus: 8, gpusExpected: 8, model: "m", modelRevision: act.revisionOf(nodeId, "v1") }));
      let timer: NodeJS.Timeout | null = null;
      const writePerf = (): void => {
        const revision = act.revisionOf(nodeId, "v1");
        const perf: NodePerf = { at: Date.now(), revision, p50Ms: 100, probes: 20, errors: 0, loadMs: 10_000, corrupted: 0, continuation: "ok", ...(o.perf?.(revision) ?? {}) };
        void fleet.client.redis.hset(keys.node(nodeId), "perf", JSON.stringify(perf)).catch(() => undefined);
        timer = setTimeout(writePerf, I);
      };
      // Once the record exists (the first heartbeat): the agent's own perf field beside it.
      void waitFor(`${nodeId} registered`, () => fleet.registry.lastHeartbeatAt !== null, { timeoutMs: 10_000 }).then(writePerf, () => undefined);
      nodes.push({ fleet, prom, stop: async () => {
        if (timer) clearTimeout(timer);
        timer = null;
        await fleet.stop();
      } });
    }
  }
  const redis = new Redis(url, { lazyConnect: false });
  return {
    keys, nodes, leaders, redis,
    leader: () => leaders.find((l) => l.fleet.isLeader) ?? null,
    hash: () => redis.hgetall(keys.rollout),
    state: async () => {
      const s = await redis.hget(keys.rollout, "state");
      return s ? (JSON.parse(s) as RolloutState) : null;
    },
    stop: async () => {
      await Promise.all([...nodes, ...leaders].map((s) => s.stop()));
      act.close();
      redis.disconnect();
    },
  };
}

/** The `rollout` events, as field maps. */
export async function rolloutEvents(f: RolloutFleet): Promise<Record<string, string>[]> {
  return (await f.redis.xrange(f.keys.events, "-", "+"))
    .map(([, x]) => Object.fromEntries(x.flatMap((_, i) => (i % 2 ? [] : [[x[i], x[i + 1]]]))) as Record<string, string>)
    .filter((e) => e.type === "rollout");
}
