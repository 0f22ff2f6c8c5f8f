import { describe, expect, it } from "vitest";
import { mskHaEncrypted } from "../../policies/data";
import { globsOverlap, mskQueueWriterOnlyFallback } from "../../policies/iam";
import { at, changed, find, happyStack, messages } from "./fixtures";
import type { CapturedResource } from "../../policies/runner";

const TOPIC = "arn:aws:kafka:us-east-1:123456789012:topic/llm-ha-prod/0a1b2c3d-4e5f-6789-abcd-ef0123456789-1/llmha.llm-ha-prod.requests";
const TAGS = { Project: "llm-ha", Environment: "test" };
const res = (type: string, name: string, props: Record<string, unknown>): CapturedResource => ({ type, name, urn: `urn:pulumi:test::llm-ha::${type}::${name}`, props });

/** The happy stack plus the fallback's role and its MSK policy, as infra/workloads/fallback.ts makes them. */
function withFallback(): CapturedResource[] {
  return [
    ...happyStack(),
    res("aws:iam/role:Role", "fallback-role", {
      name: "llm-fallback",
      assumeRolePolicy: JSON.stringify({
        Version: "2012-10-17",
        Statement: [{
          Effect: "Allow", Principal: { Federated: "arn:aws:iam::123456789012:oidc-provider/x" }, Action: "sts:AssumeRoleWithWebIdentity",
          Condition: { StringEquals: { "oidc.eks.us-east-1.amazonaws.com/id/X:sub": "system:serviceaccount:llm-ha:llmha-fallback", "oidc.eks.us-east-1.amazonaws.com/id/X:aud": "sts.amazonaws.com" } },
        }],
      }),
      tags: { ...TAGS, "llm-ha.io/identity": "fallback" },
    }),
    res("aws:iam/rolePolicy:RolePolicy", "fallback-msk", {
      role: "llm-fallback",
      policy: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: ["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData", "kafka-cluster:ReadData"], Resource: TOPIC }] }),
    }),
  ];
}

/** The agent's policy with one more statement. */
function agentAlso(statement: Record<string, unknown>): CapturedResource[] {
  const rs = withFallback();
  const p = find(rs, "agent-actuator").props;
  const doc = JSON.parse(String(p.policy)) as { Statement: unknown[] };
  doc.Statement.push(statement);
  p.policy = JSON.stringify(doc);
  return rs;
}

describe("msk-queue-writer-only-fallback", () => {
  it("passes the fallback's own write grant", async () => {
    expect(await messages(mskQueueWriterOnlyFallback, withFallback())).toEqual([]);
    expect(await messages(mskQueueWriterOnlyFallback, happyStack())).toEqual([]);
  });

  const writes: [string, Record<string, unknown>, string][] = [
    ["the exact topic", { Effect: "Allow", Action: "kafka-cluster:WriteData", Resource: TOPIC }, "kafka-cluster:WriteData"],
    ["kafka-cluster:* on *", { Effect: "Allow", Action: "kafka-cluster:*", Resource: "*" }, "kafka-cluster:WriteData and kafka-cluster:WriteDataIdempotently"],
    ["Write* on every topic of the cluster", { Effect: "Allow", Action: ["kafka-cluster:Write*"], Resource: ["arn:aws:kafka:us-east-1:123456789012:topic/llm-ha-prod/*"] }, "kafka-cluster:WriteData and kafka-cluster:WriteDataIdempotently"],
    ["NotAction without the write actions", { Effect: "Allow", NotAction: ["iam:*"], Resource: "*" }, "kafka-cluster:WriteData and kafka-cluster:WriteDataIdempotently"],
  ];
  for (const [what, statement, actions] of writes) {
    it(`fails another role granted ${what}`, async () => {
      expect(await messages(mskQueueWriterOnlyFallback, agentAlso(statement))).toEqual([
        `Role policy agent-actuator allows ${actions} on the L4 queue topic; only the fallback's role may write it.`,
      ]);
    });
  }

  it("ignores reads, other topics, Deny, and NotAction that keeps the writes out", async () => {
    for (const s of [
      { Effect: "Allow", Action: ["kafka-cluster:ReadData", "kafka-cluster:DescribeTopic"], Resource: TOPIC },
      { Effect: "Allow", Action: "kafka-cluster:WriteData", Resource: "arn:aws:kafka:us-east-1:123456789012:topic/llm-ha-prod/0a1b/audit.events" },
      { Effect: "Deny", Action: "kafka-cluster:*", Resource: "*" },
      { Effect: "Allow", NotAction: ["kafka-cluster:*"], Resource: "*" },
    ]) {
      expect(await messages(mskQueueWriterOnlyFallback, agentAlso(s)), JSON.stringify(s)).toEqual([]);
    }
  });

  it("fails a managed, user or inline role policy that writes it, and a topic the fallback names under another name", async () => {
    const doc = JSON.stringify({ Statement: [{ Effect: "Allow", Action: "kafka-cluster:WriteData", Resource: TOPIC.replace("llmha.llm-ha-prod.requests", "custom-queue") }] });
    const rs = withFallback();
    const fb = JSON.parse(String(find(rs, "fallback-msk").props.policy)) as { Statement: { Resource: unknown }[] };
    fb.Statement[0].Resource = [TOPIC, TOPIC.replace("llmha.llm-ha-prod.requests", "custom-queue")];
    find(rs, "fallback-msk").props.policy = JSON.stringify(fb);
    rs.push(
      res("aws:iam/policy:Policy", "writers", { policy: doc, tags: TAGS }),
      res("aws:iam/userPolicy:UserPolicy", "ci-user", { user: "ci", policy: doc }),
      res("aws:iam/role:Role", "batch-role", { assumeRolePolicy: "{}", inlinePolicies: [{ name: "q", policy: doc }], tags: TAGS }),
    );
    expect(await messages(mskQueueWriterOnlyFallback, rs)).toEqual([
      "Managed policy writers allows kafka-cluster:WriteData on the L4 queue topic; only the fallback's role may write it.",
      "User policy ci-user allows kafka-cluster:WriteData on the L4 queue topic; only the fallback's role may write it.",
      "Inline policy of role batch-role allows kafka-cluster:WriteData on the L4 queue topic; only the fallback's role may write it.",
    ]);
  });

  it("fails a role tagged as the fallback's that others may assume", async () => {
    const rs = withFallback();
    const role = find(rs, "fallback-role").props;
    role.assumeRolePolicy = JSON.stringify({ Statement: [{ Effect: "Allow", Principal: { AWS: "arn:aws:iam::123456789012:root" }, Action: "sts:AssumeRole" }] });
    const wildcard = withFallback();
    const trust = JSON.parse(String(find(wildcard, "fallback-role").props.assumeRolePolicy)) as { Statement: { Condition: { StringEquals: Record<string, string> } }[] };
    trust.Statement[0].Condition.StringEquals["oidc.eks.us-east-1.amazonaws.com/id/X:sub"] = "system:serviceaccount:llm-ha:llm-ha-agent";
    find(wildcard, "fallback-role").props.assumeRolePolicy = JSON.stringify(trust);
    const msg = "Fallback role fallback-role may be assumed by more than the llmha-fallback ServiceAccount (its trust must be the cluster's OIDC provider with StringEquals :sub system:serviceaccount:<namespace>:llmha-fallback).";
    expect(await messages(mskQueueWriterOnlyFallback, rs)).toEqual([msg]);
    expect(await messages(mskQueueWriterOnlyFallback, wildcard)).toEqual([msg]);
  });

  it("matches IAM wildcards both ways", () => {
    expect(globsOverlap("kafka-cluster:*", "kafka-cluster:WriteData")).toBe(true);
    expect(globsOverlap("KAFKA-CLUSTER:writedata", "kafka-cluster:WriteData")).toBe(true);
    expect(globsOverlap("kafka-cluster:Read*", "kafka-cluster:WriteData")).toBe(false);
    expect(globsOverlap("arn:aws:kafka:*:*:topic/c/u/*", "arn:*:kafka:*:*:topic/*/*/llmha.*.requests")).toBe(true);
    expect(globsOverlap("arn:aws:kafka:*:*:topic/c/u/other-?", "arn:*:kafka:*:*:topic/*/*/llmha.*.requests")).toBe(false);
  });
});

describe("msk-ha-encrypted keeps IAM the only client authentication", () => {
  it("fails SASL/SCRAM or TLS client certificates next to IAM", async () => {
    expect(await messages(mskHaEncrypted, changed("queue", (p) => (at(p, "clientAuthentication").sasl = { iam: true, scram: true })))).toEqual([
      "MSK queue enables SASL/SCRAM; IAM must be its only client authentication.",
    ]);
    expect(await messages(mskHaEncrypted, changed("queue", (p) => (at(p, "clientAuthentication").tls = { certificateAuthorityArns: ["arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/x"] })))).toEqual([
      "MSK queue enables TLS client-certificate authentication; IAM must be its only client authentication.",
    ]);
  });
});
