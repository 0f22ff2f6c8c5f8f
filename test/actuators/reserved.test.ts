// GPU groups created at zero on a capacity reservation or Capacity Block: the leader sizes each
// once its reservation is active, to what the reservation holds free, and marks it sized so a
// later scale-in stands; an ended reservation brings its group to zero. Against the in-memory
// Auto Scaling of fakes.ts and an EC2 stub that answers DescribeCapacityReservations; behind
// the fencing gate against a real Redis and lease.
import { DescribeCapacityReservationsCommand, EC2Client, EC2ServiceException, type CapacityReservation } from "@aws-sdk/client-ec2";
import { mockClient } from "aws-sdk-client-mock";
import { Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AwsActuator, parseReservedGroups, planReserved, RESERVED_SIZED_TAG, type ReservedGroup } from "../../agent/src/fleet/actuators/aws";
import { ActuatorMetrics, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { ReservedSizer } from "../../agent/src/fleet/actuators/reserved-sizer";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { parseConfig } from "../../agent/src/config/load";
import { checkAwsFormats } from "../../agent/src/config/aws";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";
import { arcClient, arcMock, asgMock, autoScalingClient, FAKE_CREDENTIALS, FakeAutoScaling, REGION } from "./fakes";

const log = testLogger();
const CR_A = "cr-0a1b2c3d4e5f60718";
const CR_B = "cr-0b1b2c3d4e5f60718";
const GROUP_A = "eks-gpu-us-east-1a-h100-0001";
const GROUP_B = "eks-gpu-us-east-1b-h100-0002";
const ec2Mock = mockClient(EC2Client);

/** EC2's reservations, by id; DescribeCapacityReservations answers from it as EC2 does (an unknown id fails the call). */
class FakeReservations {
  readonly byId = new Map<string, CapacityReservation>();
  constructor() {
    ec2Mock.on(DescribeCapacityReservationsCommand).callsFake((input: { CapacityReservationIds?: string[] }) => {
      const ids = input.CapacityReservationIds ?? [];
      const unknown = ids.filter((id) => !this.byId.has(id));
      if (unknown.length) {
        throw new EC2ServiceException({ name: "InvalidCapacityReservationId.NotFound", $fault: "client", $metadata: { httpStatusCode: 400 }, message: `The capacity reservation ID '${unknown[0]}' does not exist` });
      }
      return { CapacityReservations: ids.map((id) => this.byId.get(id)!), $metadata: {} };
    });
  }
  set(id: string, state: string, available: number, az = "us-east-1a"): void {
    this.byId.set(id, { CapacityReservationId: id, State: state as "active", AvailableInstanceCount: available, TotalInstanceCount: 2, AvailabilityZone: az, InstanceType: "p5.48xlarge", StartDate: new Date("2026-12-06T11:30:00Z") });
  }
}

function ec2Client(): EC2Client {
  return new EC2Client({ region: REGION, credentials: FAKE_CREDENTIALS, endpoint: "http://127.0.0.1:9", maxAttempts: 1 });
}

function actuator(groups: ReservedGroup[], registry = new Registry()): AwsActuator {
  return new AwsActuator({
    region: REGION, standbyGroups: [], shiftResources: [], azIds: {}, log, reservedGroups: groups,
    autoScaling: autoScalingClient(), arc: arcClient(), ec2: ec2Client(), retry: { attempts: 2, baseMs: 1, maxMs: 1 }, registry,
  });
}

const CTX = { token: 1, reason: "test" };

beforeEach(() => {
  asgMock.reset();
  arcMock.reset();
  ec2Mock.reset();
});

describe("LLMHA_RESERVED_GROUPS", () => {
  it("parses asg=cr-id:size and names the variable on bad input", () => {
    expect(parseReservedGroups(`${GROUP_A}=${CR_A}:2, ${GROUP_B}=${CR_B}:1`)).toEqual([
      { name: GROUP_A, reservationId: CR_A, size: 2 },
      { name: GROUP_B, reservationId: CR_B, size: 1 },
    ]);
    expect(() => parseReservedGroups(`${GROUP_A}=${CR_A}`)).toThrow(/LLMHA_RESERVED_GROUPS|must be cr-id:size/);
    expect(() => parseReservedGroups(`${GROUP_A}=cr-xyz:2`)).toThrow(/is not a capacity reservation id/);
    expect(() => parseReservedGroups(`${GROUP_A}=${CR_A}:0`)).toThrow(/from 1 to 10000/);
    expect(() => parseReservedGroups(`${GROUP_A}=${CR_A}:1,${GROUP_A}=${CR_B}:1`)).toThrow(/twice/);
  });

  it("is checked at start-up, and is on its own enough for LLMHA_ACTUATOR=aws", () => {
    const base = { LLMHA_ROLE: "controller", LLMHA_REDIS_URL: "redis://127.0.0.1:6379", LLMHA_ACTUATOR: "aws", LLMHA_AWS_REGION: "us-east-1", LLMHA_AZ: "controller", LLMHA_CLUSTER: "c1" };
    const cfg = parseConfig([], { ...base, LLMHA_RESERVED_GROUPS: `${GROUP_A}=${CR_A}:2` });
    expect(cfg.reservedGroups).toBe(`${GROUP_A}=${CR_A}:2`);
    expect(() => parseConfig([], base)).toThrow(/LLMHA_RESERVED_GROUPS|nothing to do/);
  });

  it("a malformed value stops start-up with the variable's name", async () => {
    const cfg = { ...parseConfig([], { LLMHA_ROLE: "controller", LLMHA_REDIS_URL: "redis://127.0.0.1:6379", LLMHA_ACTUATOR: "aws", LLMHA_AWS_REGION: "us-east-1", LLMHA_AZ: "controller", LLMHA_CLUSTER: "c1", LLMHA_RESERVED_GROUPS: `${GROUP_A}=2` }), az: "controller" };
    await expect(checkAwsFormats(cfg)).rejects.toThrow(/LLMHA_RESERVED_GROUPS.*must be cr-id:size/);
  });
});

describe("planReserved", () => {
  const g = { name: GROUP_A, reservationId: CR_A, size: 2 };
  const r = (State: string, AvailableInstanceCount: number): CapacityReservation => ({ CapacityReservationId: CR_A, State: State as "active", AvailableInstanceCount, StartDate: new Date("2026-12-06T11:30:00Z") });

  it("waits while the reservation is not active, and says until when", () => {
    const p = planReserved(g, { desired: 0, max: 4 }, r("scheduled", 0));
    expect(p).toMatchObject({ desired: null, markSized: false, outcome: "already" });
    expect(p.detail).toBe(`${CR_A} is scheduled (starts 2026-12-06 11:30 UTC): ${GROUP_A} waits at 0 of 2`);
  });

  it("sizes to what the reservation holds free, up to the stack's size, and marks it sized only when full", () => {
    expect(planReserved(g, { desired: 0, max: 4 }, r("active", 5))).toMatchObject({ desired: 2, markSized: true, outcome: "applied" });
    expect(planReserved(g, { desired: 0, max: 4 }, r("active", 1))).toMatchObject({ desired: 1, markSized: false, outcome: "applied" });
    expect(planReserved(g, { desired: 1, max: 4 }, r("active", 0))).toMatchObject({ desired: null, markSized: false, outcome: "already" });
    expect(planReserved(g, { desired: 1, max: 4 }, r("active", 1))).toMatchObject({ desired: 2, markSized: true });
    // Never above the group's own maximum.
    expect(planReserved(g, { desired: 0, max: 1 }, r("active", 5))).toMatchObject({ desired: 1, markSized: true });
  });

  it("leaves a group sized for this reservation alone, and sizes it anew for another", () => {
    expect(planReserved(g, { desired: 0, max: 4, sizedFor: CR_A }, r("active", 2))).toMatchObject({ desired: null, outcome: "already" });
    expect(planReserved(g, { desired: 0, max: 4, sizedFor: "cr-0000000000000000a" }, r("active", 2))).toMatchObject({ desired: 2 });
  });

  it("brings a group whose reservation ended to zero", () => {
    expect(planReserved(g, { desired: 2, max: 4, sizedFor: CR_A }, r("expired", 0))).toMatchObject({ desired: 0, outcome: "applied" });
    expect(planReserved(g, { desired: 0, max: 4 }, r("cancelled", 0))).toMatchObject({ desired: null, outcome: "already" });
    expect(planReserved(g, { desired: 0, max: 4 }, undefined).detail).toMatch(/not found in the region/);
  });
});

describe("AwsActuator.sizeReserved", () => {
  it("sizes each group once its reservation is active, marks it, and a repeat writes nothing", async () => {
    const asg = new FakeAutoScaling().add(GROUP_A, { min: 0, max: 4, desired: 0 }).add(GROUP_B, { min: 0, max: 4, desired: 0 });
    const crs = new FakeReservations();
    crs.set(CR_A, "active", 2);
    crs.set(CR_B, "scheduled", 0, "us-east-1b");
    const a = actuator(parseReservedGroups(`${GROUP_A}=${CR_A}:2,${GROUP_B}=${CR_B}:1`));

    const first = await a.sizeReserved!(CTX);
    expect(first.map((r) => [r.group, r.outcome, r.az])).toEqual([[GROUP_A, "applied", "us-east-1a"], [GROUP_B, "already", "us-east-1b"]]);
    expect(asg.group(GROUP_A)).toMatchObject({ min: 0, max: 4, desired: 2 });
    expect(asg.group(GROUP_A).tags[RESERVED_SIZED_TAG]).toBe(CR_A);
    expect(asg.group(GROUP_B).desired).toBe(0);

    // The block starts: B is sized; A, marked, is left as it is even after an operator scaled it in.
    crs.set(CR_B, "active", 1, "us-east-1b");
    asg.group(GROUP_A).desired = 1;
    const writes = () => asgMock.calls().filter((c) => !/Describe/.test(c.args[0].constructor.name)).length;
    const before = writes();
    const second = await a.sizeReserved!(CTX);
    expect(second.map((r) => [r.group, r.outcome])).toEqual([[GROUP_A, "already"], [GROUP_B, "applied"]]);
    expect(asg.group(GROUP_A).desired).toBe(1);
    expect(asg.group(GROUP_B).desired).toBe(1);
    expect(writes() - before).toBe(2); // B's resize and its tag

    const third = await a.sizeReserved!(CTX);
    expect(third.every((r) => r.outcome === "already")).toBe(true);
    expect(writes() - before).toBe(2);
  });

  it("an id EC2 does not know leaves that group waiting and still sizes the others", async () => {
    const asg = new FakeAutoScaling().add(GROUP_A, { min: 0, max: 4, desired: 0 }).add(GROUP_B, { min: 0, max: 4, desired: 0 });
    const crs = new FakeReservations();
    crs.set(CR_B, "active", 3, "us-east-1b");
    const out = await actuator(parseReservedGroups(`${GROUP_A}=${CR_A}:2,${GROUP_B}=${CR_B}:2`)).sizeReserved!(CTX);
    expect(out.map((r) => [r.group, r.outcome])).toEqual([[GROUP_A, "already"], [GROUP_B, "applied"]]);
    expect(out[0].detail).toMatch(/not found in the region/);
    expect(asg.group(GROUP_B).desired).toBe(2);
  });

  it("a group that does not exist fails with its name; the others still size", async () => {
    const asg = new FakeAutoScaling().add(GROUP_B, { min: 0, max: 4, desired: 0 });
    const crs = new FakeReservations();
    crs.set(CR_A, "active", 2);
    crs.set(CR_B, "active", 2, "us-east-1b");
    const out = await actuator(parseReservedGroups(`${GROUP_A}=${CR_A}:2,${GROUP_B}=${CR_B}:2`)).sizeReserved!(CTX);
    expect(out[0]).toMatchObject({ group: GROUP_A, outcome: "failed" });
    expect(out[0].detail).toContain(`no Auto Scaling group ${GROUP_A}`);
    expect(asg.group(GROUP_B).desired).toBe(2);
  });

  it("without reserved groups the actuator has no sizeReserved", () => {
    expect(actuator([]).sizeReserved).toBeUndefined();
  });
});

describe("behind the fencing gate, driven by the leader", () => {
  let server: RedisServerHandle;
  let client: RedisClient;
  beforeAll(async () => {
    server = await startRedisServer();
    client = createRedisClient(server.url, { name: "reserved-test", log });
    await client.whenReady(5000);
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
  });

  it("sizes while leading and records the change; a stale token reaches no AWS call", async () => {
    const asg = new FakeAutoScaling().add(GROUP_A, { min: 0, max: 4, desired: 0 });
    new FakeReservations().set(CR_A, "active", 2);
    const keys = new RedisKeys(freshCluster("reserved"));
    const lease = new LeaderLease({ redis: client.redis, keys, holderId: "ctl-a/1", settings: { ttlMs: 60_000, renewMs: 30_000, contendMs: 50, marginMs: 1000, replicaWaitMs: 0 }, log });
    lease.start();
    await waitFor("leader", () => lease.token, { timeoutMs: 5000 });
    const registry = new Registry();
    const inner = actuator(parseReservedGroups(`${GROUP_A}=${CR_A}:2`), registry);
    const gate = new FencedActuator(inner, { redis: client.redis, keys, lease: { currentToken: () => lease.token }, log, metrics: new ActuatorMetrics(registry, inner.kind), holder: lease.holderId });

    const stale = await gate.sizeReserved({ token: lease.token! + 1, reason: "test" });
    expect(stale.map((r) => r.outcome)).toEqual(["refused-stale"]);
    expect(asgMock.calls().length + ec2Mock.calls().length).toBe(0);

    const sizer = new ReservedSizer({ sizeReserved: (ctx) => gate.sizeReserved(ctx), currentToken: () => lease.token, log });
    sizer.onPeriod(lease.token!);
    await sizer.idle();
    expect(asg.group(GROUP_A).desired).toBe(2);
    const events = (await client.redis.xrange(keys.events, "-", "+")).map(([, f]) => Object.fromEntries(f.flatMap((_, i) => (i % 2 ? [] : [[f[i], f[i + 1]]]))) as Record<string, string>);
    const sized = events.filter((e) => e.type === "action" && e.action === "capacity.size");
    expect(sized.map((e) => e.outcome)).toEqual(["refused-stale", "applied"]);
    expect(sized[1].detail).toContain(`${GROUP_A} desired 0→2`);
    const m = await registry.getSingleMetric("llmha_actuator_actions_total")?.get();
    expect(m?.values.find((v) => v.labels.action === "capacity.size" && v.labels.outcome === "applied")?.value).toBe(1);
    // Not due again for a minute: a second period makes no call.
    const calls = asgMock.calls().length;
    sizer.onPeriod(lease.token!);
    await sizer.idle();
    expect(asgMock.calls().length).toBe(calls);
    await lease.release();
  });
});
