import { describe, expect, it } from "vitest";
import { isKraftVersion, mskHaEncrypted, mskKraftBrokerLogs, redisHaEncrypted, redisIdsPerStack, redisRolesRequired } from "../../policies/data";
import type { CapturedResource } from "../../policies/runner";
import { at, changed, happyStack, messages } from "./fixtures";

describe("redis-roles-required", () => {
  const tokenOnly = (env: string) => changed("registry", (p) => ((p.authToken = "0123456789abcdef0123"), delete p.userGroupIds, (p.tags = { Project: "llm-ha", Environment: env })));

  it("passes a group with per-role users", async () => {
    expect(await messages(redisRolesRequired, happyStack())).toEqual([]);
  });

  for (const env of ["prod", "staging"]) {
    it(`refuses the AUTH token alone in ${env}, naming the setting to use`, async () => {
      const found = await messages(redisRolesRequired, tokenOnly(env));
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(new RegExp(`^Redis registry \\(${env}\\) authenticates with the AUTH token alone: .*Set llm-ha:redisRolePasswords`));
    });
  }

  it("lets dev migrate on the token alone (tokenOnlyEnvironments), and no other stack", async () => {
    expect(await messages(redisRolesRequired, tokenOnly("dev"))).toEqual([]);
    expect(await messages(redisRolesRequired, tokenOnly("dev"), { "redis-roles-required": { tokenOnlyEnvironments: [] } })).toHaveLength(1);
  });
});

describe("redis-ha-encrypted", () => {
  it("passes a multi-AZ, failover, TLS, encrypted, authenticated group", async () => {
    expect(await messages(redisHaEncrypted, happyStack())).toEqual([]);
  });

  const cases: [string, (p: Record<string, unknown>) => void, string][] = [
    ["no automatic failover", (p) => (p.automaticFailoverEnabled = false), "Redis registry must set automaticFailoverEnabled to true."],
    ["single AZ", (p) => delete p.multiAzEnabled, "Redis registry must set multiAzEnabled to true."],
    ["one node", (p) => (p.numCacheClusters = 1), "Redis registry has 1 cache clusters; it needs at least 2."],
    ["no TLS", (p) => (p.transitEncryptionEnabled = false), "Redis registry must set transitEncryptionEnabled to true."],
    ["TLS preferred, not required", (p) => (p.transitEncryptionMode = "preferred"), 'Redis registry has transitEncryptionMode "preferred"; TLS must be required.'],
    ["no at-rest encryption", (p) => delete p.atRestEncryptionEnabled, "Redis registry must set atRestEncryptionEnabled to true."],
    ["neither a user group nor an auth token", (p) => delete p.userGroupIds, "Redis registry has neither an RBAC user group (userGroupIds) nor an authToken: set llm-ha:redisRolePasswords."],
    [
      "every node in one AZ",
      (p) => (p.preferredCacheClusterAzs = ["us-east-1a", "us-east-1a", "us-east-1a"]),
      "Redis registry places its nodes in 1 AZ (us-east-1a); list one AZ per node over at least 2 AZs, so the primary and a replica never share one.",
    ],
    [
      "no preferredCacheClusterAzs",
      (p) => delete p.preferredCacheClusterAzs,
      "Redis registry places its nodes in no named AZ (no preferredCacheClusterAzs); list one AZ per node over at least 2 AZs, so the primary and a replica never share one.",
    ],
    ["fewer AZs listed than nodes", (p) => (p.preferredCacheClusterAzs = ["us-east-1a", "us-east-1b"]), "Redis registry lists 2 preferredCacheClusterAzs for 3 cache clusters; ElastiCache takes one per node."],
    ["an empty user group list", (p) => (p.userGroupIds = []), "Redis registry has neither an RBAC user group (userGroupIds) nor an authToken: set llm-ha:redisRolePasswords."],
  ];
  for (const [what, change, message] of cases) {
    it(`fails with ${what}`, async () => {
      expect(await messages(redisHaEncrypted, changed("registry", change))).toEqual([message]);
    });
  }

  it("passes the old AUTH token in place of a user group (transit encryption still required)", async () => {
    const tokenOnly = changed("registry", (p) => ((p.authToken = "0123456789abcdef0123"), delete p.userGroupIds));
    expect(await messages(redisHaEncrypted, tokenOnly)).toEqual([]);
    const clear = changed("registry", (p) => ((p.authToken = "0123456789abcdef0123"), delete p.userGroupIds, (p.transitEncryptionEnabled = false)));
    expect(await messages(redisHaEncrypted, clear)).toEqual(["Redis registry must set transitEncryptionEnabled to true."]);
  });

  it("counts one shard's primary + replicas", async () => {
    const rs = changed("registry", (p) => {
      delete p.numCacheClusters;
      p.numNodeGroups = 1;
      p.replicasPerNodeGroup = 1;
    });
    expect(await messages(redisHaEncrypted, rs)).toEqual([]);
  });

  const CLUSTER = "Redis registry must run with cluster mode disabled (one primary and its replicas): llm-ha's scripts need every key on one node.";
  for (const [what, change] of [
    ["several shards", (p: Record<string, unknown>) => ((p.numNodeGroups = 3), (p.replicasPerNodeGroup = 1), delete p.numCacheClusters)],
    ["cluster mode enabled", (p: Record<string, unknown>) => (p.clusterMode = "enabled")],
    ["cluster mode compatible", (p: Record<string, unknown>) => (p.clusterMode = "compatible")],
    ["a cluster-on parameter group", (p: Record<string, unknown>) => (p.parameterGroupName = "default.redis7.cluster.on")],
  ] as const) {
    it(`fails with ${what}`, async () => {
      expect(await messages(redisHaEncrypted, changed("registry", change))).toEqual([CLUSTER]);
    });
  }
});

describe("msk-ha-encrypted", () => {
  it("passes 3 brokers over 3 subnets with TLS and IAM", async () => {
    expect(await messages(mskHaEncrypted, happyStack())).toEqual([]);
  });

  const cases: [string, (p: Record<string, unknown>) => void, string[]][] = [
    ["4 brokers over 3 subnets", (p) => (p.numberOfBrokerNodes = 4), ["MSK queue has 4 brokers, not a multiple of its 3 client subnets."]],
    [
      "one client subnet",
      (p) => (at(p, "brokerNodeGroupInfo").clientSubnets = ["private-us-east-1a-id"]),
      ["MSK queue has 1 client subnets; it needs at least 2."],
    ],
    [
      "plaintext to clients",
      (p) => (at(p, "encryptionInfo.encryptionInTransit").clientBroker = "TLS_PLAINTEXT"),
      ["MSK queue has clientBroker encryption TLS_PLAINTEXT; it must be TLS."],
    ],
    [
      "plaintext between brokers",
      (p) => (at(p, "encryptionInfo.encryptionInTransit").inCluster = false),
      ["MSK queue must encrypt in-cluster traffic (inCluster true)."],
    ],
    [
      "no IAM auth",
      (p) => (at(p, "clientAuthentication").sasl = { scram: true }),
      ["MSK queue must enable IAM client authentication (sasl.iam).", "MSK queue enables SASL/SCRAM; IAM must be its only client authentication."],
    ],
    ["unauthenticated access", (p) => (at(p, "clientAuthentication").unauthenticated = true), ["MSK queue allows unauthenticated access."]],
  ];
  for (const [what, change, expected] of cases) {
    it(`fails with ${what}`, async () => {
      expect(await messages(mskHaEncrypted, changed("queue", change))).toEqual(expected);
    });
  }

  it("takes unset transit encryption as the provider default (TLS, in-cluster)", async () => {
    expect(await messages(mskHaEncrypted, changed("queue", (p) => delete p.encryptionInfo))).toEqual([]);
  });
});

describe("redis-ids-per-stack", () => {
  const user = (userId: string, env = "staging"): CapturedResource => ({
    type: "aws:elasticache/user:User",
    name: "redis-user-llmha-agent",
    urn: "urn:pulumi:staging::llm-ha::aws:elasticache/user:User::redis-user-llmha-agent",
    props: { userId, userName: "llmha-agent", engine: "redis", tags: { Project: "llm-ha", Environment: env } },
  });
  const group = (userGroupId: string): CapturedResource => ({
    type: "aws:elasticache/userGroup:UserGroup",
    name: "redis-users",
    urn: "urn:pulumi:staging::llm-ha::aws:elasticache/userGroup:UserGroup::redis-users",
    props: { userGroupId, engine: "redis", tags: { Project: "llm-ha", Environment: "staging" } },
  });

  it("passes ids that begin with the stack's name; the user name stays the role's", async () => {
    expect(await messages(redisIdsPerStack, [user("staging-redis-llmha-agent"), group("staging-redis-llmha")])).toEqual([]);
  });

  it("refuses ids another stack would share (UserAlreadyExists)", async () => {
    expect(await messages(redisIdsPerStack, [user("redis-llmha-agent"), group("redis-llmha")])).toEqual([
      'ElastiCache userId "redis-llmha-agent" of redis-user-llmha-agent does not begin with the stack\'s name (staging-): ids are unique per account and region, so another stack with the same id fails with UserAlreadyExists.',
      'ElastiCache userGroupId "redis-llmha" of redis-users does not begin with the stack\'s name (staging-): ids are unique per account and region, so another stack with the same id fails with UserAlreadyExists.',
    ]);
  });
});

describe("msk-kraft-broker-logs", () => {
  it("passes a KRaft cluster logging to a group with a retention", async () => {
    expect(await messages(mskKraftBrokerLogs, happyStack())).toEqual([]);
    for (const v of ["3.7.x.kraft", "3.9.x.kraft", "4.0.x.kraft", "4.1.x"]) expect(isKraftVersion(v), v).toBe(true);
    for (const v of ["3.6.0", "3.7.x", "3.9.x", "2.8.1"]) expect(isKraftVersion(v), v).toBe(false);
  });

  it("refuses a ZooKeeper version (the old default 3.6.0)", async () => {
    expect(await messages(mskKraftBrokerLogs, changed("queue", (p) => (p.kafkaVersion = "3.6.0")))).toEqual([
      'MSK queue runs Kafka "3.6.0" on ZooKeeper; use a KRaft version (3.9.x.kraft, llm-ha:kafka.version). KRaft is chosen at creation only: the cluster is replaced.',
    ]);
  });

  it("refuses a cluster without broker logs, and a log group kept forever", async () => {
    expect(await messages(mskKraftBrokerLogs, changed("queue", (p) => delete p.loggingInfo))).toEqual([
      "MSK queue sends no broker logs (loggingInfo.brokerLogs): turn on CloudWatch logs to a log group with a retention.",
    ]);
    expect(await messages(mskKraftBrokerLogs, changed("queue-broker-logs", (p) => delete p.retentionInDays))).toEqual([
      "MSK queue logs to log group queue-broker-logs, which has no retentionInDays: its events are kept (and billed) forever.",
    ]);
  });
});
