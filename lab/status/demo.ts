/**
 * A small fleet on a real Redis for the status tests and the README picture, built from
 * the real pieces: one `Fleet` per node (registry heartbeat, leader lease, controller), a
 * node that stops heartbeating without leaving (expires), and the leader's standby wake-up
 * through the fencing gate (`FencedActuator`) with a stand-in for the cloud call.
 *
 * Two active AZs and a standby one scaled to zero:
 *   us-east-1a: a1 healthy, a2 DEGRADED (slow probe), a3 UNHEALTHY (a GPU missing) → AZ DEGRADED, tier L2
 *   us-east-1b: b1, b2 healthy, b3 warming up, b4 expired (crashed)              → AZ OK
 *   us-east-1c: standby, no nodes; the leader wants it awake.
 */
import { Registry } from "prom-client";
import { FencedActuator } from "../../agent/src/fleet/actuators/gate";
import type { ActionResult, Actuator } from "../../agent/src/fleet/actuators/types";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { NodeRegistry, type NodeReport } from "../../agent/src/fleet/redis/registry";
import type { Decision, Reason } from "../../agent/src/types";
import type { Logger } from "../../agent/src/util/log";
import { sleep, waitFor } from "../../agent/src/util/net";

export type DemoMode = "up" | "warmup" | "slow" | "gpu-missing" | "down";

export const DEMO_AZS = { a: "us-east-1a", b: "us-east-1b", standby: "us-east-1c" } as const;

const SLOW: Reason = { source: "probe", code: "PROBE_SLOW", hard: false, effect: "degraded", detail: "p50 7.2 s over 5 s" };
const MISSING: Reason = { source: "gpu", code: "GPU_MISSING", hard: true, effect: "unhealthy", detail: "7 of 8 GPUs" };
const DOWN: Reason = { source: "model", code: "INFERENCE_DOWN", hard: true, effect: "unreachable" };

export function demoDecision(mode: DemoMode, loadScore: number, now = Date.now()): Decision {
  const base = { since: now, checkedAt: now, loadScore, pending: [] as Reason[], suppressed: [] as Reason[] };
  switch (mode) {
    case "up":
      return { ...base, status: "HEALTHY", phase: "serving", weight: 100, reasons: [] };
    case "warmup":
      return { ...base, status: "HEALTHY", phase: "warmup", weight: 50, reasons: [] };
    case "slow":
      return { ...base, status: "DEGRADED", phase: "serving", weight: 50, reasons: [SLOW] };
    case "gpu-missing":
      return { ...base, status: "UNHEALTHY", phase: "down", weight: 0, reasons: [MISSING] };
    case "down":
      return { ...base, status: "UNREACHABLE", phase: "down", weight: 0, reasons: [DOWN] };
  }
}

export interface DemoNode {
  id: string;
  az: string;
  mode: DemoMode;
  fleet: Fleet;
}

export interface DemoFleet {
  readonly cluster: string;
  readonly nodes: DemoNode[];
  /** The node that leads now. */
  leader(): DemoNode;
  /** Sets a node's mode; its next heartbeat publishes it. */
  set(id: string, mode: DemoMode): void;
  stop(): Promise<void>;
}

export interface DemoOptions {
  redisUrl: string;
  cluster: string;
  log: Logger;
  /** Heartbeat and controller period. Default 200 ms. */
  intervalMs?: number;
  /** Pause between the injected faults, so that the events have different ages (the picture). Default 0. */
  paceMs?: number;
}

export class DemoFleetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DemoFleetError";
  }
}

const LEASE = { ttlMs: 3000, renewMs: 800, contendMs: 300, marginMs: 500 };

/** A stand-in for the cloud call (the only stand-in: Redis, lease, gate and controller are real). */
const standInCloud: Actuator = {
  kind: "local",
  wakeStandby: async (az) => ({ action: "standby.wake", az, outcome: "applied", calls: 2, detail: "gpu-c min 0→2 desired 0→2", durationMs: 41 }),
  releaseStandby: async (az) => ({ action: "standby.release", az, outcome: "applied", calls: 1, detail: "back to schedule", durationMs: 12 }),
  startZonalShift: async (az): Promise<ActionResult> => ({ action: "shift.start", az, outcome: "applied", calls: 1, detail: "", durationMs: 20 }),
  cancelZonalShift: async (az): Promise<ActionResult> => ({ action: "shift.cancel", az, outcome: "applied", calls: 1, detail: "", durationMs: 20 }),
};

/**
 * Starts the fleet healthy, waits for a leader and its first publication, then injects the
 * faults so that the events stream holds real transitions (node, AZ, tier, standby, action).
 */
export async function startDemoFleet(o: DemoOptions): Promise<DemoFleet> {
  const intervalMs = o.intervalMs ?? 200;
  const keys = new RedisKeys(o.cluster);
  const spec: [string, string, number][] = [
    ["a1", DEMO_AZS.a, 0.31], ["a2", DEMO_AZS.a, 0.87], ["a3", DEMO_AZS.a, 0.2],
    ["b1", DEMO_AZS.b, 0.24], ["b2", DEMO_AZS.b, 0.42], ["b3", DEMO_AZS.b, 0.05],
  ];
  const nodes: DemoNode[] = spec.map(([id, az, load]) => {
    const fleet = new Fleet({
      redisUrl: o.redisUrl, cluster: o.cluster, nodeId: id, az, intervalMs, log: o.log, metrics: new Registry(),
      lease: LEASE, holderId: `${id}/${1000 + spec.findIndex((s) => s[0] === id)}`,
      controller: { standbyAz: DEMO_AZS.standby, recoverPeriods: 2 },
    });
    const n: DemoNode = { id, az, mode: "up", fleet };
    // the leader's wake-up goes through the real reconciler and fencing gate; only the cloud is a stand-in
    fleet.attachActuator(new FencedActuator(standInCloud, {
      redis: fleet.client.redis, keys, log: o.log, holder: fleet.lease.holderId,
      lease: { currentToken: () => fleet.lease.current?.token ?? null },
    }));
    fleet.start((): NodeReport => ({ nodeId: id, az, decision: demoDecision(n.mode, load), gpus: n.mode === "gpu-missing" ? 7 : 8, gpusExpected: 8, model: "llama-3.1-70b" }));
    return n;
  });
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.fleet.stop()));
  };
  try {
    // b4 heartbeats once, then "crashes": its hash expires, the leader's sweep marks it EXPIRED.
    const crashed = createRedisClient(o.redisUrl, { name: "llmha-demo-b4", log: o.log });
    try {
      await crashed.whenReady(5000);
      const reg = new NodeRegistry({ client: crashed, keys, settings: { intervalMs }, log: o.log });
      await reg.heartbeat({ nodeId: "b4", az: DEMO_AZS.b, decision: demoDecision("up", 0.5), gpus: 8, gpusExpected: 8, model: "llama-3.1-70b" });
    } finally {
      await crashed.close();
    }
    const leader = (): DemoNode => {
      const l = nodes.find((n) => n.fleet.isLeader);
      if (!l) throw new DemoFleetError("no node leads");
      return l;
    };
    await waitFor("a leader", () => nodes.some((n) => n.fleet.isLeader), { timeoutMs: 15_000 });
    await waitFor("AZ states published", async () => (await leader().fleet.azHealth()).body.stale !== true, { timeoutMs: 10_000 });
    const set = (id: string, mode: DemoMode): void => {
      const n = nodes.find((x) => x.id === id);
      if (n) n.mode = mode;
    };
    const redis = nodes[0].fleet.client.redis;
    await waitFor("b4 expired", async () => (await redis.zscore(keys.dead, "b4")) !== null, { timeoutMs: 10_000 });
    const pace = (): Promise<void> => sleep(o.paceMs ?? 0);
    await pace();
    set("a3", "gpu-missing");
    await pace();
    set("a2", "slow");
    set("b3", "warmup");
    await waitFor("tier L2 and the standby wanted awake", async () => {
      const h = await redis.hget(keys.standbyWake, "wake");
      return h === "1" && leader().fleet.status().controller?.tier === "L2";
    }, { timeoutMs: 10_000 });
    await waitFor("the leader's wake-up call recorded", async () => (await redis.hget(keys.actuation, "standby.outcome")) === "applied", { timeoutMs: 10_000 });
    return { cluster: o.cluster, nodes, leader, set, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
