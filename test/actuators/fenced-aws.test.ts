// The AWS actuator behind the fencing gate, against a real Redis and a real leader lease:
// a leader whose term was taken over must not reach AWS at all, and every call that does
// happen lands in the events stream and in the metrics.
import { Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AwsActuator } from "../../agent/src/fleet/actuators/aws";
import { ActuatorMetrics, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";
import { arcClient, arcMock, asgMock, autoScalingClient, AZ_IDS, FakeAutoScaling, NLB_A, REGION } from "./fakes";

const log = testLogger();
const ASG = "eks-gpu-us-east-1c-a100-0123";
// Long TTL and renew period: the old holder keeps believing in its term for the whole test.
const SETTINGS = { ttlMs: 60_000, renewMs: 30_000, contendMs: 50, marginMs: 1_000, replicaWaitMs: 0 };

let server: RedisServerHandle;
let client: RedisClient;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "actuator-test", log });
  await client.whenReady(5000);
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});
beforeEach(() => {
  asgMock.reset();
  arcMock.reset();
});

function fenced(keys: RedisKeys, lease: LeaderLease, registry: Registry): FencedActuator {
  const inner = new AwsActuator({
    region: REGION,
    standbyGroups: [{ name: ASG, wakeSize: 2 }],
    shiftResources: [NLB_A],
    azIds: { ...AZ_IDS },
    log,
    autoScaling: autoScalingClient(),
    arc: arcClient(),
    retry: { attempts: 2, baseMs: 1, maxMs: 1 },
    registry,
  });
  return new FencedActuator(inner, {
    redis: client.redis,
    keys,
    lease: { currentToken: () => lease.token },
    log,
    metrics: new ActuatorMetrics(registry, inner.kind),
    holder: lease.holderId,
  });
}

async function metric(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

/** The `events` stream's action entries as field maps. */
async function actionEvents(keys: RedisKeys): Promise<Record<string, string>[]> {
  const entries = await client.redis.xrange(keys.events, "-", "+");
  return entries
    .map(([, fields]) => Object.fromEntries(fields.flatMap((_, i) => (i % 2 ? [] : [[fields[i], fields[i + 1]]]))) as Record<string, string>)
    .filter((e) => e.type === "action");
}

describe("AWS actuator behind the fencing gate", () => {
  it("refuses an old leader's wake once a new term exists, before any AWS call", async () => {
    const keys = new RedisKeys(freshCluster("act"));
    const old = new LeaderLease({ redis: client.redis, keys, holderId: "node-a/1", settings: SETTINGS, log });
    old.start();
    await waitFor("old leader", () => old.token, { timeoutMs: 5000 });
    const oldToken = old.token!;

    // The old leader is paused past its TTL: Redis drops its key and a new leader takes over.
    await client.redis.del(keys.leader);
    const next = new LeaderLease({ redis: client.redis, keys, holderId: "node-b/1", settings: SETTINGS, log });
    next.start();
    await waitFor("new leader", () => next.token, { timeoutMs: 5000 });
    expect(next.token).toBeGreaterThan(oldToken);
    expect(old.token).toBe(oldToken); // it still believes it leads

    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    const registry = new Registry();
    try {
      const stale = await fenced(keys, old, registry).wakeStandby("us-east-1c", { token: oldToken, reason: "capacity lost" });
      expect(stale).toMatchObject({ outcome: "refused-stale", calls: 0, detail: `token ${oldToken} is below the highest accepted token ${next.token}` });
      expect(asgMock.calls().length).toBe(0);
      expect(arcMock.calls().length).toBe(0);
      const shift = await fenced(keys, old, new Registry()).startZonalShift("us-east-1a", { token: oldToken, reason: "zone down", expiresInMs: 1_800_000 });
      expect(shift.outcome).toBe("refused-stale");
      expect(arcMock.calls().length).toBe(0);

      const fresh = await fenced(keys, next, new Registry()).wakeStandby("us-east-1c", { token: next.token!, reason: "capacity lost" });
      expect(fresh).toMatchObject({ outcome: "applied", calls: 4 });
      expect(asgMock.calls().length).toBe(4);

      const events = await actionEvents(keys);
      expect(events.map((e) => [e.action, e.outcome, e.token, e.leader, e.calls])).toEqual([
        ["standby.wake", "refused-stale", String(oldToken), "node-a/1", "0"],
        ["shift.start", "refused-stale", String(oldToken), "node-a/1", "0"],
        ["standby.wake", "applied", String(next.token), "node-b/1", "4"],
      ]);
      expect(events[2]).toMatchObject({ actuator: "aws", az: "us-east-1c", reason: "capacity lost" });
      expect(events[2].detail).toContain("calls: DescribeAutoScalingGroups ok, CreateOrUpdateTags ok, SuspendProcesses ok, UpdateAutoScalingGroup ok");
      expect(await metric(registry, "llmha_actuator_actions_total", { action: "standby.wake", outcome: "refused-stale", kind: "aws" })).toBe(1);
      expect(await metric(registry, "llmha_actuator_actions_total", { action: "standby.wake", outcome: "applied", kind: "aws" })).toBe(0);
      expect(await metric(registry, "llmha_actuator_aws_calls_total", { operation: "UpdateAutoScalingGroup", result: "ok" })).toBe(0);
    } finally {
      old.abandon();
      await next.release();
    }
  });

  it("counts the applied wake and its API calls in the metrics, and keeps `already` out of the stream", async () => {
    const keys = new RedisKeys(freshCluster("act"));
    const lease = new LeaderLease({ redis: client.redis, keys, holderId: "node-c/1", settings: SETTINGS, log });
    lease.start();
    await waitFor("leader", () => lease.token, { timeoutMs: 5000 });
    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    const registry = new Registry();
    const a = fenced(keys, lease, registry);
    try {
      const ctx = { token: lease.token!, reason: "capacity lost" };
      expect((await a.wakeStandby("us-east-1c", ctx)).outcome).toBe("applied");
      expect((await a.wakeStandby("us-east-1c", ctx)).outcome).toBe("already");
      expect(await metric(registry, "llmha_actuator_actions_total", { action: "standby.wake", outcome: "applied", kind: "aws" })).toBe(1);
      expect(await metric(registry, "llmha_actuator_actions_total", { action: "standby.wake", outcome: "already", kind: "aws" })).toBe(1);
      expect(await metric(registry, "llmha_actuator_aws_calls_total", { operation: "DescribeAutoScalingGroups", result: "ok" })).toBe(2);
      expect(await metric(registry, "llmha_actuator_aws_calls_total", { operation: "UpdateAutoScalingGroup", result: "ok" })).toBe(1);
      expect((await actionEvents(keys)).map((e) => e.outcome)).toEqual(["applied"]);
      expect(await registry.metrics()).toMatch(/llmha_actuator_action_seconds_count\{action="standby.wake",kind="aws"\} 2/);
    } finally {
      await lease.release();
    }
  });
});
