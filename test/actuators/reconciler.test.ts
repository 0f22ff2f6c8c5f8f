/**
 * The reconciler against a real redis-server, a real LeaderLease and the real FencedActuator;
 * the only stand-in is the cloud: a recording actuator with desired-state semantics.
 */
import type { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ActuatorMetrics, fenceRefusal, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { Reconciler } from "../../agent/src/fleet/actuators/reconciler";
import type { ActionContext, ActionName, ActionResult, Actuator, ShiftContext } from "../../agent/src/fleet/actuators/types";
import { FleetMetrics } from "../../agent/src/fleet/controller/metrics";
import type { Evaluation } from "../../agent/src/fleet/controller/state";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";

const log = testLogger();
let server: RedisServerHandle;
let client: RedisClient;
let redis: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  // The project's client: it registers the Lua scripts the lease and the fenced writes use.
  client = createRedisClient(server.url, { name: "reconciler-test", log });
  redis = client.redis;
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

interface Call {
  action: ActionName;
  az: string;
  token: number;
  expiresInMs?: number;
}

/** A cloud with desired-state semantics that records every call reaching it. */
class RecordingActuator implements Actuator {
  readonly kind = "recording";
  readonly calls: Call[] = [];
  awake = false;
  shifted: string | null = null;
  /** Each call takes this long. */
  delayMs = 0;
  /** The next N calls throw. */
  failNext = 0;
  inFlight = 0;
  maxInFlight = 0;

  private async act(action: ActionName, az: string, ctx: ActionContext, change: () => boolean, extra: Partial<Call> = {}): Promise<ActionResult> {
    this.calls.push({ action, az, token: ctx.token, ...extra });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await new Promise((r) => setTimeout(r, this.delayMs));
      if (this.failNext > 0) {
        this.failNext--;
        throw new Error("throttled");
      }
      const changed = change();
      return { action, az, outcome: changed ? "applied" : "already", calls: 1, detail: changed ? "changed" : "as wanted", durationMs: this.delayMs };
    } finally {
      this.inFlight--;
    }
  }
  /** Sets `key` to `to`; whether that changed anything. */
  private set<K extends "awake" | "shifted">(key: K, to: this[K]): boolean {
    const changed = this[key] !== to;
    this[key] = to;
    return changed;
  }
  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.wake", az, ctx, () => this.set("awake", true));
  }
  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.release", az, ctx, () => this.set("awake", false));
  }
  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.act("shift.start", az, ctx, () => this.set("shifted", az), { expiresInMs: ctx.expiresInMs });
  }
  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.act("shift.cancel", az, ctx, () => this.shifted === az && this.set("shifted", null));
  }
}

function evaluation(o: { wake?: boolean; shift?: string | null } = {}): Evaluation {
  return {
    azs: [],
    tier: { level: "L3", reason: "test" },
    suspect: [],
    suspectCounts: {},
    standby: { az: "c", wake: o.wake ?? false, reason: o.wake ? "capacity lost: a=DOWN" : "active AZs OK" },
    shift: { az: o.shift ?? null, reason: o.shift ? `${o.shift}=DOWN` : "no active AZ down" },
    silenceExplained: null,
    nodesOut: [],
    standbyHealthy: 0,
  };
}

const LEASE = { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 };

async function setup(cluster = freshCluster(), holder = "leader-1") {
  const keys = new RedisKeys(cluster);
  const lease = new LeaderLease({ redis, keys, holderId: holder, settings: LEASE, log });
  lease.start();
  await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
  const cloud = new RecordingActuator();
  const prom = new Registry();
  const metrics = new FleetMetrics(prom);
  const currentToken = (): number | null => lease.current?.token ?? null;
  const gate = new FencedActuator(cloud, { redis, keys, lease: { currentToken }, log, metrics: new ActuatorMetrics(prom, cloud.kind), holder });
  const clock = { t: 1_000_000 };
  const rec = new Reconciler({
    actuator: gate,
    redis,
    keys,
    writer: new FencedWriter(redis, keys, lease),
    currentToken,
    log,
    metrics,
    settings: { reassertMs: 10_000, shiftExpiryMs: 60_000, retryBaseMs: 1000, retryMaxMs: 4000 },
    now: () => clock.t,
  });
  return { keys, lease, cloud, gate, rec, clock, prom, token: lease.current!.token };
}

async function events(keys: RedisKeys): Promise<Record<string, string>[]> {
  const rows = await redis.xrange(keys.events, "-", "+");
  return rows.map(([, kv]) => Object.fromEntries(kv.flatMap((_, i) => (i % 2 ? [] : [[kv[i], kv[i + 1]]]))) as Record<string, string>).filter((e) => e.type === "action");
}

describe("Reconciler: the leader drives the actuator toward the controller's desired state", () => {
  it("wakes on degrade with one call in flight, re-asserts as `already`, records the action for status", async () => {
    const { keys, lease, cloud, rec, clock, token } = await setup();
    try {
      cloud.delayMs = 1000;
      const t0 = performance.now();
      for (let i = 0; i < 5; i++) rec.onEvaluation(evaluation({ wake: true }), token);
      // Never blocks the controller's tick: five calls return well before the one cloud call (1 s) ends.
      expect(performance.now() - t0).toBeLessThan(500);
      cloud.delayMs = 150;
      await rec.idle();
      expect(cloud.calls).toEqual([{ action: "standby.wake", az: "c", token }]);
      expect(cloud.maxInFlight).toBe(1);
      // nothing new before the re-assert period
      rec.onEvaluation(evaluation({ wake: true }), token);
      await rec.idle();
      expect(cloud.calls).toHaveLength(1);
      clock.t += 10_000;
      rec.onEvaluation(evaluation({ wake: true }), token);
      await rec.idle();
      expect(cloud.calls).toHaveLength(2);
      expect(rec.state().slots.standby.last).toMatchObject({ action: "standby.wake", outcome: "already", token });
      const h = await redis.hgetall(keys.actuation);
      expect(h).toMatchObject({ actuator: "recording", "standby.action": "standby.wake", "standby.az": "c", "standby.outcome": "applied", "standby.token": String(token), token: String(token) });
      // only changes and failures are events: the `already` re-assertion is not
      expect((await events(keys)).map((e) => `${e.action}:${e.outcome}:${e.token}`)).toEqual([`standby.wake:applied:${token}`]);
    } finally {
      await lease.release();
    }
  });

  it("releases once the controller no longer wants it awake (after its hold), and only once", async () => {
    const { lease, cloud, rec, token } = await setup();
    try {
      rec.onEvaluation(evaluation({ wake: true }), token);
      await rec.idle();
      rec.onEvaluation(evaluation({ wake: false }), token);
      await rec.idle();
      rec.onEvaluation(evaluation({ wake: false }), token);
      await rec.idle();
      expect(cloud.calls.map((c) => c.action)).toEqual(["standby.wake", "standby.release"]);
      expect(cloud.awake).toBe(false);
    } finally {
      await lease.release();
    }
  });

  it("retries a failed call from the next period on, with backoff", async () => {
    const { lease, cloud, rec, clock, token } = await setup();
    try {
      cloud.failNext = 2;
      const tick = async (): Promise<void> => {
        rec.onEvaluation(evaluation({ wake: true }), token);
        await rec.idle();
      };
      await tick(); // fails: retry after 1 s
      clock.t += 500;
      await tick();
      expect(cloud.calls).toHaveLength(1);
      clock.t += 500;
      await tick(); // fails again: retry after 2 s
      expect(cloud.calls).toHaveLength(2);
      expect(rec.state().slots.standby).toMatchObject({ failures: 2, last: { outcome: "failed", detail: "throttled" } });
      clock.t += 1999;
      await tick();
      expect(cloud.calls).toHaveLength(2);
      clock.t += 1;
      await tick();
      expect(cloud.calls).toHaveLength(3);
      expect(cloud.awake).toBe(true);
      expect(rec.state().slots.standby.failures).toBe(0);
    } finally {
      await lease.release();
    }
  });

  it("starts, renews (before expiry) and cancels a zonal shift; the gauge follows", async () => {
    const { lease, cloud, rec, clock, prom, token, keys } = await setup();
    const gauge = async (): Promise<number | undefined> =>
      ((await prom.getSingleMetric("llmha_zonal_shift_active")!.get()).values.find((v) => v.labels.az === "a")?.value);
    try {
      rec.onEvaluation(evaluation({ shift: "a" }), token);
      await rec.idle();
      expect(await gauge()).toBe(1);
      clock.t += 10_000;
      rec.onEvaluation(evaluation({ shift: "a" }), token);
      await rec.idle();
      rec.onEvaluation(evaluation({ shift: null }), token);
      await rec.idle();
      expect(cloud.calls.map((c) => `${c.action}:${c.az}`)).toEqual(["shift.start:a", "shift.start:a", "shift.cancel:a"]);
      expect(cloud.calls[0].expiresInMs).toBe(60_000);
      expect(await gauge()).toBe(0);
      expect(await redis.hget(keys.actuation, "shift.outcome")).toBe("applied");
    } finally {
      await lease.release();
    }
  });

  it("a term that ends acts no more; the next term starts from what the last one recorded", async () => {
    const cluster = freshCluster();
    const a = await setup(cluster, "leader-a");
    a.rec.onEvaluation(evaluation({ wake: true }), a.token);
    await a.rec.idle();
    await a.lease.release();
    a.rec.endTerm();
    a.rec.onEvaluation(evaluation({ wake: false }), a.token);
    await a.rec.idle();
    expect(a.cloud.calls.map((c) => c.action)).toEqual(["standby.wake"]);
    // a new leader sees no trigger any more: it releases the group the old one woke
    const b = await setup(cluster, "leader-b");
    try {
      expect(b.token).toBeGreaterThan(a.token);
      b.rec.onEvaluation(evaluation({ wake: false }), b.token);
      await b.rec.idle();
      expect(b.cloud.calls).toEqual([{ action: "standby.release", az: "c", token: b.token }]);
    } finally {
      await b.lease.release();
    }
  });

  it("a stale token is refused by the gate before the cloud is reached: a newer leader exists", async () => {
    const cluster = freshCluster();
    const old = await setup(cluster, "old-leader");
    // The old leader's key vanishes (expired while it was paused); a newer leader takes the lease.
    await redis.del(old.keys.leader);
    const newer = new LeaderLease({ redis, keys: old.keys, holderId: "new-leader", settings: LEASE, log });
    newer.start();
    try {
      await waitFor("newer leader", () => newer.isLeader, { timeoutMs: 5000 });
      expect(old.lease.isLeader).toBe(true); // it has not noticed yet (next renew)
      old.rec.onEvaluation(evaluation({ wake: true }), old.token);
      await old.rec.idle();
      expect(old.cloud.calls).toEqual([]);
      expect(old.rec.state()).toMatchObject({ halted: true, slots: { standby: { last: { outcome: "refused-stale" } } } });
      const ev = await events(old.keys);
      expect(ev).toHaveLength(1);
      expect(ev[0]).toMatchObject({ action: "standby.wake", outcome: "refused-stale", token: String(old.token), calls: "0" });
      // halted: later periods of that term do nothing either
      old.clock.t += 60_000;
      old.rec.onEvaluation(evaluation({ wake: true }), old.token);
      await old.rec.idle();
      expect(old.cloud.calls).toEqual([]);
    } finally {
      await newer.release();
      await old.lease.release();
    }
  });

  it("an equal token recorded for another holder is refused by the gate too, as fence.inc.lua refuses it", async () => {
    const cluster = freshCluster();
    const a = await setup(cluster, "leader-eq");
    try {
      // After Redis lost data, another holder got the same token and recorded it first.
      await redis.hset(a.keys.fenceLast, "token", a.token, "holder", "someone-else");
      a.rec.onEvaluation(evaluation({ wake: true }), a.token);
      await a.rec.idle();
      expect(a.cloud.calls).toEqual([]);
      expect(a.rec.state()).toMatchObject({ slots: { standby: { last: { outcome: "refused-stale" } } } });
      expect((await events(a.keys))[0].detail).toBe(`token ${a.token} was recorded for another holder (someone-else)`);
    } finally {
      await a.lease.release();
    }
  });
});

describe("fenceRefusal (the gate's copy of fence.inc.lua's rule)", () => {
  it("refuses a lower token, and an equal one unless it was recorded for this holder", () => {
    expect(fenceRefusal(5, "a", 6, "a")).toBe("token 5 is below the highest accepted token 6");
    expect(fenceRefusal(6, "a", 6, "a")).toBeNull();
    expect(fenceRefusal(6, "a", 6, "b")).toBe("token 6 was recorded for another holder (b)");
    expect(fenceRefusal(6, "a", 6, null)).toBe("token 6 was recorded for another holder (none)");
    expect(fenceRefusal(7, "a", 6, "b")).toBeNull();
    expect(fenceRefusal(1, "a", 0, null)).toBeNull();
  });
});
