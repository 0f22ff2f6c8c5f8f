/**
 * What an EKS engineer's first `pulumi up` of a second stack would have hit, re-injected into
 * the captured graph one fault at a time: each is refused by its policy, and by that one alone.
 * Redis user ids shared between stacks (UserAlreadyExists), a Secrets key the cluster role may
 * not use, a ZooKeeper MSK without broker logs, the control plane's log group left to EKS (no
 * retention), Redis nodes left to share an AZ, the L1 namespace without the load balancer's
 * readiness gate; and the warning ahead of the EKS version's end of standard support.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies, type PackConfig } from "../../policies/runner";
import { captureStack, type CapturedResource } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const refusals = async (rs: CapturedResource[], config?: PackConfig) => mandatory(await runPolicies(policies, rs, { config })).map((v) => [v.policy, v.urn, v.message]);
const one = (rs: CapturedResource[], pred: (r: CapturedResource) => boolean): CapturedResource => {
  const found = rs.filter(pred);
  if (found.length !== 1) throw new Error(`expected one resource, found ${found.length}`);
  return found[0];
};
const without = (rs: CapturedResource[], gone: CapturedResource): CapturedResource[] =>
  rs
    .filter((r) => r.urn !== gone.urn)
    .map((r) => ({ ...r, opts: { ...r.opts, dependsOn: r.opts.dependsOn.filter((u) => u !== gone.urn), propertyDependencies: Object.fromEntries(Object.entries(r.opts.propertyDependencies).map(([k, v]) => [k, v.filter((u) => u !== gone.urn)])) } }));

describe("deployability faults, re-injected into the captured stacks", () => {
  let prod: CapturedResource[];
  let staging: CapturedResource[];
  beforeAll(async () => {
    prod = await captureStack("prod");
    staging = await captureStack("staging");
  });

  const cluster = (rs: CapturedResource[]) => one(rs, (r) => r.type === "aws:eks/cluster:Cluster");

  it("passes prod and staging as committed", async () => {
    expect(await refusals(prod)).toEqual([]);
    expect(await refusals(staging)).toEqual([]);
  });

  it("Redis: staging and prod share no ElastiCache user or group id; the user names stay the role names", () => {
    const ids = (rs: CapturedResource[]) => rs.filter((r) => r.type.startsWith("aws:elasticache/user")).map((r) => String((r.props as O).userId ?? (r.props as O).userGroupId));
    expect(ids(prod).length).toBeGreaterThan(2);
    expect(ids(prod).filter((id) => ids(staging).includes(id))).toEqual([]);
    for (const id of ids(prod)) expect(id).toMatch(/^prod-[a-z0-9-]{1,35}$/);
    const names = (rs: CapturedResource[]) => rs.filter((r) => r.type === "aws:elasticache/user:User").map((r) => (r.props as O).userName as string).sort();
    expect(names(prod)).toEqual(names(staging));
    expect(names(prod)).toContain("llmha-agent");
  });

  it("Redis: an id without the stack's name is refused (redis-ids-per-stack)", async () => {
    const broken = structuredClone(staging);
    const u = one(broken, (r) => r.type === "aws:elasticache/user:User" && (r.props as O).userName === "llmha-agent");
    (u.props as O).userId = "redis-llmha-agent";
    expect((await refusals(broken)).map(([p, u]) => [p, u])).toEqual([["redis-ids-per-stack", u.urn]]);
  });

  it("Redis: nodes listed in one AZ, or none listed, are refused (redis-ha-encrypted)", async () => {
    const broken = structuredClone(prod);
    const rg = one(broken, (r) => r.type === "aws:elasticache/replicationGroup:ReplicationGroup");
    const azs = (rg.props as O).preferredCacheClusterAzs as string[];
    expect(new Set(azs).size).toBe(azs.length);
    expect(azs.length).toBe((rg.props as O).numCacheClusters);
    (rg.props as O).preferredCacheClusterAzs = azs.map(() => azs[0]);
    const found = await refusals(broken);
    expect(found.map(([p, u]) => [p, u])).toEqual([["redis-ha-encrypted", rg.urn]]);
    expect(found[0][2]).toMatch(/places its nodes in 1 AZ/);
  });

  it("EKS: a Secrets key the cluster role is not granted is refused (eks-secrets-key-grants-cluster-role)", async () => {
    const grant = one(prod, (r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "eks-cluster-secrets-kms");
    const c = cluster(prod);
    expect(c.opts.dependsOn).toContain(grant.urn);
    const found = await refusals(without(prod, grant));
    expect(found.map(([p, u]) => [p, u])).toEqual([["eks-secrets-key-grants-cluster-role", c.urn]]);
    expect(found[0][2]).toMatch(/is not granted kms:Encrypt, kms:Decrypt, kms:ListGrants, kms:DescribeKey on it/);
    // A grant without kms:Decrypt is no grant.
    const partial = structuredClone(prod);
    const rp = one(partial, (r) => r.urn === grant.urn);
    const doc = JSON.parse(String((rp.props as O).policy)) as { Statement: { Action: string[] }[] };
    doc.Statement[0].Action = doc.Statement[0].Action.filter((a) => a !== "kms:Decrypt");
    (rp.props as O).policy = JSON.stringify(doc);
    expect((await refusals(partial)).map(([p, , m]) => [p, /not granted kms:Decrypt on it/.test(String(m))])).toEqual([["eks-secrets-key-grants-cluster-role", true]]);
  });

  it("EKS: the control plane's log group missing, kept forever, or made after the cluster is refused (eks-control-plane-log-retention)", async () => {
    const group = one(prod, (r) => r.type === "aws:cloudwatch/logGroup:LogGroup" && (r.props as O).name === "/aws/eks/llm-ha-prod/cluster");
    expect((group.props as O).retentionInDays).toBeGreaterThan(0);
    const c = cluster(prod);
    expect((await refusals(without(prod, group))).map(([p, u]) => [p, u])).toEqual([["eks-control-plane-log-retention", c.urn]]);
    const forever = structuredClone(prod);
    delete (one(forever, (r) => r.urn === group.urn).props as O).retentionInDays;
    expect((await refusals(forever)).map(([p, , m]) => [p, m])).toEqual([["eks-control-plane-log-retention", expect.stringMatching(/no retentionInDays \(never expires\)/)]]);
    const unordered = structuredClone(prod);
    const uc = cluster(unordered);
    uc.opts.dependsOn = uc.opts.dependsOn.filter((u) => u !== group.urn);
    expect((await refusals(unordered)).map(([p, , m]) => [p, m])).toEqual([["eks-control-plane-log-retention", expect.stringMatching(/does not depend on its log group/)]]);
  });

  it("EKS: defaults to 1.36; 1.35 is warned 120 days before its end of standard support (eks-version-support-ending)", async () => {
    expect((cluster(prod).props as O).version).toBe("1.36");
    const old = structuredClone(prod);
    (cluster(old).props as O).version = "1.35";
    const v = (await runPolicies(policies, old, { config: { "eks-version-support-ending": { asOf: "2026-12-05" } } })).filter((x) => x.policy === "eks-version-support-ending");
    expect(v.map((x) => [x.enforcementLevel, x.message])).toEqual([["advisory", expect.stringMatching(/^EKS cluster eks-eks: EKS version 1.35 leaves standard support on 2027-03-27, in 112 days/)]]);
    const now = (await runPolicies(policies, prod, { config: { "eks-version-support-ending": { asOf: "2026-12-05" } } })).filter((x) => x.policy === "eks-version-support-ending");
    expect(now).toEqual([]);
  });

  it("MSK: KRaft with broker logs kept 30 days; ZooKeeper or no broker logs is refused (msk-kraft-broker-logs)", async () => {
    const msk = one(prod, (r) => r.type === "aws:msk/cluster:Cluster");
    expect((msk.props as O).kafkaVersion).toMatch(/\.kraft$/);
    expect((msk.props as O).loggingInfo.brokerLogs.cloudwatchLogs.enabled).toBe(true);
    const zk = structuredClone(prod);
    (one(zk, (r) => r.urn === msk.urn).props as O).kafkaVersion = "3.6.0";
    expect((await refusals(zk)).map(([p, u]) => [p, u])).toEqual([["msk-kraft-broker-logs", msk.urn]]);
    const quiet = structuredClone(prod);
    delete (one(quiet, (r) => r.urn === msk.urn).props as O).loggingInfo;
    expect((await refusals(quiet)).map(([p, , m]) => [p, m])).toEqual([["msk-kraft-broker-logs", expect.stringMatching(/sends no broker logs/)]]);
    const logs = one(prod, (r) => r.type === "aws:cloudwatch/logGroup:LogGroup" && r.name === "kafka-broker-logs");
    const forever = structuredClone(prod);
    delete (one(forever, (r) => r.urn === logs.urn).props as O).retentionInDays;
    expect((await refusals(forever)).map(([p, , m]) => [p, m])).toEqual([["msk-kraft-broker-logs", expect.stringMatching(/has no retentionInDays/)]]);
  });

  it("L1: the edge namespace without the readiness-gate label is refused (ip-targets-readiness-gate)", async () => {
    const broken = structuredClone(prod);
    const ns = one(broken, (r) => r.type === "kubernetes:core/v1:Namespace" && (r.props as O).metadata.name === "llm-ha-edge");
    expect((ns.props as O).metadata.labels["elbv2.k8s.aws/pod-readiness-gate-inject"]).toBe("enabled");
    delete (ns.props as O).metadata.labels["elbv2.k8s.aws/pod-readiness-gate-inject"];
    const found = await refusals(broken);
    expect(found.map(([p, u]) => [p, u])).toEqual([["ip-targets-readiness-gate", ns.urn]]);
    expect(found[0][2]).toMatch(/^Namespace llm-ha-edge holds an NLB with IP targets/);
  });
});
