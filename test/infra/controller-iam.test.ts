/**
 * The controller's IAM policy on its own: what IAM can hold, it holds — no zonal
 * shift, the one tag the actuator writes is the one the policy allows.
 */
import { describe, expect, it } from "vitest";
import { agentPolicy, PRE_WAKE_TAG_KEY } from "../../infra/agent-iam";
import { PRE_WAKE_TAG } from "../../agent/src/fleet/actuators/aws";

describe("the controller's permission policy", () => {
  it("grants no zonal shift: the stack's NLBs are single-AZ, which ARC does not shift", () => {
    const p = JSON.parse(agentPolicy("123456789012", "us-east-1", "c", [{ name: "sb-a100", maxSize: 4 }]));
    expect(JSON.stringify(p)).not.toMatch(/StartZonalShift|ShiftZoneLoadBalancers/);
  });

  it("bounds each group's resize by its own maximum and allows only the pre-wake tag the actuator writes", () => {
    expect(PRE_WAKE_TAG_KEY).toBe(PRE_WAKE_TAG);
    const p = JSON.parse(agentPolicy("123456789012", "us-east-1", "prod", [{ name: "sb-a100", maxSize: 4 }, { name: "sb-h100", maxSize: 2 }]));
    const resize = p.Statement.filter((s: { Sid: string }) => s.Sid.startsWith("ResizeStandbyGroup"));
    expect(resize.map((s: { Condition: { NumericLessThanEquals: Record<string, string> } }) => s.Condition.NumericLessThanEquals)).toEqual([
      { "autoscaling:MaxSize": "4", "autoscaling:MinSize": "4" },
      { "autoscaling:MaxSize": "2", "autoscaling:MinSize": "2" },
    ]);
    for (const s of p.Statement.slice(1)) expect(s.Condition.StringEquals).toEqual({ "autoscaling:ResourceTag/eks:cluster-name": "prod" });
    expect(p.Statement.some((s: { Action: string[] }) => s.Action.includes("ec2:RebootInstances"))).toBe(false);
  });

  it("grants the repair ladder's reboot only when asked, and only on the stack's own GPU instances (tag conditions)", () => {
    const p = JSON.parse(agentPolicy("123456789012", "us-east-1", "prod", [], { project: "llm-ha", environment: "prod" }));
    expect(p.Statement.find((s: { Sid: string }) => s.Sid === "RebootGpuInstances")).toEqual({
      Sid: "RebootGpuInstances",
      Effect: "Allow",
      Action: ["ec2:RebootInstances"],
      Resource: "arn:aws:ec2:us-east-1:123456789012:instance/*",
      Condition: {
        StringEquals: { "aws:ResourceTag/Project": "llm-ha", "aws:ResourceTag/Environment": "prod" },
        Null: { "aws:ResourceTag/llm-ha.io/gpu-class": "false" },
      },
    });
  });
});
