// Cloud changes the controller did not make are reported: a zonal shift without
// llm-ha's comment, a standby group resized with no llm-ha wake. The AWS actuator over the
// in-memory ARC and Auto Scaling fakes, behind the fencing gate, with a real leader lease and
// the events stream on a real redis-server.
import { Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AwsActuator } from "../../agent/src/fleet/actuators/aws";
import { ForeignWatch } from "../../agent/src/fleet/actuators/foreign";
import { FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";
import { arcClient, arcMock, asgMock, autoScalingClient, AZ_IDS, FakeArc, FakeAutoScaling, NLB_A, NLB_C, REGION } from "./fakes";

const log = testLogger();
const ASG = "eks-gpu-us-east-1c-a100-0123";
const SETTINGS = { ttlMs: 60_000, renewMs: 30_000, contendMs: 50, marginMs: 1_000, replicaWaitMs: 0 };
// The standby's schedule: every hour back to 0/4/0 (its last say is always that).
const SCHEDULE = [{ ScheduledActionName: "night", Recurrence: "0 * * * *", MinSize: 0, MaxSize: 4, DesiredCapacity: 0, TimeZone: "UTC" }];

let server: RedisServerHandle;
let client: RedisClient;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "foreign-test", log });
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

async function value(registry: Registry, name: string, kind: string): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => v.labels.kind === kind)?.value;
}

async function foreignEvents(keys: RedisKeys): Promise<Record<string, string>[]> {
  const entries = await client.redis.xrange(keys.events, "-", "+");
  return entries.map(([, f]) => Object.fromEntries(f.flatMap((_, i) => (i % 2 ? [] : [[f[i], f[i + 1]]]))) as Record<string, string>).filter((e) => e.type === "foreign-action");
}

async function setup() {
  const keys = new RedisKeys(freshCluster("foreign"));
  const lease = new LeaderLease({ redis: client.redis, keys, holderId: "ctl-a/1", settings: SETTINGS, log });
  lease.start();
  await waitFor("leader", () => lease.token, { timeoutMs: 5000 });
  const registry = new Registry();
  const inner = new AwsActuator({
    region: REGION,
    standbyGroups: [{ name: ASG, wakeSize: 2 }],
    standbyAz: "us-east-1c",
    shiftResources: [NLB_A, NLB_C],
    azIds: { ...AZ_IDS },
    log,
    autoScaling: autoScalingClient(),
    arc: arcClient(),
    retry: { attempts: 2, baseMs: 1, maxMs: 1 },
    registry,
  });
  const actuator = new FencedActuator(inner, { redis: client.redis, keys, lease: { currentToken: () => lease.token }, log, holder: lease.holderId });
  const watch = new ForeignWatch({ audit: () => actuator.audit(), redis: client.redis, keys, currentToken: () => lease.token, log, registry, holder: lease.holderId, everyMs: 0 });
  const audit = async () => {
    watch.onPeriod(lease.token!);
    await watch.idle();
  };
  return { keys, lease, registry, actuator, watch, audit };
}

describe("foreign cloud actions", () => {
  it("reports a zonal shift without llm-ha's comment once (metric, event), not the controller's own, and clears when it ends", async () => {
    const arc = new FakeArc({ [NLB_A]: ["use1-az1", "use1-az2"], [NLB_C]: ["use1-az4"] }, Date.now);
    new FakeAutoScaling().add(ASG, { min: 0, max: 4, desired: 0, schedule: SCHEDULE });
    const { keys, lease, registry, actuator, audit } = await setup();
    try {
      // The controller's own shift: not foreign.
      expect((await actuator.startZonalShift("us-east-1a", { token: lease.token!, reason: "zone down", expiresInMs: 1_800_000 })).outcome).toBe("applied");
      // Someone else's: root on a node with the old role, or an operator.
      const theirs = arc.add({ resourceIdentifier: NLB_C, awayFrom: "use1-az4", comment: "maintenance", expiresInMs: 72 * 3_600_000 });
      await audit(); // first sighting: confirmed on the next audit
      expect(await value(registry, "llmha_foreign_actions_total", "shift")).toBe(0);
      await audit();
      await audit();
      expect(await value(registry, "llmha_foreign_actions_total", "shift")).toBe(1);
      expect(await value(registry, "llmha_foreign_actions_active", "shift")).toBe(1);
      expect(await value(registry, "llmha_foreign_actions_total", "standby")).toBe(0);
      const events = await foreignEvents(keys);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ kind: "shift", az: "us-east-1c", id: theirs.zonalShiftId, token: String(lease.token), leader: "ctl-a/1" });
      expect(events[0].detail).toContain('"maintenance"');

      theirs.status = "CANCELED";
      await audit();
      expect(await value(registry, "llmha_foreign_actions_active", "shift")).toBe(0);
      expect(await value(registry, "llmha_foreign_actions_total", "shift")).toBe(1);
    } finally {
      await lease.release();
    }
  });

  it("reports a standby group raised with no llm-ha wake, and not the controller's own wake", async () => {
    new FakeArc({ [NLB_A]: ["use1-az1"], [NLB_C]: ["use1-az4"] }, Date.now);
    const asg = new FakeAutoScaling().add(ASG, { min: 0, max: 4, desired: 0, schedule: SCHEDULE });
    const { keys, lease, registry, actuator, audit } = await setup();
    try {
      await audit();
      await audit();
      expect(await value(registry, "llmha_foreign_actions_active", "standby")).toBe(0);
      // The controller's wake (pre-wake tag, schedule held): explained.
      expect((await actuator.wakeStandby("us-east-1c", { token: lease.token!, reason: "capacity lost" })).outcome).toBe("applied");
      await audit();
      await audit();
      expect(await value(registry, "llmha_foreign_actions_total", "standby")).toBe(0);
      expect((await actuator.releaseStandby("us-east-1c", { token: lease.token!, reason: "over" })).outcome).toBe("applied");
      // Someone raises the sleeping standby: paid GPUs no llm-ha decision asked for.
      Object.assign(asg.group(ASG), { min: 3, desired: 3 });
      await audit();
      await audit();
      expect(await value(registry, "llmha_foreign_actions_total", "standby")).toBe(1);
      expect(await value(registry, "llmha_foreign_actions_active", "standby")).toBe(1);
      const [e] = await foreignEvents(keys);
      expect(e).toMatchObject({ kind: "standby", az: "us-east-1c" });
      expect(e.detail).toContain(`${ASG} 3/4/3`);
      expect(e.detail).toContain("differs from its schedule");
    } finally {
      await lease.release();
    }
  });
});
