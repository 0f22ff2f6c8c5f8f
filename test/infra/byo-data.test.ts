/**
 * The byo stack adopting its data tier (`llm-ha:redis.existing`, `llm-ha:kafka.existing`): no
 * replication group, MSK cluster or anything around them of the stack's own; one RBAC user per
 * workload role joined to the given user group, the clients' ingress rules on the given security
 * groups, the clients pointed at the adopted primary and brokers, and the pack clean over it.
 * Plus the settings the program refuses beside `existing`.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { WORKLOAD_ROLE_NAMES } from "../../contracts/redis-roles";
import { captureStack, captureStackGraph, MOCK_ADOPTED, type CapturedInvoke, type CapturedResource } from "../../infra/capture";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";
import { settled } from "../policies/fixtures";
import { stackFailureLines } from "./stack-failure";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const REDIS = { replicationGroupId: "platform-redis", userGroupId: "platform-users", securityGroupId: "sg-0aa11bb22cc33dd44" };
const KAFKA_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/platform-msk/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-2";
const KAFKA = { clusterArn: KAFKA_ARN, securityGroupId: "sg-0ee55ff66aa77bb88" };
const ADOPT = { "llm-ha:redis": JSON.stringify({ existing: REDIS }), "llm-ha:kafka": JSON.stringify({ existing: KAFKA }) };

const ofType = (rs: CapturedResource[], t: string) => rs.filter((r) => r.type === t);
const secret = (rs: CapturedResource[], name: string) => rs.find((r) => r.type === "kubernetes:core/v1:Secret" && (r.props as O).metadata.name === name)!.props as O;
const INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule";

const failure = (overrides: Record<string, string>): Promise<string[]> => stackFailureLines(overrides, "byo");

describe("byo stack adopting Redis and MSK", () => {
  let rs: CapturedResource[];
  let invokes: CapturedInvoke[];
  beforeAll(async () => {
    ({ resources: rs, invokes } = await captureStackGraph("byo", { ...ADOPT, "llm-ha:gameday": JSON.stringify({ enabled: true }) }));
  });

  it("creates no replication group, MSK cluster, nor their subnet group, parameters, configuration, logs, keys or security groups", () => {
    expect(rs.length).toBeGreaterThan(100);
    const types = new Set(rs.map((r) => r.type));
    for (const t of ["aws:elasticache/replicationGroup:ReplicationGroup", "aws:elasticache/subnetGroup:SubnetGroup", "aws:elasticache/parameterGroup:ParameterGroup", "aws:elasticache/userGroup:UserGroup", "aws:msk/cluster:Cluster", "aws:msk/configuration:Configuration"]) {
      expect(types.has(t), t).toBe(false);
    }
    const names = rs.map((r) => r.name);
    for (const n of ["redis-sg", "redis-kms", "kafka-sg", "kafka-kms", "kafka-broker-logs", "redis-user-default"]) expect(names, n).not.toContain(n);
    // Read by data source instead.
    expect(invokes.filter((i) => i.token === "aws:elasticache/getReplicationGroup:getReplicationGroup").map((i) => i.args.replicationGroupId)).toEqual([REDIS.replicationGroupId]);
    expect(invokes.filter((i) => i.token === "aws:msk/getBootstrapBrokers:getBootstrapBrokers").map((i) => i.args.clusterArn)).toEqual([KAFKA_ARN]);
  });

  it("creates one RBAC user per workload role and joins each to the given user group", () => {
    const users = ofType(rs, "aws:elasticache/user:User");
    expect(users.map((u) => u.props.userName).sort()).toEqual([...WORKLOAD_ROLE_NAMES].sort());
    const members = ofType(rs, "aws:elasticache/userGroupAssociation:UserGroupAssociation");
    expect(members).toHaveLength(WORKLOAD_ROLE_NAMES.length);
    for (const m of members) expect(m.props.userGroupId).toBe(REDIS.userGroupId);
    expect(members.map((m) => m.props.userId).sort()).toEqual(users.map((u) => u.props.userId).sort());
  });

  it("lets the clients' security groups in on the given groups, by reference: Redis from the GPU nodes, L1 and controller pods; MSK from L1", () => {
    const on = (sg: string) => ofType(rs, INGRESS).filter((r) => r.props.securityGroupId === sg).map((r) => [r.props.referencedSecurityGroupId, r.props.fromPort, r.props.toPort, r.props.cidrIpv4]);
    expect(on(REDIS.securityGroupId).sort()).toEqual([
      ["fence-controller-pods-id", 6379, 6379, undefined],
      ["fence-gpu-nodes-id", 6379, 6379, undefined],
      ["fence-l1-pods-id", 6379, 6379, undefined],
    ]);
    expect(on(KAFKA.securityGroupId)).toEqual([["fence-l1-pods-id", 9098, 9098, undefined]]);
  });

  it("points every Redis client at the adopted primary, each as its own role over TLS", () => {
    const primary = MOCK_ADOPTED.primaryEndpoint(REDIS.replicationGroupId);
    for (const role of ["agent", "controller", "fallback", "edge"]) {
      expect(secret(rs, `llm-ha-redis-${role}`).stringData.endpoint).toBe(`rediss://llmha-${role}@${primary}:6379`);
    }
  });

  it("gives the fallback the adopted cluster's IAM brokers and scopes its IAM policy to that cluster", () => {
    const l1 = JSON.stringify(ofType(rs, "kubernetes:apps/v1:Deployment").map((d) => d.props));
    expect(l1).toContain(JSON.stringify({ name: "LLMHA_KAFKA_BROKERS", value: MOCK_ADOPTED.bootstrapBrokers(KAFKA_ARN) }));
    const policy = JSON.parse(String(rs.find((r) => r.name === "fallback-msk")!.props.policy)).Statement as O[];
    expect(policy.find((s) => s.Sid === "Cluster")!.Resource).toBe(KAFKA_ARN);
    expect(policy.find((s) => s.Sid === "QueueTopic")!.Resource).toMatch(/^arn:aws:kafka:us-east-1:123456789012:topic\/platform-msk\/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-2\//);
  });

  it("aims the game day's Redis failover at the adopted group", () => {
    const st = JSON.parse(String(rs.find((r) => r.name === "gameday-redis-failover-policy")!.props.policy)).Statement as O[];
    expect(st.find((x) => x.Sid === "InterruptStackRedis")!.Resource).toEqual([
      `arn:aws:elasticache:us-east-1:123456789012:replicationgroup:${REDIS.replicationGroupId}`,
      `arn:aws:elasticache:us-east-1:123456789012:cluster:${REDIS.replicationGroupId}-*`,
    ]);
  });

  it("passes the policy pack; and the pack still sees a role user left out of the group, and a CIDR on the adopted Redis group", async () => {
    expect((await runPolicies(policies, rs)).filter(settled).map((v) => `${v.enforcementLevel} ${v.policy}: ${v.message}`)).toEqual([]);
    const broken = structuredClone(rs);
    const edge = broken.find((r) => r.type === "aws:elasticache/userGroupAssociation:UserGroupAssociation" && r.name === "redis-member-llmha-edge")!;
    broken.splice(broken.indexOf(edge), 1);
    const rule = broken.find((r) => r.type === INGRESS && r.props.securityGroupId === REDIS.securityGroupId)!;
    delete rule.props.referencedSecurityGroupId;
    rule.props.cidrIpv4 = "10.50.0.0/16";
    const edgeUser = broken.find((r) => r.type === "aws:elasticache/user:User" && r.props.userName === "llmha-edge")!;
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([
      ["redis-role-users-in-group", edgeUser.urn],
      ["redis-role-users-in-group", undefined],
      ["data-ingress-by-security-group", rule.urn],
    ]);
  });
});

describe("a stack with its own cluster adopting Redis and MSK (dev)", () => {
  it("adopts them as the byo stack does: no store of its own, the role users in the given group, the rules on the given groups", async () => {
    const rs = await captureStack("dev", ADOPT);
    expect(ofType(rs, "aws:eks/cluster:Cluster")).toHaveLength(1);
    expect(ofType(rs, "aws:elasticache/replicationGroup:ReplicationGroup")).toEqual([]);
    expect(ofType(rs, "aws:msk/cluster:Cluster")).toEqual([]);
    expect(ofType(rs, "aws:elasticache/userGroupAssociation:UserGroupAssociation").map((a) => a.props.userGroupId)).toEqual(WORKLOAD_ROLE_NAMES.map(() => REDIS.userGroupId));
    expect(ofType(rs, INGRESS).filter((r) => [REDIS.securityGroupId, KAFKA.securityGroupId].includes(String(r.props.securityGroupId)))).toHaveLength(4);
    expect(secret(rs, "llm-ha-redis-agent").stringData.endpoint).toBe(`rediss://llmha-agent@${MOCK_ADOPTED.primaryEndpoint(REDIS.replicationGroupId)}:6379`);
  });
});

describe("llm-ha:redis.existing and llm-ha:kafka.existing refused", () => {
  it("refuse the settings that size a created store, naming why", async () => {
    const errs = await failure({
      "llm-ha:redis": JSON.stringify({ existing: REDIS, nodeType: "cache.r7g.large", replicas: 3 }),
      "llm-ha:kafka": JSON.stringify({ existing: KAFKA, brokersPerAz: 1, instanceType: "kafka.m7g.large", volumeSizeGb: 100, version: "3.9.x.kraft" }),
    });
    expect(errs).toEqual([
      "llm-ha:redis.nodeType: does not apply with llm-ha:redis.existing: the adopted replication group's node type is its own; remove it",
      "llm-ha:redis.replicas: does not apply with llm-ha:redis.existing: the adopted replication group's replicas are its own (llm-ha preflight checks failover and Multi-AZ); remove it",
      "llm-ha:kafka.brokersPerAz: does not apply with llm-ha:kafka.existing: the adopted cluster's brokers are its own (llm-ha preflight checks ≥ 3 brokers over ≥ 2 AZs); remove it",
      "llm-ha:kafka.instanceType: does not apply with llm-ha:kafka.existing: the adopted cluster's broker type is its own; remove it",
      "llm-ha:kafka.volumeSizeGb: does not apply with llm-ha:kafka.existing: the adopted cluster's storage is its own; remove it",
      "llm-ha:kafka.version: does not apply with llm-ha:kafka.existing: the adopted cluster's Kafka version is its own; remove it",
    ]);
  });

  it("refuse malformed ids, a cluster in another region and unknown keys, naming how to find each", async () => {
    const errs = await failure({
      "llm-ha:redis": JSON.stringify({ existing: { replicationGroupId: "Platform_Redis", userGroupId: "platform-users", securityGroupId: "platform-sg", extra: 1 } }),
      "llm-ha:kafka": JSON.stringify({ existing: { clusterArn: "arn:aws:kafka:eu-west-1:123456789012:cluster/platform-msk/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-2", securityGroupId: "sg-0ee55ff66aa77bb88" } }),
    });
    expect(errs[0]).toMatch(/^llm-ha:redis\.existing\.replicationGroupId: "Platform_Redis" is malformed: the replication group's id \(aws elasticache describe-replication-groups/);
    expect(errs[1]).toMatch(/^llm-ha:redis\.existing\.securityGroupId: "platform-sg" is malformed: sg-…/);
    expect(errs[2]).toBe("llm-ha:redis.existing.extra: unknown key; known: replicationGroupId, userGroupId, securityGroupId");
    expect(errs[3]).toBe("llm-ha:kafka.existing.clusterArn: is in eu-west-1, not the stack's region us-east-1: the L1 pods reach MSK inside the cluster's VPC only");
    expect(errs).toHaveLength(4);
    expect((await failure({ "llm-ha:kafka": JSON.stringify({ existing: { securityGroupId: "sg-0ee55ff66aa77bb88" } }) }))[0]).toMatch(/^llm-ha:kafka\.existing\.clusterArn: is required: arn:aws:kafka:<region>/);
  });

  it("refuse the shared AUTH token beside an adopted Redis, and still require the role passwords", async () => {
    const errs = await failure({ "llm-ha:redis": JSON.stringify({ existing: REDIS }), "llm-ha:redisRolePasswords": "", "llm-ha:redisAuthToken": "test-token-0123456789abcdef" });
    expect(errs).toHaveLength(2);
    expect(errs[0]).toMatch(/^llm-ha:redisAuthToken: does not apply with llm-ha:redis\.existing: an AUTH token shared by every node and pod holds every command and every key/);
    expect(errs[1]).toMatch(/^llm-ha:redisRolePasswords: is required: one password per Redis role/);
  });
});
