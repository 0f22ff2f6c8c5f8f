import { AutoScalingServiceException, DescribeAutoScalingGroupsCommand, UpdateAutoScalingGroupCommand } from "@aws-sdk/client-auto-scaling";
import { Registry } from "prom-client";
import { beforeEach, describe, expect, it } from "vitest";
import { ListZonalShiftsCommand } from "../../agent/src/fleet/actuators/arc-zonal-shift";
import {
  ActuatorSettingError,
  AwsActuator,
  checkShiftResources,
  expiresIn,
  parseAzIds,
  parseStandbyGroups,
  shiftComment,
  type AwsActuatorOptions,
} from "../../agent/src/fleet/actuators/aws";
import { DryRunActuator } from "../../agent/src/fleet/actuators/dry-run";
import { testLogger } from "../redis/helpers";
import { arcClient, arcMock, asgMock, autoScalingClient, AZ_IDS, FakeArc, FakeAutoScaling, NLB_A, NLB_C, REGION, sent, throttling } from "./fakes";

const log = testLogger();
const ASG = "eks-gpu-us-east-1c-a100-0123";
const CTX = { token: 7, reason: "capacity lost: us-east-1a=DOWN" };
const SHIFT = { ...CTX, expiresInMs: 30 * 60_000 };
const T0 = Date.parse("2026-11-30T03:00:00Z");

let now = T0;
let registry: Registry;

function actuator(o: Partial<AwsActuatorOptions> = {}): AwsActuator {
  return new AwsActuator({
    region: REGION,
    standbyGroups: [{ name: ASG, wakeSize: 2 }],
    shiftResources: [NLB_A, NLB_C],
    azIds: { ...AZ_IDS },
    log,
    autoScaling: autoScalingClient(),
    arc: arcClient(),
    retry: { attempts: 3, baseMs: 1, maxMs: 2 },
    registry,
    now: () => now,
    ...o,
  });
}

async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? Number.NaN;
}

beforeEach(() => {
  asgMock.reset();
  arcMock.reset();
  registry = new Registry();
  now = T0;
});

describe("wakeStandby", () => {
  it("records the pre-wake sizes, holds off the schedule, then raises min/desired to the wake size", async () => {
    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    const r = await actuator().wakeStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ action: "standby.wake", az: "us-east-1c", outcome: "applied", calls: 4 });
    expect(r.detail).toContain(`${ASG} min 0→2 max 0→2 desired 0→2, scheduled actions suspended`);
    expect(sent(asgMock)).toEqual([
      ["DescribeAutoScalingGroupsCommand", { AutoScalingGroupNames: [ASG] }],
      ["CreateOrUpdateTagsCommand", { Tags: [{ ResourceId: ASG, ResourceType: "auto-scaling-group", Key: "llm-ha:pre-wake", Value: `0/0/0@${T0}`, PropagateAtLaunch: false }] }],
      ["SuspendProcessesCommand", { AutoScalingGroupName: ASG, ScalingProcesses: ["ScheduledActions"] }],
      ["UpdateAutoScalingGroupCommand", { AutoScalingGroupName: ASG, MinSize: 2, MaxSize: 2, DesiredCapacity: 2 }],
    ]);
  });

  it("keeps a larger max and never lowers anything (night schedule left max 4; daytime desired 3)", async () => {
    const fake = new FakeAutoScaling().add(ASG, { min: 0, max: 4, desired: 0 }).add("day", { min: 1, max: 4, desired: 3 });
    const a = actuator({ standbyGroups: [{ name: ASG, wakeSize: 2 }, { name: "day", wakeSize: 2 }] });
    expect((await a.wakeStandby("us-east-1c", CTX)).outcome).toBe("applied");
    expect(asgMock.commandCalls(UpdateAutoScalingGroupCommand).map((c) => c.args[0].input)).toEqual([
      { AutoScalingGroupName: ASG, MinSize: 2, MaxSize: 4, DesiredCapacity: 2 },
      { AutoScalingGroupName: "day", MinSize: 2, MaxSize: 4, DesiredCapacity: 3 },
    ]);
    expect(fake.group("day").tags["llm-ha:pre-wake"]).toBe(`1/4/3@${T0}`);
  });

  it("is `already` on a repeat, with one read and no write", async () => {
    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    const a = actuator();
    await a.wakeStandby("us-east-1c", CTX);
    asgMock.resetHistory();
    const again = await a.wakeStandby("us-east-1c", CTX);
    expect(again).toMatchObject({ outcome: "already", calls: 1 });
    expect(sent(asgMock).map(([n]) => n)).toEqual(["DescribeAutoScalingGroupsCommand"]);
  });

  it("finishes a half-done wake without overwriting the recorded pre-wake sizes", async () => {
    // A leader died after tagging and suspending; the schedule's sizes are still 0.
    const fake = new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0, suspended: ["ScheduledActions"], tags: { "llm-ha:pre-wake": "0/3/0" } });
    const r = await actuator().wakeStandby("us-east-1c", CTX);
    expect(r.outcome).toBe("applied");
    // Woken with nothing launched: the follow reads its scaling activities (none failed).
    expect(sent(asgMock).map(([n]) => n)).toEqual(["DescribeAutoScalingGroupsCommand", "DescribeScalingActivitiesCommand", "UpdateAutoScalingGroupCommand"]);
    expect(fake.group(ASG).tags["llm-ha:pre-wake"]).toBe("0/3/0");
  });

  it("retries throttling with backoff and counts every attempt", async () => {
    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    asgMock.on(UpdateAutoScalingGroupCommand).rejectsOnce(throttling()).rejectsOnce(throttling()).resolves({ $metadata: {} });
    const r = await actuator().wakeStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "applied", calls: 6 });
    expect(r.detail).toContain("UpdateAutoScalingGroup Throttling→Throttling→ok");
    expect(await counter("llmha_actuator_aws_calls_total", { operation: "UpdateAutoScalingGroup", result: "throttled" })).toBe(2);
    expect(await counter("llmha_actuator_aws_calls_total", { operation: "UpdateAutoScalingGroup", result: "ok" })).toBe(1);
  });

  it("gives up after the configured attempts and reports `failed`", async () => {
    new FakeAutoScaling().add(ASG, { min: 0, max: 0, desired: 0 });
    asgMock.on(UpdateAutoScalingGroupCommand).rejects(throttling());
    const r = await actuator().wakeStandby("us-east-1c", CTX);
    expect(r.outcome).toBe("failed");
    expect(r.calls).toBe(3 + 3);
    expect(r.detail).toMatch(/^UpdateAutoScalingGroup failed after 3 attempts: Throttling: Rate exceeded/);
    expect(asgMock.commandCalls(UpdateAutoScalingGroupCommand)).toHaveLength(3);
  });

  it("fails fast on an error that asking again cannot fix", async () => {
    asgMock.on(DescribeAutoScalingGroupsCommand).rejects(
      new AutoScalingServiceException({ name: "AccessDenied", $fault: "client", $metadata: { httpStatusCode: 403 }, message: "not authorized" }),
    );
    const r = await actuator().wakeStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "failed", calls: 1 });
    expect(r.detail).toContain("AccessDenied");
  });

  it("fails with a clear detail and no call when it has nothing to act on", async () => {
    expect(await actuator({ standbyGroups: [] }).wakeStandby("us-east-1c", CTX)).toMatchObject({ outcome: "failed", calls: 0 });
    const other = await actuator({ standbyAz: "us-east-1c" }).wakeStandby("us-east-1b", CTX);
    expect(other).toMatchObject({ outcome: "failed", calls: 0, detail: expect.stringContaining("no standby groups in us-east-1b") });
    expect(asgMock.calls()).toHaveLength(0);
    new FakeAutoScaling();
    const missing = await actuator().wakeStandby("us-east-1c", CTX);
    expect(missing).toMatchObject({ outcome: "failed", calls: 1, detail: expect.stringContaining(`Auto Scaling group ${ASG} not found in us-east-1`) });
  });
});

describe("releaseStandby", () => {
  it("restores the tagged sizes, resumes the schedule and removes the tag; a repeat is `already`", async () => {
    const fake = new FakeAutoScaling().add(ASG, { min: 0, max: 4, desired: 0 });
    const a = actuator();
    await a.wakeStandby("us-east-1c", CTX);
    asgMock.resetHistory();
    const r = await a.releaseStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "applied", calls: 5 });
    expect(sent(asgMock)).toEqual([
      ["DescribeAutoScalingGroupsCommand", { AutoScalingGroupNames: [ASG] }],
      ["DescribeScheduledActionsCommand", { AutoScalingGroupName: ASG }],
      ["UpdateAutoScalingGroupCommand", { AutoScalingGroupName: ASG, MinSize: 0, MaxSize: 4, DesiredCapacity: 0 }],
      ["ResumeProcessesCommand", { AutoScalingGroupName: ASG, ScalingProcesses: ["ScheduledActions"] }],
      ["DeleteTagsCommand", { Tags: [{ ResourceId: ASG, ResourceType: "auto-scaling-group", Key: "llm-ha:pre-wake", Value: `0/4/0@${T0}` }] }],
    ]);
    expect(fake.group(ASG)).toMatchObject({ min: 0, max: 4, desired: 0, suspended: [], tags: {}, schedule: [] });
    asgMock.resetHistory();
    expect(await a.releaseStandby("us-east-1c", CTX)).toMatchObject({ outcome: "already", calls: 1 });
  });

  it("hands back to the schedule: an action that came due while woken sets the sizes, else the pre-wake ones", async () => {
    // the standby schedule in UTC: weekday evenings to zero, mornings back to 2 (T0 is Monday 03:00 UTC, at night)
    const schedule = [
      { ScheduledActionName: "llm-ha-standby-a100-down", Recurrence: "0 20 * * 1-5", TimeZone: "Etc/UTC", MinSize: 0, MaxSize: 4, DesiredCapacity: 0 },
      { ScheduledActionName: "llm-ha-standby-a100-up", Recurrence: "0 7 * * 1-5", TimeZone: "Etc/UTC", MinSize: 0, MaxSize: 4, DesiredCapacity: 2 },
      { ScheduledActionName: "a one-off", StartTime: new Date(T0 + 3_600_000), MinSize: 9, MaxSize: 9, DesiredCapacity: 9 },
    ];
    const night = new FakeAutoScaling().add(ASG, { min: 0, max: 4, desired: 0, schedule });
    const a = actuator({ standbyGroups: [{ name: ASG, wakeSize: 3 }] });
    await a.wakeStandby("us-east-1c", CTX);
    expect(night.group(ASG)).toMatchObject({ min: 3, max: 4, desired: 3 });

    now = T0 + 2 * 3_600_000; // 05:00: still night, nothing came due → the pre-wake sizes
    let r = await a.releaseStandby("us-east-1c", CTX);
    expect(r).toMatchObject({ outcome: "applied", detail: expect.stringContaining("min 3→0 desired 3→0, scheduled actions resumed") });
    expect(night.group(ASG)).toMatchObject({ min: 0, max: 4, desired: 0, suspended: [], tags: {} });

    now = T0;
    await a.wakeStandby("us-east-1c", CTX);
    now = T0 + 6 * 3_600_000; // 09:00: the morning scale-up came due while the group was held
    r = await a.releaseStandby("us-east-1c", CTX);
    expect(r.detail).toContain("min 3→0 desired 3→2 (as llm-ha-standby-a100-up, due 2026-11-30T07:00:00.000Z while woken, set them)");
    expect(night.group(ASG)).toMatchObject({ min: 0, max: 4, desired: 2, suspended: [], tags: {} });
  });

  it("reads a pre-wake tag written before the wake time was recorded", async () => {
    const fake = new FakeAutoScaling().add(ASG, { min: 2, max: 4, desired: 2, suspended: ["ScheduledActions"], tags: { "llm-ha:pre-wake": "0/0/0" } });
    expect(await actuator().releaseStandby("us-east-1c", CTX)).toMatchObject({ outcome: "applied", calls: 4 });
    expect(fake.group(ASG)).toMatchObject({ min: 0, max: 0, desired: 0, suspended: [], tags: {} });
  });

  it("leaves a group llm-ha did not wake alone, even with scheduled actions suspended by someone else", async () => {
    new FakeAutoScaling().add(ASG, { min: 2, max: 4, desired: 2, suspended: ["ScheduledActions"] });
    expect(await actuator().releaseStandby("us-east-1c", CTX)).toMatchObject({ outcome: "already", calls: 1 });
  });
});

describe("zonal shift", () => {
  const placement = { [NLB_A]: ["use1-az1"], [NLB_C]: ["use1-az4"] };

  it("starts a shift on the zone's own load balancers with expiry, token and reason", async () => {
    new FakeArc(placement, () => now);
    const r = await actuator().startZonalShift("us-east-1a", SHIFT);
    expect(r).toMatchObject({ action: "shift.start", outcome: "applied", calls: 4 });
    expect(sent(arcMock)).toEqual([
      ["GetManagedResourceCommand", { resourceIdentifier: NLB_A }],
      ["GetManagedResourceCommand", { resourceIdentifier: NLB_C }],
      ["ListZonalShiftsCommand", { resourceIdentifier: NLB_A, status: "ACTIVE" }],
      ["StartZonalShiftCommand", { resourceIdentifier: NLB_A, awayFrom: "use1-az1", expiresIn: "30m", comment: "llm-ha token=7 capacity lost: us-east-1a=DOWN" }],
    ]);
  });

  it("holds a fresh shift (`already`, no write) and extends it once half its time is used", async () => {
    const arc = new FakeArc(placement, () => now);
    const a = actuator();
    await a.startZonalShift("us-east-1a", SHIFT);
    arcMock.resetHistory();
    now += 10 * 60_000; // 20 of 30 minutes left
    expect(await a.startZonalShift("us-east-1a", SHIFT)).toMatchObject({ outcome: "already", calls: 1 });
    expect(sent(arcMock).map(([n]) => n)).toEqual(["ListZonalShiftsCommand"]);
    now += 10 * 60_000; // 10 left
    arcMock.resetHistory();
    const r = await a.startZonalShift("us-east-1a", { ...SHIFT, token: 8 });
    expect(r).toMatchObject({ outcome: "applied", calls: 2, detail: expect.stringContaining("zs-1 extended to 30m") });
    expect(sent(arcMock)[1]).toEqual(["UpdateZonalShiftCommand", { zonalShiftId: "zs-1", expiresIn: "30m", comment: "llm-ha token=8 capacity lost: us-east-1a=DOWN" }]);
    expect(arc.shifts[0].expiryTime.getTime()).toBe(now + 30 * 60_000);
  });

  it("leaves an operator's shift away from the same zone in place", async () => {
    const arc = new FakeArc(placement, () => now);
    arc.add({ resourceIdentifier: NLB_A, awayFrom: "use1-az1", comment: "ops: AZ impairment", expiresInMs: 3_600_000 });
    const r = await actuator().startZonalShift("us-east-1a", SHIFT);
    expect(r).toMatchObject({ outcome: "already", detail: expect.stringContaining("already shifted away from use1-az1 by zs-1") });
    expect(sent(arcMock).map(([n]) => n)).not.toContain("StartZonalShiftCommand");
  });

  it("cancels only llm-ha's shifts away from the zone; a repeat is `already`", async () => {
    const arc = new FakeArc(placement, () => now);
    arc.add({ resourceIdentifier: NLB_A, awayFrom: "use1-az1", comment: "llm-ha token=3 capacity lost", expiresInMs: 3_600_000 });
    arc.add({ resourceIdentifier: NLB_A, awayFrom: "use1-az1", comment: "ops: keep it away", expiresInMs: 3_600_000 });
    const a = actuator();
    const r = await a.cancelZonalShift("us-east-1a", CTX);
    expect(r).toMatchObject({ action: "shift.cancel", outcome: "applied", calls: 3 });
    expect(sent(arcMock)).toEqual([
      ["ListZonalShiftsCommand", { resourceIdentifier: NLB_A, status: "ACTIVE" }],
      ["CancelZonalShiftCommand", { zonalShiftId: "zs-1" }],
      ["ListZonalShiftsCommand", { resourceIdentifier: NLB_C, status: "ACTIVE" }],
    ]);
    expect(arc.shifts.map((s) => s.status)).toEqual(["CANCELED", "ACTIVE"]);
    expect(await a.cancelZonalShift("us-east-1a", CTX)).toMatchObject({ outcome: "already", calls: 2 });
  });

  it("retries a throttled list and fails without a call when identifiers are missing", async () => {
    new FakeArc(placement, () => now);
    const throttled = Object.assign(new Error("Rate exceeded"), { name: "ThrottlingException", $metadata: { httpStatusCode: 429 } });
    arcMock.on(ListZonalShiftsCommand).rejectsOnce(throttled).resolves({ items: [], $metadata: {} });
    expect(await actuator().cancelZonalShift("us-east-1a", CTX)).toMatchObject({ outcome: "already", calls: 3 });
    arcMock.resetHistory();
    expect(await actuator({ azIds: {} }).startZonalShift("us-east-1a", SHIFT)).toMatchObject({ outcome: "failed", calls: 0, detail: expect.stringContaining("no AZ id for us-east-1a") });
    expect(await actuator({ shiftResources: [] }).startZonalShift("us-east-1a", SHIFT)).toMatchObject({ outcome: "failed", calls: 0 });
    expect(await actuator({ shiftResources: [] }).cancelZonalShift("us-east-1a", CTX)).toMatchObject({ outcome: "failed", calls: 0 });
    expect(arcMock.calls()).toHaveLength(0);
  });

  it("fails when no configured load balancer lives in the zone", async () => {
    new FakeArc(placement, () => now);
    const r = await actuator().startZonalShift("us-east-1b", SHIFT);
    expect(r).toMatchObject({ outcome: "failed", calls: 2, detail: expect.stringContaining("deployed in use1-az2") });
  });
});

describe("dry-run", () => {
  it("decides, logs and calls nothing", async () => {
    const d = new DryRunActuator({ log, standbyGroups: [{ name: ASG, wakeSize: 2 }], shiftResources: [NLB_A], azIds: { ...AZ_IDS } });
    const results = [
      await d.wakeStandby("us-east-1c", CTX),
      await d.releaseStandby("us-east-1c", CTX),
      await d.startZonalShift("us-east-1a", SHIFT),
      await d.cancelZonalShift("us-east-1a", CTX),
    ];
    expect(results.map((r) => [r.action, r.outcome, r.calls])).toEqual([
      ["standby.wake", "dry-run", 0],
      ["standby.release", "dry-run", 0],
      ["shift.start", "dry-run", 0],
      ["shift.cancel", "dry-run", 0],
    ]);
    expect(results[0].detail).toBe(`would raise ${ASG} to min=desired=2 and suspend their scheduled actions`);
    expect(results[2].detail).toBe("would shift 1 load balancer away from us-east-1a (use1-az1) for 30m");
    expect(asgMock.calls()).toHaveLength(0);
    expect(arcMock.calls()).toHaveLength(0);
  });
});

describe("settings", () => {
  it("parses the standby groups and AZ ids, naming the variable in every error", () => {
    expect(parseStandbyGroups("asg-a=2, asg-b=4")).toEqual([{ name: "asg-a", wakeSize: 2 }, { name: "asg-b", wakeSize: 4 }]);
    expect(parseAzIds("us-east-1a=use1-az1,us-east-1c=use1-az4")).toEqual({ "us-east-1a": "use1-az1", "us-east-1c": "use1-az4" });
    const bad: [() => unknown, string, string][] = [
      [() => parseStandbyGroups("asg-a"), "LLMHA_STANDBY_ASGS", 'entry "asg-a" is not asg-name=wakeSize'],
      [() => parseStandbyGroups("asg-a=0"), "LLMHA_STANDBY_ASGS", 'wake size of asg-a must be an integer from 1 to 10000, got "0"'],
      [() => parseStandbyGroups("a=1,a=2"), "LLMHA_STANDBY_ASGS", "lists a twice"],
      [() => parseStandbyGroups(" , "), "LLMHA_STANDBY_ASGS", "is empty; expected asg-name=wakeSize"],
      [() => parseAzIds("us-east-1a=az1"), "LLMHA_AZ_IDS", '"az1" (for us-east-1a) is not an AZ id like use1-az1'],
      [() => parseAzIds("zone-a=use1-az1"), "LLMHA_AZ_IDS", '"zone-a" is not an availability zone name like us-east-1a'],
      [() => checkShiftResources(["arn:aws:s3:::bucket"]), "LLMHA_SHIFT_RESOURCES", '"arn:aws:s3:::bucket" is not a load balancer ARN'],
    ];
    for (const [parse, variable, message] of bad) {
      let err: unknown;
      try {
        parse();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ActuatorSettingError);
      expect(err).toMatchObject({ variable });
      expect((err as Error).message).toContain(message);
    }
  });

  it("writes ARC's expiresIn and keeps the comment within 128 characters", () => {
    expect([90_000, 30 * 60_000, 2 * 3_600_000, 150 * 60_000, 100 * 3_600_000].map(expiresIn)).toEqual(["2m", "30m", "2h", "150m", "72h"]);
    const c = shiftComment({ token: 12, reason: "x".repeat(300) });
    expect(c.length).toBe(128);
    expect(c.startsWith("llm-ha token=12 ")).toBe(true);
  });
});
