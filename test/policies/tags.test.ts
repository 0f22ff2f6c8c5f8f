import { describe, expect, it } from "vitest";
import { eksControlPlaneLogging } from "../../policies/cluster";
import { runPolicies } from "../../policies/runner";
import { requiredTags } from "../../policies/tags";
import { changed, happyStack, messages } from "./fixtures";

describe("required-tags (advisory)", () => {
  it("passes when every taggable resource has Project and Environment", async () => {
    expect(await messages(requiredTags, happyStack())).toEqual([]);
  });

  it("reports a missing tag as advisory", async () => {
    const rs = changed("registry", (p) => (p.tags = { Project: "llm-ha" }));
    expect(await runPolicies([requiredTags], rs)).toEqual([
      {
        policy: "required-tags",
        enforcementLevel: "advisory",
        urn: "urn:pulumi:test::llm-ha::aws:elasticache/replicationGroup:ReplicationGroup::registry",
        message: "registry lacks the tag Environment.",
      },
    ]);
  });

  it("checks known taggable types that pass no tags at all", async () => {
    expect(await messages(requiredTags, changed("eks", (p) => delete p.tags))).toEqual(["eks lacks the tags Project, Environment."]);
  });

  it("takes the keys from config", async () => {
    const cfg = { "required-tags": { requiredTags: ["Owner"] } };
    const found = await messages(requiredTags, happyStack(), cfg);
    expect(found).toContain("registry lacks the tag Owner.");
  });
});

describe("eks-control-plane-logging (advisory)", () => {
  it("passes with api, audit and authenticator", async () => {
    expect(await messages(eksControlPlaneLogging, happyStack())).toEqual([]);
  });

  it("reports missing log types", async () => {
    const rs = changed("eks", (p) => (p.enabledClusterLogTypes = ["api"]));
    const v = await runPolicies([eksControlPlaneLogging], rs);
    expect(v.map((x) => [x.enforcementLevel, x.message])).toEqual([
      ["advisory", "EKS cluster eks does not enable the audit, authenticator control-plane logs."],
    ]);
  });
});
