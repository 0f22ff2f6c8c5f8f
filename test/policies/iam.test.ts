import { describe, expect, it } from "vitest";
import { agentRoleLeastPrivilege } from "../../policies/iam";
import { changed, find, happyStack, messages } from "./fixtures";

type Doc = { Statement: Record<string, unknown>[] };

/** The valid stack with one change to the agent's policy document. */
function withPolicy(change: (doc: Doc) => void) {
  return changed("agent-actuator", (p) => {
    const doc = JSON.parse(String(p.policy)) as Doc;
    change(doc);
    p.policy = JSON.stringify(doc);
  });
}

describe("agent-role-least-privilege", () => {
  it("passes the actuator's actions scoped to the groups and load balancers", async () => {
    expect(await messages(agentRoleLeastPrivilege, happyStack())).toEqual([]);
  });

  it("fails a write action on Resource *", async () => {
    const rs = withPolicy((d) => (d.Statement[2].Resource = "*"));
    expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([
      'Agent role policy agent-actuator allows arc-zonal-shift:StartZonalShift, arc-zonal-shift:UpdateZonalShift, arc-zonal-shift:CancelZonalShift and arc-zonal-shift:GetManagedResource on Resource "*"; name the standby groups and load balancers.',
    ]);
  });

  it("reads Resource as a glob: any ARN whose name is only wildcards counts as *", async () => {
    const rs = withPolicy((d) => (d.Statement[1].Resource = ["arn:aws:ec2:*:*:*", "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/*", "arn:*:*:*:*:x"]));
    expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([
      'Agent role policy agent-actuator allows autoscaling:UpdateAutoScalingGroup, autoscaling:SuspendProcesses, autoscaling:ResumeProcesses, autoscaling:CreateOrUpdateTags and autoscaling:DeleteTags on Resource "arn:aws:ec2:*:*:*", "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/*", "arn:*:*:*:*:x"; name the standby groups and load balancers.',
    ]);
    // A wildcard in the group's id still names the group.
    expect(await messages(agentRoleLeastPrivilege, happyStack())).toEqual([]);
  });

  it("fails an action beyond the list, wildcards included", async () => {
    const rs = withPolicy((d) => (d.Statement[1].Action = ["autoscaling:*", "ec2:TerminateInstances"]));
    expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([
      "Agent role policy agent-actuator allows autoscaling:* and ec2:TerminateInstances, beyond the actuator's actions.",
    ]);
  });

  it("passes the repair ladder's reboot on instance/* only when conditioned on the stack's Project tag", async () => {
    const reboot = { Sid: "RebootGpuInstances", Effect: "Allow", Action: ["ec2:RebootInstances"], Resource: "arn:aws:ec2:us-east-1:123456789012:instance/*" };
    const scoped = withPolicy((d) => d.Statement.push({ ...reboot, Condition: { StringEquals: { "aws:ResourceTag/Project": "llm-ha", "aws:ResourceTag/Environment": "test" } } }));
    expect(await messages(agentRoleLeastPrivilege, scoped)).toEqual([]);
    const bare = withPolicy((d) => d.Statement.push(reboot));
    const anyProject = withPolicy((d) => d.Statement.push({ ...reboot, Condition: { StringEquals: { "aws:ResourceTag/Project": "*" } } }));
    for (const rs of [bare, anyProject]) {
      expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([
        'Agent role policy agent-actuator allows ec2:RebootInstances on Resource "arn:aws:ec2:us-east-1:123456789012:instance/*"; name the standby groups and load balancers.',
      ]);
    }
  });

  it("fails NotAction", async () => {
    const rs = withPolicy((d) => {
      delete d.Statement[0].Action;
      d.Statement[0].NotAction = "iam:*";
    });
    expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([
      "Agent role policy agent-actuator uses NotAction; list the actions and resources it allows.",
    ]);
  });

  it("ignores other roles' policies and Deny statements", async () => {
    const rs = withPolicy((d) => d.Statement.push({ Effect: "Deny", Action: "*", Resource: "*" }));
    const other = find(rs, "agent-role");
    other.props.tags = { Project: "llm-ha", Environment: "test" };
    const broad = withPolicy((d) => (d.Statement[1].Resource = "*"));
    find(broad, "agent-role").props.tags = {};
    expect(await messages(agentRoleLeastPrivilege, rs)).toEqual([]);
    expect(await messages(agentRoleLeastPrivilege, broad)).toEqual([]);
  });
});
