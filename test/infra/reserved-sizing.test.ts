/**
 * GPU groups created at zero on a capacity reservation or Capacity Block are sized by the
 * leader once the reservation is active: the stack names them to the controller
 * (`LLMHA_RESERVED_GROUPS`, `asg=cr-id:size`) and grants exactly that, each resize bounded by
 * the group's maximum and the one tag the sizing writes. A standby group on a block is left to
 * the wake; a stack without reservations names nothing.
 */
import { describe, expect, it } from "vitest";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { RESERVED_SIZED_TAG_KEY } from "../../infra/agent-iam";
import { RESERVED_SIZED_TAG } from "../../agent/src/fleet/actuators/aws";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const controllerEnv = (rs: CapturedResource[]): Record<string, unknown> => {
  const d = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "llm-ha-controller")!.props as O;
  return Object.fromEntries(d.spec.template.spec.containers[0].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
};
const statements = (rs: CapturedResource[]): O[] => JSON.parse(String(rs.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator")!.props.policy)).Statement;
const gpu = (o: O) => ({ "llm-ha:gpuClasses": JSON.stringify([{ name: "h100", desiredPerAz: 1, maxPerAz: 2, ...o }]) });
const arn = (group: string) => `arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-${group}-asg`;

describe("reserved GPU groups sized by the leader", () => {
  it("the agent's tag and the role's tag condition are the same key", () => {
    expect(RESERVED_SIZED_TAG).toBe(RESERVED_SIZED_TAG_KEY);
  });

  it("Capacity Blocks: the active AZ's group is named with its block and size, the standby's is left to the wake; the role may size and tag only it", async () => {
    // dev: us-east-1a active, us-east-1b the standby.
    const rs = await captureStack("dev", gpu({ capacityType: "CAPACITY_BLOCK", capacityReservations: { "us-east-1a": "cr-0aaaaaaaaaaaaaaa1", "us-east-1b": "cr-0bbbbbbbbbbbbbbb2" } }));
    expect(controllerEnv(rs)).toMatchObject({ LLMHA_ACTUATOR: "aws", LLMHA_RESERVED_GROUPS: "eks-gpu-us-east-1a-h100-asg=cr-0aaaaaaaaaaaaaaa1:1" });
    const st = statements(rs);
    expect(st[0].Action).toContain("ec2:DescribeCapacityReservations");
    expect(st[0].Resource).toBe("*");
    const inCluster = { StringEquals: { "autoscaling:ResourceTag/eks:cluster-name": "llm-ha-dev" } };
    expect(st.filter((s) => String(s.Sid).startsWith("SizeReservedGroup"))).toEqual([
      {
        Sid: "SizeReservedGroup0",
        Effect: "Allow",
        Action: ["autoscaling:UpdateAutoScalingGroup"],
        Resource: arn("gpu-us-east-1a-h100"),
        Condition: { ...inCluster, NumericLessThanEquals: { "autoscaling:MaxSize": "2", "autoscaling:MinSize": "2" } },
      },
    ]);
    expect(st.find((s) => s.Sid === "TagReservedSized")).toEqual({
      Sid: "TagReservedSized",
      Effect: "Allow",
      Action: ["autoscaling:CreateOrUpdateTags"],
      Resource: [arn("gpu-us-east-1a-h100")],
      Condition: { ...inCluster, "ForAllValues:StringEquals": { "aws:TagKeys": [RESERVED_SIZED_TAG_KEY] } },
    });
  });

  it("a capacity reservation in one AZ names that AZ's group only; without reservations nothing is named or granted", async () => {
    const rs = await captureStack("dev", gpu({ instanceTypes: ["p5.48xlarge"], capacityReservations: { "us-east-1a": "cr-0123456789abcdef0" } }));
    expect(controllerEnv(rs).LLMHA_RESERVED_GROUPS).toBe("eks-gpu-us-east-1a-h100-asg=cr-0123456789abcdef0:1");
    const plain = await captureStack("dev");
    expect(controllerEnv(plain).LLMHA_RESERVED_GROUPS).toBeUndefined();
    expect(statements(plain).some((s) => /Reserved/.test(String(s.Sid)))).toBe(false);
  });
});
