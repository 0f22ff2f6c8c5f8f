import { describe, expect, it } from "vitest";
import { gpuAgentsHoldNoCloudRole } from "../../policies/cloud-holder";
import { changed, happyStack, messages } from "./fixtures";

type Trust = { Statement: { Condition?: Record<string, Record<string, string>> }[] };

/** The valid stack with the actuator role's trust changed. */
function withTrust(change: (doc: Trust) => void) {
  return changed("agent-role", (p) => {
    const doc = JSON.parse(String(p.assumeRolePolicy)) as Trust;
    change(doc);
    p.assumeRolePolicy = JSON.stringify(doc);
  });
}
const SUB = "oidc.eks.us-east-1.amazonaws.com/id/X:sub";

describe("gpu-agents-hold-no-cloud-role", () => {
  it("passes a role that trusts the controller's ServiceAccount while the GPU agents run as another", async () => {
    expect(await messages(gpuAgentsHoldNoCloudRole, happyStack())).toEqual([]);
  });

  it("refuses the role trusting the GPU-node agents' ServiceAccount (their own, for node identities), or the inference pods' (the default one here)", async () => {
    const agents = withTrust((d) => (d.Statement[0].Condition!.StringEquals[SUB] = "system:serviceaccount:llm-ha:llm-ha-agent"));
    expect(await messages(gpuAgentsHoldNoCloudRole, agents)).toEqual([
      "DaemonSet llm-ha-agent runs on GPU nodes as ServiceAccount llm-ha/llm-ha-agent, which the actuator's role agent-role trusts: GPU-node agents must hold no cloud role; trust the controller's ServiceAccount only.",
    ]);
    const rs = withTrust((d) => (d.Statement[0].Condition!.StringEquals[SUB] = "system:serviceaccount:llm-ha:default"));
    expect(await messages(gpuAgentsHoldNoCloudRole, rs)).toEqual([
      "Deployment inference-us-east-1a runs on GPU nodes as ServiceAccount llm-ha/default, which the actuator's role agent-role trusts: GPU-node agents must hold no cloud role; trust the controller's ServiceAccount only.",
    ]);
  });

  it("refuses a glob that takes in the agents, and a trust with no :sub at all", async () => {
    const glob = withTrust((d) => {
      delete d.Statement[0].Condition!.StringEquals[SUB];
      d.Statement[0].Condition!.StringLike = { [SUB]: "system:serviceaccount:llm-ha:*" };
    });
    expect(await messages(gpuAgentsHoldNoCloudRole, glob)).toHaveLength(2);
    const open = withTrust((d) => delete d.Statement[0].Condition);
    expect(await messages(gpuAgentsHoldNoCloudRole, open)).toEqual([
      "The actuator's role agent-role trusts web identities without a :sub condition: every ServiceAccount in the cluster, GPU-node agents included, could assume it; name the controller's ServiceAccount.",
    ]);
  });
});
