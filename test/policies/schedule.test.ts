import { describe, expect, it } from "vitest";
import { standbyScheduleRules } from "../../policies/schedule";
import { changed, find, happyStack, messages } from "./fixtures";

describe("standby-schedule-rules", () => {
  it("passes a down/up pair on the standby group", async () => {
    expect(await messages(standbyScheduleRules, happyStack())).toEqual([]);
  });

  it("fails a scale-down without a scale-up", async () => {
    const rs = happyStack().filter((r) => r.name !== "standby-up");
    expect(await messages(standbyScheduleRules, rs)).toEqual([
      "Standby node group gpu-us-east-1c-h100 has a scale-down schedule but no scale-up schedule.",
    ]);
  });

  it("fails a schedule on an active group", async () => {
    const rs = changed("standby-down", (p) => (p.autoscalingGroupName = "eks-gpu-us-east-1a-h100-asg"));
    expect(await messages(standbyScheduleRules, rs)).toEqual([
      "Schedule standby-down targets active GPU node group gpu-us-east-1a-h100; only standby groups may be scheduled.",
    ]);
  });

  it("fails when the standby label turns active", async () => {
    const rs = changed("gpu-us-east-1c-h100", (p) => ((p.labels as Record<string, string>)["llm-ha.io/az-role"] = "active"));
    expect(await messages(standbyScheduleRules, rs)).toEqual([
      "Schedule standby-down targets active GPU node group gpu-us-east-1c-h100; only standby groups may be scheduled.",
      "Schedule standby-up targets active GPU node group gpu-us-east-1c-h100; only standby groups may be scheduled.",
    ]);
  });

  it("fails a scale-down of a group the stack does not own", async () => {
    const rs = changed("standby-down", (p) => (p.autoscalingGroupName = "some-other-asg"));
    expect(await messages(standbyScheduleRules, rs)).toEqual([
      "Schedule standby-down scales some-other-asg down but no standby GPU node group in the stack owns that group.",
    ]);
  });

  it("does not let gpu-a claim gpu-a2's auto scaling group", async () => {
    const rs = happyStack();
    const twin = structuredClone(find(rs, "gpu-us-east-1c-h100"));
    twin.name = "gpu-us-east-1c-h100x";
    twin.urn += "x";
    (twin.props.labels as Record<string, string>)["llm-ha.io/az-role"] = "active";
    rs.push(twin);
    find(rs, "standby-down").props.autoscalingGroupName = "eks-gpu-us-east-1c-h100x-asg";
    expect(await messages(standbyScheduleRules, rs)).toEqual([
      "Schedule standby-down targets active GPU node group gpu-us-east-1c-h100x; only standby groups may be scheduled.",
    ]);
  });

  it("fails a schedule on a group that runs on a Capacity Block (the block ends and AWS scales it down; a weekly scale-up would fight it)", async () => {
    const rs = changed("gpu-us-east-1c-h100", (p) => (p.capacityType = "CAPACITY_BLOCK"));
    const m = await messages(standbyScheduleRules, rs);
    expect(m).toHaveLength(2);
    expect(m[0]).toBe(
      "Schedule standby-down targets gpu-us-east-1c-h100, which runs on a Capacity Block: the block is paid for whether it runs or not, and it ends (≤ 182 days; EC2 scales it down and takes the instances back), so a recurring schedule saves nothing and outlives it. Leave block groups unscheduled.",
    );
  });
});
