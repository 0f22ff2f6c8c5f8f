/**
 * The pack over prod with the repair ladder acting (`llm-ha:repair.mode: act`): the controller's
 * reboot grant on `instance/*` passes because it is held to the stack's own instances by their
 * `Project` tag, and is refused the moment that condition is gone.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { settled } from "./fixtures";

type Statement = { Sid?: string; Condition?: unknown };

describe("policy pack over prod with llm-ha:repair.mode act", () => {
  let rs: CapturedResource[];
  const actuator = (graph: CapturedResource[]) => graph.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator")!;
  const reboot = (graph: CapturedResource[]): Statement | undefined =>
    (JSON.parse(String(actuator(graph).props.policy)) as { Statement: Statement[] }).Statement.find((s) => s.Sid === "RebootGpuInstances");

  beforeAll(async () => {
    rs = await captureStack("prod", { "llm-ha:repair": JSON.stringify({ mode: "act" }) });
  });

  it("grants the reboot and passes the whole pack, advisory findings included", async () => {
    expect(reboot(rs)).toBeDefined();
    expect((await runPolicies(policies, rs)).filter(settled).map((v) => `${v.enforcementLevel} ${v.policy}: ${v.message}`)).toEqual([]);
  });

  it("refuses the reboot grant once its stack-tag condition is removed", async () => {
    const broken = structuredClone(rs);
    const rp = actuator(broken);
    const doc = JSON.parse(String(rp.props.policy)) as { Statement: Statement[] };
    delete doc.Statement.find((s) => s.Sid === "RebootGpuInstances")!.Condition;
    rp.props.policy = JSON.stringify(doc);
    expect(reboot(broken)?.Condition).toBeUndefined();
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn, v.message])).toEqual([
      ["agent-role-least-privilege", rp.urn, 'Agent role policy agent-actuator allows ec2:RebootInstances on Resource "arn:aws:ec2:us-east-1:123456789012:instance/*"; name the standby groups and load balancers.'],
    ]);
  });
});
