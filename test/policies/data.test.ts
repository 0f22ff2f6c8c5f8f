import { describe, expect, it } from "vitest";
import { mskHaEncrypted, redisHaEncrypted } from "../../policies/data";
import { at, changed, happyStack, messages } from "./fixtures";

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
    ["no auth token", (p) => delete p.authToken, "Redis registry has no authToken."],
  ];
  for (const [what, change, message] of cases) {
    it(`fails with ${what}`, async () => {
      expect(await messages(redisHaEncrypted, changed("registry", change))).toEqual([message]);
    });
  }

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
