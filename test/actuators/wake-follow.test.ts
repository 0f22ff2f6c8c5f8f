/**
 * The standby wake followed through Auto Scaling's scaling activities and instance
 * states, its failures classified from AWS's own status messages (recorded shapes, below),
 * the fallback order walked one fenced step at a time, "capacity unavailable" in the tier,
 * and the time from the first failed launch to the fallback measured through the reconciler
 * and the fencing gate (real redis-server and lease; the cloud is aws-sdk-client-mock).
 */
import { AutoScalingServiceException, DescribeScalingActivitiesCommand } from "@aws-sdk/client-auto-scaling";
import type { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AwsActuator, classifyLaunchFailure, type AwsActuatorOptions } from "../../agent/src/fleet/actuators/aws";
import { ActuatorMetrics, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { Reconciler, WAKE_SECONDS_METRIC } from "../../agent/src/fleet/actuators/reconciler";
import { planWake, type WakeGroupView } from "../../agent/src/fleet/actuators/wake-follow";
import { FleetMetrics } from "../../agent/src/fleet/controller/metrics";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";
import { emptyControllerMemory, evaluate, resolveControllerSettings, type Evaluation } from "../../agent/src/fleet/controller/state";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import type { RegistrySnapshot } from "../../agent/src/fleet/redis/registry";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";
import { arcClient, arcMock, asgMock, autoScalingClient, AZ_IDS, FakeAutoScaling, REGION, sent } from "./fakes";

const log = testLogger();

/** Status messages as Auto Scaling records them in a failed launch activity (`StatusMessage`). */
export const RECORDED = {
  capacity:
    "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1c). Our system will be working on provisioning additional capacity. You can currently get p5.48xlarge capacity by not specifying an Availability Zone in your request or choosing us-east-1a, us-east-1b, us-east-1d. Launching EC2 instance failed.",
  capacityMixed:
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1c). Our system will be working on provisioning additional capacity. Launching EC2 instance failed.",
  vcpu: "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. Launching EC2 instance failed.",
  instanceLimit: "Your quota allows for 0 more running instance(s). You requested at least 1. Launching EC2 instance failed.",
  reservation: "Could not launch On-Demand Instances. ReservationCapacityExceeded - The requested reservation does not have sufficient compatible and available capacity for this request. Launching EC2 instance failed.",
  template: "The specified launch template, with template ID lt-0a1b2c3d4e5f67890, does not exist. Launching EC2 instance failed.",
  unsupported: "The requested configuration is currently not supported. Please check the documentation for supported configurations. Launching EC2 instance failed.",
  other: "Instance became unhealthy while waiting for instance to be in InService state. Termination Reason: Client.InternalError: Client error on launch",
};

const PRIMARY = "eks-gpu-us-east-1c-p5-0123";
const SECOND = "eks-gpu-us-east-1c-p4d-4567";
const SPARE = "eks-gpu-us-east-1b-spare-89ab";
const CTX = { token: 7, reason: "capacity lost: us-east-1a=DOWN" };
const T0 = Date.parse("2026-11-30T03:00:00Z");
let now = T0;

function actuator(o: Partial<AwsActuatorOptions> = {}): AwsActuator {
  return new AwsActuator({
    region: REGION,
    standbyGroups: [{ name: PRIMARY, wakeSize: 1 }],
    standbyFallback: [{ name: SECOND, wakeSize: 1 }, { name: SPARE, wakeSize: 1 }],
    standbyAz: "us-east-1c",
    shiftResources: [],
    azIds: { ...AZ_IDS },
    log,
    autoScaling: autoScalingClient(),
    arc: arcClient(),
    retry: { attempts: 2, baseMs: 1, maxMs: 2 },
    now: () => now,
    ...o,
  });
}

function fakeCloud(): FakeAutoScaling {
  const fake = new FakeAutoScaling();
  fake.now = () => now;
  return fake;
}

beforeEach(() => {
  asgMock.reset();
  arcMock.reset();
  now = T0;
});

describe("classifyLaunchFailure: AWS's recorded status messages", () => {
  it.each([
    ["capacity", "capacity"],
    ["capacityMixed", "capacity"],
    ["vcpu", "quota"],
    ["instanceLimit", "quota"],
    ["reservation", "launch-config"],
    ["template", "launch-config"],
    ["unsupported", "launch-config"],
    ["other", "unknown"],
  ] as const)("%s → %s", (k, cls) => {
    expect(classifyLaunchFailure(RECORDED[k])).toBe(cls);
  });
});

describe("planWake (pure)", () => {
  const g = (o: Partial<WakeGroupView> & { name: string }): WakeGroupView => ({ woken: false, wokenAt: null, inService: 0, pending: 0, failures: [], ...o });
  it("a pending instance is capacity found: no fallback even after a failed launch", () => {
    const p = planWake([[g({ name: "a", woken: true, wokenAt: 0, pending: 1, failures: [{ at: 5, message: RECORDED.capacity }] })], [g({ name: "b" })]], { boundMs: 60_000 }, 10_000);
    expect(p).toMatchObject({ wake: null, report: { phase: "waiting", step: 0 } });
  });
  it("nothing in service within the bound: the step failed (`timeout`), the next one is woken", () => {
    const p = planWake([[g({ name: "a", woken: true, wokenAt: 0 })], [g({ name: "b" })]], { boundMs: 60_000 }, 60_000);
    expect(p).toMatchObject({ wake: 1, report: { phase: "fallback", step: 1, failure: { class: "timeout", group: "a" } } });
  });
  it("any step in service is serving, whichever launched first", () => {
    const p = planWake([[g({ name: "a", woken: true, wokenAt: 0, inService: 1 })], [g({ name: "b", woken: true, wokenAt: 1 })]], { boundMs: 60_000 }, 2);
    expect(p.report).toMatchObject({ phase: "serving", step: 0 });
  });
  describe("`unhealthy`: in service, no healthy standby node within the bound (booted onto bad GPUs)", () => {
    const S = { boundMs: 60_000, healthyBoundMs: 30_000 };
    const steps = (): WakeGroupView[][] => [[g({ name: "a", woken: true, wokenAt: 0, inService: 2 })], [g({ name: "b" })]];
    it("within the bound, or with health unknown or some node healthy: serving", () => {
      expect(planWake(steps(), S, 29_999, { healthy: 0, failed: {} }).report).toMatchObject({ phase: "serving", step: 0 });
      expect(planWake(steps(), S, 90_000).report).toMatchObject({ phase: "serving", step: 0 }); // no word from the leader: no judgement
      expect(planWake(steps(), S, 90_000, { healthy: 8, failed: {} }).report).toMatchObject({ phase: "serving", step: 0 });
    });
    it("past the bound with no healthy node: the step failed (`unhealthy`, reported for the reconciler to keep), the next one is woken", () => {
      const p = planWake(steps(), S, 30_000, { healthy: 0, failed: {} });
      expect(p.wake).toBe(1);
      expect(p.report).toMatchObject({ phase: "fallback", step: 1, failure: { class: "unhealthy", group: "a", at: 30_000 } });
      expect(p.report.failure!.message).toBe("2 in service, no standby node HEALTHY 30 s after the wake (bound 30 s)");
      expect(p.report.unhealthy).toEqual([p.report.failure]);
      expect(p.detail).toMatch(/^fallback to step 2\/2 b after unhealthy on a: /);
    });
    it("a group recorded failed is not serving nor woken again; healthy nodes once the fallback is in service are the fallback's", () => {
      const failed = { a: { class: "unhealthy" as const, group: "a", message: "2 in service, no standby node HEALTHY", at: 30_000 } };
      const woken: WakeGroupView[][] = [[g({ name: "a", woken: true, wokenAt: 0, inService: 2 })], [g({ name: "b", woken: true, wokenAt: 30_000 })]];
      expect(planWake(woken, S, 31_000, { healthy: 0, failed })).toMatchObject({ wake: null, report: { phase: "waiting", step: 1 } });
      woken[1][0].inService = 1;
      const p = planWake(woken, S, 40_000, { healthy: 8, failed });
      expect(p).toMatchObject({ wake: null, report: { phase: "serving", step: 1, failure: { class: "unhealthy", group: "a" } } });
      expect(p.report.unhealthy).toBeUndefined(); // already recorded: not reported again
    });
    it("the last step unhealthy: capacity unavailable, with the reason; serving again once healthy (a slow boot, a repair)", () => {
      const one = [[g({ name: "a", woken: true, wokenAt: 0, inService: 1 })]];
      const p = planWake(one, S, 30_000, { healthy: 0, failed: {} });
      expect(p).toMatchObject({ wake: null, report: { phase: "unavailable", failure: { class: "unhealthy" } } });
      const failed = { a: p.report.failure! };
      expect(planWake(one, S, 40_000, { healthy: 0, failed }).report.phase).toBe("unavailable");
      expect(planWake(one, S, 40_000, { healthy: 8, failed })).toMatchObject({ wake: null, report: { phase: "serving", step: 0 } });
    });
  });
});

describe("AwsActuator: the wake followed and its fallback order", () => {
  it("ICE on the first type → the second group of the standby AZ is woken (its own call), then serves", async () => {
    const fake = fakeCloud()
      .add(PRIMARY, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.capacity } })
      .add(SECOND, { min: 0, max: 0, desired: 0 })
      .add(SPARE, { min: 0, max: 0, desired: 0 });
    const a = actuator();
    const first = await a.wakeStandby("us-east-1c", CTX);
    expect(first).toMatchObject({ outcome: "applied", wake: { phase: "waiting", step: 0, steps: 3, groups: [PRIMARY] } });
    expect(fake.group(PRIMARY).desired).toBe(1);
    expect(fake.group(SECOND).desired).toBe(0);
    // One follow later (5 s): the failed launch is read, and the fallback woken in that call.
    now += 5000;
    asgMock.resetHistory();
    const second = await a.wakeStandby("us-east-1c", CTX);
    expect(second).toMatchObject({
      outcome: "applied",
      wake: { phase: "fallback", step: 1, groups: [SECOND], failure: { class: "capacity", group: PRIMARY, message: RECORDED.capacity, at: T0 } },
    });
    expect(second.detail).toContain(`fallback to step 2/3 ${SECOND} after capacity on ${PRIMARY}: We currently do not have sufficient p5.48xlarge capacity`);
    expect(sent(asgMock).map(([n]) => n)).toEqual([
      "DescribeAutoScalingGroupsCommand",
      "DescribeScalingActivitiesCommand",
      "CreateOrUpdateTagsCommand",
      "SuspendProcessesCommand",
      "UpdateAutoScalingGroupCommand",
    ]);
    expect(asgMock.commandCalls(DescribeScalingActivitiesCommand).map((c) => c.args[0].input)).toEqual([{ AutoScalingGroupName: PRIMARY, MaxRecords: 20 }]);
    expect(fake.group(SECOND)).toMatchObject({ desired: 1, min: 1, suspended: ["ScheduledActions"] });
    expect(fake.group(SECOND).tags["llm-ha:pre-wake"]).toBe(`0/0/0@${now}`);
    expect(fake.group(SPARE).desired).toBe(0); // one step per call
    // The second type launched (instant in the fake): serving; the primary keeps trying.
    now += 5000;
    const third = await a.wakeStandby("us-east-1c", CTX);
    expect(third).toMatchObject({ outcome: "already", wake: { phase: "serving", step: 1 } });
    expect(fake.group(PRIMARY).desired).toBe(1);
    // Release hands every woken group back.
    const rel = await a.releaseStandby("us-east-1c", CTX);
    expect(rel.outcome).toBe("applied");
    expect([fake.group(PRIMARY).desired, fake.group(SECOND).desired, fake.group(SPARE).desired]).toEqual([0, 0, 0]);
    expect(fake.group(SECOND).tags["llm-ha:pre-wake"]).toBeUndefined();
  });

  it("quota on the second type, template on the spare → capacity unavailable (`failed`), reason named", async () => {
    fakeCloud()
      .add(PRIMARY, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.capacityMixed } })
      .add(SECOND, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.vcpu } })
      .add(SPARE, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.template } });
    const a = actuator();
    const phases: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await a.wakeStandby("us-east-1c", CTX);
      phases.push(`${r.outcome}:${r.wake?.phase}:${r.wake?.step}:${r.wake?.failure?.class ?? "-"}`);
      now += 5000;
    }
    expect(phases).toEqual(["applied:waiting:0:-", "applied:fallback:1:capacity", "applied:fallback:2:capacity", "failed:unavailable:2:capacity"]);
    const last = await a.wakeStandby("us-east-1c", CTX);
    expect(last.outcome).toBe("failed");
    expect(last.detail).toContain("capacity unavailable: every step failed; last launch-config on " + SPARE);
  });

  it("a pending launch is followed without fallback; a missing fallback group is skipped, not fatal", async () => {
    fakeCloud().add(PRIMARY, { min: 0, max: 0, desired: 0, launch: "pending" });
    const a = actuator();
    await a.wakeStandby("us-east-1c", CTX);
    asgMock.resetHistory();
    const r = await a.wakeStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "already", wake: { phase: "waiting", step: 0, steps: 1 } });
    expect(r.detail).toContain(`fallback groups ${SECOND}, ${SPARE} not found in us-east-1: skipped`);
    expect(sent(asgMock).map(([n]) => n)).toEqual(["DescribeAutoScalingGroupsCommand"]); // instances show the launch: no activity read
  });
});

describe("AwsActuator: scaling activities not readable", () => {
  it("an AccessDenied on DescribeScalingActivities leaves the wake standing (instance counts and the bound still followed)", async () => {
    fakeCloud().add(PRIMARY, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.capacity } });
    asgMock.on(DescribeScalingActivitiesCommand).rejects(new AutoScalingServiceException({ name: "AccessDenied", $fault: "client", $metadata: { httpStatusCode: 403 }, message: "User is not authorized to perform: autoscaling:DescribeScalingActivities" }));
    const a = actuator({ standbyFallback: [] });
    expect((await a.wakeStandby("us-east-1c", CTX)).outcome).toBe("applied");
    now += 5000;
    const r = await a.wakeStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "already", wake: { phase: "waiting", step: 0 } });
    expect(r.detail).toContain("scaling activities unreadable, following instance counts and the bound only: DescribeScalingActivities failed after 1 attempt: AccessDenied");
  });
});

describe("the tier shows capacity unavailable", () => {
  it("evaluate() appends the reason to the tier and the standby decision while the wake is wanted", () => {
    const s = resolveControllerSettings({ standbyAz: "c" });
    const node = (id: string, az: string, ok: boolean) => ({ nodeId: id, az, alive: true, takesTraffic: ok, gpus: ok ? 8 : 0, gpusExpected: 8, hard: ok ? [] : ["GPU_LOST"], soft: [], served: true });
    const snap = { nodes: [node("a1", "a", false), node("b1", "b", true)] } as unknown as RegistrySnapshot;
    const mem = emptyControllerMemory();
    for (const az of ["a", "b"]) mem.az.set(az, { state: "OK", better: 0, since: 0, firstSeen: 0, everOk: true });
    const { evaluation } = evaluate(snap, mem, s, 1000, { standbyUnavailable: "capacity unavailable after 3 steps (capacity on g: We currently do not have sufficient…)" });
    expect(evaluation.standby).toMatchObject({ wake: true, unavailable: expect.stringContaining("capacity unavailable after 3 steps") });
    expect(evaluation.tier.reason).toMatch(/^AZ down: a; standby c capacity unavailable after 3 steps \(capacity on g/);
  });
});

// --- through the reconciler and the fencing gate, on the production follow period ---

let server: RedisServerHandle;
let client: RedisClient;
let redis: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "wake-follow-test", log });
  redis = client.redis;
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

function wanted(standbyHealthy: number): Evaluation {
  return {
    azs: [],
    tier: { level: "L3", reason: "AZ down: us-east-1a" },
    suspect: [],
    suspectCounts: {},
    standby: { az: "us-east-1c", wake: true, reason: "capacity lost: us-east-1a=DOWN" },
    shift: { az: null, reason: "zonal shift off" },
    silenceExplained: null,
    nodesOut: [],
    standbyHealthy,
  };
}

describe("Reconciler + gate + AWS: fallback started ≤ 30 s after the first capacity failure", () => {
  it("for failures landing anywhere in the follow period (default settings: follow 5 s, controller period 1 s)", async () => {
    const keys = new RedisKeys(freshCluster());
    const lease = new LeaderLease({ redis, keys, holderId: "leader-1", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    lease.start();
    await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
    try {
      const prom = new Registry();
      const currentToken = (): number | null => lease.current?.token ?? null;
      const token = currentToken()!;
      const figures: number[] = [];
      // The failure shows in the activities 0.5 … 5.5 s after the wake call (Auto Scaling's own delay).
      for (const failAfterMs of [500, 1500, 2500, 3500, 4500, 5500]) {
        asgMock.reset();
        now = T0;
        const fake = fakeCloud()
          .add(PRIMARY, { min: 0, max: 0, desired: 0, launch: "pending" })
          .add(SECOND, { min: 0, max: 0, desired: 0, launch: "pending" });
        const aws = actuator({ standbyFallback: [{ name: SECOND, wakeSize: 1 }] });
        const gate = new FencedActuator(aws, { redis, keys, lease: { currentToken }, log, metrics: undefined, holder: "leader-1" });
        const rec = new Reconciler({ actuator: gate, redis, keys, writer: new FencedWriter(redis, keys, lease), currentToken, log, metrics: new FleetMetrics(new Registry()), registry: prom, now: () => now });
        let failureAt: number | null = null;
        let fallbackAt: number | null = null;
        for (let t = 0; t <= 40_000 && fallbackAt === null; t += 1000) {
          now = T0 + t;
          if (failureAt === null && t >= failAfterMs) {
            // Capacity gone: the launch in flight fails, as Auto Scaling records it.
            failureAt = T0 + failAfterMs;
            const g = fake.group(PRIMARY);
            g.instances = [];
            g.launch = { fail: RECORDED.capacity };
            const at = now;
            now = failureAt;
            fake.recordFailure(PRIMARY, RECORDED.capacity, 0, 1);
            now = at;
          }
          rec.onEvaluation(wanted(0), token);
          await rec.idle();
          if (fake.group(SECOND).desired > 0) fallbackAt = now;
        }
        expect(fallbackAt).not.toBeNull();
        figures.push(fallbackAt! - failureAt!);
        const act = await redis.hgetall(keys.actuation);
        expect(act).toMatchObject({ "standby.action": "standby.wake", "standby.outcome": "applied", "standby.phase": "fallback", "standby.step": "2/2", "standby.groups": SECOND });
        expect(act["standby.failure"]).toContain(`capacity on ${PRIMARY}: We currently do not have sufficient`);
        rec.endTerm();
      }
      // Each step went through the gate: its action event is in the stream.
      const evs = (await redis.xrange(keys.events, "-", "+")).map(([, kv]) => kv.join(" "));
      expect(evs.filter((e) => e.includes("fallback to step 2/2")).length).toBe(6);
      expect(Math.max(...figures)).toBeLessThanOrEqual(30_000);
      // Measured: the follow period bounds it (a failure just after a read waits for the next one).
      expect(Math.max(...figures)).toBeLessThanOrEqual(5_000 + 1000);
      console.log(`fallback started after the first capacity failure: ${figures.map((f) => `${(f / 1000).toFixed(1)} s`).join(", ")} (max ${(Math.max(...figures) / 1000).toFixed(1)} s; target 30 s)`);
    } finally {
      await lease.release();
    }
  });

  it("publishes the wake time from decision to first standby node serving, and `unavailable` for the controller", async () => {
    const keys = new RedisKeys(freshCluster());
    const lease = new LeaderLease({ redis, keys, holderId: "leader-2", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    lease.start();
    await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
    try {
      const prom = new Registry();
      const currentToken = (): number | null => lease.current?.token ?? null;
      const token = currentToken()!;
      fakeCloud()
        .add(PRIMARY, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.capacity } })
        .add(SECOND, { min: 0, max: 0, desired: 0, launch: { fail: RECORDED.instanceLimit } });
      const gate = new FencedActuator(actuator({ standbyFallback: [{ name: SECOND, wakeSize: 1 }] }), {
        redis, keys, lease: { currentToken }, log, metrics: new ActuatorMetrics(prom, "aws"), holder: "leader-2",
      });
      const rec = new Reconciler({ actuator: gate, redis, keys, writer: new FencedWriter(redis, keys, lease), currentToken, log, metrics: new FleetMetrics(new Registry()), registry: prom, now: () => now });
      for (let t = 0; t <= 20_000; t += 1000) {
        now = T0 + t;
        rec.onEvaluation(wanted(0), token);
        await rec.idle();
      }
      expect(rec.standbyUnavailable()).toMatch(/^capacity unavailable after 2 steps \(capacity on eks-gpu-us-east-1c-p5-0123: We currently do not have sufficient p5\.48xlarge/);
      expect((await prom.getSingleMetric("llmha_standby_capacity_unavailable")!.get()).values[0].value).toBe(1);
      // Capacity comes back (the primary's retries land): a node serves 90 s after the decision.
      now = T0 + 90_000;
      rec.onEvaluation(wanted(8), token);
      await rec.idle();
      expect(rec.lastWakeMs).toBe(90_000);
      const h = await prom.getSingleMetric(WAKE_SECONDS_METRIC)!.get();
      expect((h.values as { metricName?: string; value: number; labels: object }[]).find((v) => v.metricName === `${WAKE_SECONDS_METRIC}_count`)).toMatchObject({ value: 1, labels: { kind: "aws", path: "fallback", trigger: "incident" } });
      expect((await redis.hgetall(keys.actuation))["standby.servedMs"]).toBe("90000");
      // `llm-ha status` shows the followed wake.
      const view = await readFleetView(redis, keys);
      expect(view.actuation?.wake).toMatchObject({ phase: "unavailable", step: "2/2", groups: SECOND, servedMs: 90_000 });
      const line = renderFleetView(view, { width: 400 }).find((l) => l.startsWith("wake"));
      expect(line).toMatch(/^wake {5}unavailable {2}step 2\/2 eks-gpu-us-east-1c-p4d-4567 {2}first standby node serving 90\.0 s after the decision {2}capacity on eks-gpu-us-east-1c-p5-0123: We currently/);
    } finally {
      await lease.release();
    }
  });
});
