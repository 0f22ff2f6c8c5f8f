/**
 * The standby's schedule the leader runs for Karpenter (`LLMHA_STANDBY_SCHEDULE`) on a fake
 * clock: awake after scaleUp, parked after scaleDown or weekendDown, never parked while the
 * standby is wanted, the park deferred while the tier is above L0; the controller publishing it
 * (real redis-server and lease). And the practice wake on the Karpenter engine: the reconciler's
 * wake and release reach the NodePools through the fencing gate (fake Kubernetes API).
 */
import type { Redis } from "ioredis";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StandbyParkSchedule } from "../../agent/src/fleet/actuators/karpenter/schedule";
import { KarpenterEngine } from "../../agent/src/fleet/actuators/karpenter/standby";
import { withCapacityEngine } from "../../agent/src/fleet/actuators/capacity";
import { ActuatorMetrics, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { Reconciler } from "../../agent/src/fleet/actuators/reconciler";
import { DryRunActuator } from "../../agent/src/fleet/actuators/dry-run";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { FleetMetrics } from "../../agent/src/fleet/controller/metrics";
import type { Evaluation } from "../../agent/src/fleet/controller/state";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";
import { FakeKarpenterApi, GPU } from "./fake-karpenter-api";

const log = testLogger();
// Monday 2026-11-30, UTC. Weekdays up at 07:00, down at 20:00; Friday 20:00 also the weekend park.
const MON = Date.parse("2026-11-30T00:00:00Z");
const H = 3_600_000;
const SPEC = { scaleDown: "0 20 * * 1-5", scaleUp: "0 7 * * 1-5", weekendDown: "0 20 * * 5" };
const QUIET = { wanted: false, tier: "L0" as const, awakeBySchedule: false };

describe("StandbyParkSchedule", () => {
  it("awake after scaleUp, parked after scaleDown and over the weekend", () => {
    const s = new StandbyParkSchedule(SPEC, "UTC");
    expect(s.step(MON + 6 * H, QUIET)).toMatchObject({ wake: false, awakeBySchedule: false });
    expect(s.say(MON + 6 * H)).toMatchObject({ up: false, action: "weekendDown", firedAt: MON - 2 * 24 * H - 4 * H });
    const up = s.step(MON + 7 * H + 30_000, QUIET);
    expect(up).toEqual({ wake: true, reason: "standby schedule: up since scaleUp 2026-11-30T07:00:00.000Z", awakeBySchedule: true });
    expect(s.step(MON + 19 * H, QUIET).wake).toBe(true);
    expect(s.step(MON + 20 * H + 30_000, { ...QUIET, awakeBySchedule: true })).toMatchObject({ wake: false, awakeBySchedule: false });
    // Saturday noon: Friday's park holds.
    expect(s.say(MON + 5 * 24 * H + 12 * H)).toMatchObject({ up: false });
  });

  it("looked at every period, it says what a fresh look says", () => {
    const stepped = new StandbyParkSchedule(SPEC, "Europe/Berlin");
    for (let t = MON; t < MON + 3 * 24 * H; t += 7 * 60_000) {
      expect(stepped.say(t).up, new Date(t).toISOString()).toBe(new StandbyParkSchedule(SPEC, "Europe/Berlin").say(t).up);
    }
  });

  it("never parks a wanted standby; defers the park while the tier is above L0", () => {
    const s = new StandbyParkSchedule(SPEC, "UTC");
    // An incident wants it at the park: the decision keeps it awake (the schedule adds nothing).
    expect(s.step(MON + 20 * H + 30_000, { wanted: true, tier: "L2", awakeBySchedule: true })).toMatchObject({ wake: false, awakeBySchedule: false });
    // Up by the schedule, tier L2 at the park, no wake wanted: held until L0.
    const held = s.step(MON + 20 * H + 60_000, { wanted: false, tier: "L2", awakeBySchedule: true });
    expect(held).toMatchObject({ wake: true, awakeBySchedule: true });
    expect(held.reason).toMatch(/^standby schedule: scaleDown 2026-11-30T20:00:00.000Z deferred while the tier is L2/);
    expect(s.step(MON + 20 * H + 90_000, { wanted: false, tier: "L0", awakeBySchedule: true })).toMatchObject({ wake: false, awakeBySchedule: false });
    // Not up by the schedule (asleep already): a high tier alone wakes nothing.
    expect(s.step(MON + 21 * H, { wanted: false, tier: "L3", awakeBySchedule: false }).wake).toBe(false);
  });
});

let server: RedisServerHandle;
let client: RedisClient;
let redis: Redis;
const api = new FakeKarpenterApi();
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "standby-schedule-test", log });
  redis = client.redis;
  await api.start();
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
  await api.stop();
});

async function leader(keys: RedisKeys, holder: string): Promise<LeaderLease> {
  const lease = new LeaderLease({ redis, keys, holderId: holder, settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
  lease.start();
  await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
  return lease;
}

describe("Controller with the standby schedule", () => {
  it("publishes the scheduled wake at scaleUp and the park at scaleDown; the tier does not move", async () => {
    const keys = new RedisKeys(freshCluster());
    const lease = await leader(keys, "leader-s");
    try {
      const ctl = new Controller({
        redis, keys, lease, writer: new FencedWriter(redis, keys, lease), log,
        settings: { standbyAz: "az-c", intervalMs: 1000 },
        standbySchedule: new StandbyParkSchedule(SPEC, "UTC"),
      });
      expect((await ctl.tick(MON + 6 * H))?.standby.wake).toBe(false);
      const up = await ctl.tick(MON + 7 * H + 1000);
      expect(up?.standby).toMatchObject({ az: "az-c", wake: true, reason: "standby schedule: up since scaleUp 2026-11-30T07:00:00.000Z" });
      expect(up?.tier.level).toBe("L0");
      expect(await redis.hgetall(keys.standbyWake)).toMatchObject({ wake: "1" });
      const down = await ctl.tick(MON + 20 * H + 1000);
      expect(down?.standby.wake).toBe(false);
      expect(await redis.hgetall(keys.standbyWake)).toMatchObject({ wake: "0" });
    } finally {
      await lease.release();
    }
  });
});

function evaluation(wake: boolean, reason: string): Evaluation {
  return {
    azs: [], tier: { level: "L0", reason: "test" }, suspect: [], suspectCounts: {},
    standby: { az: "us-east-1c", wake, reason }, shift: { az: null, reason: "no active AZ down" },
    silenceExplained: null, nodesOut: [], standbyHealthy: 0,
  };
}

describe("Practice wake on the Karpenter engine", () => {
  it("the reconciler's practice wake raises the NodePool and scales the placeholder; its release parks them", async () => {
    api.reset(["llm-ha-us-east-1c-h100"]);
    const keys = new RedisKeys(freshCluster());
    const lease = await leader(keys, "leader-k");
    try {
      const engine = new KarpenterEngine({
        api: { url: api.url, tokenFile: null, caFile: null },
        pools: [{ name: "llm-ha-us-east-1c-h100", gpus: 16 }],
        placeholder: { namespace: "llm-ha", deployment: "llm-ha-standby-placeholder", replicas: 2 },
        standbyAz: "us-east-1c",
      });
      const inner = withCapacityEngine(new DryRunActuator({ log: pino({ level: "silent" }), standbyGroups: [], shiftResources: [], azIds: {} }), engine);
      const prom = new Registry();
      const currentToken = (): number | null => lease.current?.token ?? null;
      const gate = new FencedActuator(inner, { redis, keys, lease: { currentToken }, log, metrics: new ActuatorMetrics(prom, inner.kind), holder: "leader-k" });
      const rec = new Reconciler({
        actuator: gate, redis, keys, writer: new FencedWriter(redis, keys, lease), currentToken, log, metrics: new FleetMetrics(prom),
        settings: { reassertMs: 10_000, shiftExpiryMs: 60_000, retryBaseMs: 1000, retryMaxMs: 4000 },
      });
      const token = lease.current!.token;
      rec.onEvaluation(evaluation(true, "practice wake (due 2026-12-01T03:00:00.000Z)"), token);
      await rec.idle();
      expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("16");
      expect(api.scale.replicas).toBe(2);
      expect(rec.state().slots.standby.last).toMatchObject({ action: "standby.wake", outcome: "applied", token });
      api.claim("h100-a", "llm-ha-us-east-1c-h100", [["Launched", "True"], ["Initialized", "True"]]);
      rec.onEvaluation(evaluation(false, "practice ended"), token);
      await rec.idle();
      expect(rec.state().slots.standby.last).toMatchObject({ action: "standby.release", outcome: "applied", token });
      expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("0");
      expect(api.scale.replicas).toBe(0);
      expect(api.claims.size).toBe(0);
    } finally {
      await lease.release();
    }
  });
});
