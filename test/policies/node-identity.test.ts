import { describe, expect, it } from "vitest";
import { agentNodeIdentity } from "../../policies/node-identity";
import { at, changed, happyStack, messages } from "./fixtures";

type O = Record<string, unknown>;
const podSpec = (p: O) => at(p, "spec.template.spec");
const agentContainer = (p: O) => (podSpec(p).containers as O[])[0];
const REFUSED = /^Agent DaemonSet llm-ha-agent has no projected ServiceAccount token of audience llm-ha named by LLMHA_IDENTITY_TOKEN_FILE: .*llm-ha:nodeIdentities false \(the stack then annotates the DaemonSet llm-ha\.io\/node-identities: off\)\.$/;

/** The agent as it was before node identities: no token, no env. */
const withoutToken = (p: O) => {
  delete podSpec(p).volumes;
  delete agentContainer(p).volumeMounts;
  delete agentContainer(p).env;
};

describe("agent-node-identity", () => {
  it("passes the agent with a projected token of audience llm-ha that LLMHA_IDENTITY_TOKEN_FILE names", async () => {
    expect(await messages(agentNodeIdentity, happyStack())).toEqual([]);
  });

  it("refuses the agent without one, naming the setting and the way out", async () => {
    const found = await messages(agentNodeIdentity, changed("agent", withoutToken));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(REFUSED);
  });

  it("refuses a token of another audience, one not mounted, and an env that names another file", async () => {
    const cases: ((p: O) => void)[] = [
      (p) => ((((podSpec(p).volumes as O[])[0].projected as O).sources as O[])[0].serviceAccountToken as O).audience = "sts.amazonaws.com",
      (p) => delete agentContainer(p).volumeMounts,
      (p) => (agentContainer(p).env = [{ name: "LLMHA_IDENTITY_TOKEN_FILE", value: "/var/run/secrets/kubernetes.io/serviceaccount/token" }]),
      (p) => delete agentContainer(p).env,
    ];
    for (const c of cases) expect(await messages(agentNodeIdentity, changed("agent", c))).toEqual([expect.stringMatching(REFUSED)]);
  });

  it("lets a DaemonSet without the token through only with the explicit opt-out annotation", async () => {
    const optOut = changed("agent", (p) => {
      withoutToken(p);
      at(p, "metadata").annotations = { "pulumi.com/skipAwait": "true", "llm-ha.io/node-identities": "off" };
    });
    expect(await messages(agentNodeIdentity, optOut)).toEqual([]);
    const other = changed("agent", (p) => {
      withoutToken(p);
      at(p, "metadata").annotations = { "llm-ha.io/node-identities": "false" };
    });
    expect(await messages(agentNodeIdentity, other)).toHaveLength(1);
  });

  it("ignores other DaemonSets", async () => {
    const rs = changed("agent", (p) => {
      withoutToken(p);
      at(p, "spec.template.metadata").labels = { "app.kubernetes.io/name": "nvidia-device-plugin" };
    });
    expect(await messages(agentNodeIdentity, rs)).toEqual([]);
  });
});
