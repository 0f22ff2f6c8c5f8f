/**
 * The replacement's Auto Scaling calls (repair-asg.ts) against the in-memory Auto Scaling of
 * test/actuators/fakes.ts, with the two calls a replacement adds: the instance's group is found,
 * one more instance asked within the max and the group tagged (a repeat asks nothing), the old
 * instance terminated taking the surge back; at the max nothing is asked.
 */
import { DescribeAutoScalingInstancesCommand, TerminateInstanceInAutoScalingGroupCommand, UpdateAutoScalingGroupCommand } from "@aws-sdk/client-auto-scaling";
import { beforeEach, describe, expect, it } from "vitest";
import { AsgReplacer, REPAIR_SURGE_TAG } from "../../agent/src/fleet/actuators/repair-asg";
import { KubeRepairActuator } from "../../agent/src/fleet/actuators/repair-kube";
import { arcMock, asgMock, autoScalingClient, FakeAutoScaling } from "../actuators/fakes";

const GROUP = "eks-gpu-us-east-1a-h100-0001";
const OLD = "i-0123456789abcdef0";

function fake(desired: number, max: number): FakeAutoScaling {
  const asg = new FakeAutoScaling().add(GROUP, { min: 0, max, desired, instances: ["InService", "InService"] });
  const members = new Set([OLD]);
  asgMock.on(DescribeAutoScalingInstancesCommand).callsFake((input: { InstanceIds: string[] }) => ({
    AutoScalingInstances: input.InstanceIds.filter((id) => members.has(id)).map((InstanceId) => ({ InstanceId, AutoScalingGroupName: GROUP, AvailabilityZone: "us-east-1a", LifecycleState: "InService", HealthStatus: "HEALTHY", ProtectedFromScaleIn: false })),
    $metadata: {},
  }));
  asgMock.on(TerminateInstanceInAutoScalingGroupCommand).callsFake((input: { InstanceId: string; ShouldDecrementDesiredCapacity: boolean }) => {
    members.delete(input.InstanceId);
    if (input.ShouldDecrementDesiredCapacity) asg.group(GROUP).desired -= 1;
    return { $metadata: {} };
  });
  return asg;
}

beforeEach(() => {
  asgMock.reset();
  arcMock.reset();
});

describe("replacement through the instance's Auto Scaling group", () => {
  it("surges within the max once, tagged; terminates with the surge taken back; a repeat of either asks nothing", async () => {
    const asg = fake(2, 4);
    const k = new KubeRepairActuator({ url: "http://127.0.0.1:9", tokenFile: null, caFile: null, namespace: "llm-ha", replacer: new AsgReplacer("us-east-1", autoScalingClient()) });
    const ctx = { token: 1, reason: "test" };
    expect(await k.surge(OLD, ctx)).toMatchObject({ step: "surge", outcome: "applied", surged: true, detail: `${GROUP} desired 2→3 to replace ${OLD}` });
    expect(asg.group(GROUP)).toMatchObject({ desired: 3, max: 4, min: 0 });
    expect(asg.group(GROUP).tags[REPAIR_SURGE_TAG]).toBe(OLD);
    expect(await k.surge(OLD, ctx)).toMatchObject({ outcome: "already", surged: true });
    expect(asgMock.commandCalls(UpdateAutoScalingGroupCommand)).toHaveLength(1);

    expect(await k.terminate(OLD, true, ctx)).toMatchObject({ step: "terminate", outcome: "applied" });
    expect(asg.group(GROUP).desired).toBe(2);
    expect(asg.group(GROUP).tags[REPAIR_SURGE_TAG]).toBeUndefined();
    expect(asgMock.commandCalls(TerminateInstanceInAutoScalingGroupCommand)[0].args[0].input).toEqual({ InstanceId: OLD, ShouldDecrementDesiredCapacity: true });
    expect(await k.terminate(OLD, true, ctx)).toMatchObject({ outcome: "already" });
    expect(asgMock.commandCalls(TerminateInstanceInAutoScalingGroupCommand)).toHaveLength(1);
  });

  it("at its max nothing is asked: the termination keeps the desired size, so the group launches the replacement", async () => {
    const asg = fake(4, 4);
    const k = new KubeRepairActuator({ url: "http://127.0.0.1:9", tokenFile: null, caFile: null, namespace: "llm-ha", replacer: new AsgReplacer("us-east-1", autoScalingClient()) });
    const ctx = { token: 1, reason: "test" };
    const r = await k.surge(OLD, ctx);
    expect(r).toMatchObject({ outcome: "applied", surged: false });
    expect(r.detail).toMatch(/at its max \(4\): nothing asked/);
    expect(asgMock.commandCalls(UpdateAutoScalingGroupCommand)).toHaveLength(0);
    await k.terminate(OLD, false, ctx);
    expect(asg.group(GROUP).desired).toBe(4);
    expect(await k.surge("not-an-instance", ctx)).toMatchObject({ outcome: "failed" });
  });
});
