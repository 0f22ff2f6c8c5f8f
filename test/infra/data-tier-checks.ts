/**
 * The data tier of each stack: ElastiCache Redis (the registry, the lease, the fallback's state)
 * and MSK (the L4 queue). Called inside `describeStack`, so each runs for dev, staging and prod.
 */
import { expect, it } from "vitest";
import { ofType, stackConfig, TEST_REDIS_TOKEN, type CapturedResource, type Env } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

export function describeDataTier(env: Env, resources: () => CapturedResource[]): void {
  const azs = JSON.parse(stackConfig(env)["llm-ha:azs"]) as string[];
  const props = (type: string) => ofType(resources(), type).map((r) => r.props as O);

  it("runs Redis Multi-AZ with failover, TLS required, KMS at rest, per-role users (no AUTH token), reachable from its clients' groups only", () => {
    const [rg] = props("aws:elasticache/replicationGroup:ReplicationGroup");
    expect(rg).toMatchObject({ multiAzEnabled: true, automaticFailoverEnabled: true, transitEncryptionEnabled: true, transitEncryptionMode: "required", atRestEncryptionEnabled: true });
    // Roles by default: the stack file names no Redis credential, the offline run fills llm-ha:redisRolePasswords.
    expect(rg.userGroupIds).toEqual([props("aws:elasticache/userGroup:UserGroup")[0].userGroupId]);
    expect(rg.authToken).toBeUndefined();
    expect(JSON.stringify(resources())).not.toContain(TEST_REDIS_TOKEN);
    expect(rg.kmsKeyId).toBeTruthy();
    expect(rg.numCacheClusters).toBeGreaterThanOrEqual(2);
    // The lease, the fence and node records are never evicted (ElastiCache's default is volatile-lru); functions need Redis 7.
    const [pg] = props("aws:elasticache/parameterGroup:ParameterGroup");
    expect(pg).toMatchObject({ family: "redis7", parameters: [{ name: "maxmemory-policy", value: "noeviction" }] });
    expect(rg.parameterGroupName).toBe("redis-params");
    expect(Number(String(rg.engineVersion).split(".")[0])).toBeGreaterThanOrEqual(7);
    const rules = props("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").filter((r) => r.fromPort === 6379);
    // The agents' GPU nodes, the L1 pods and the controller's pods by group; no CIDR, not the cluster's group.
    expect(rules.map((r) => r.referencedSecurityGroupId).sort()).toEqual(["fence-controller-pods-id", "fence-gpu-nodes-id", "fence-l1-pods-id"]);
    for (const r of rules) expect(r.cidrIpv4).toBeUndefined();
  });

  it("runs MSK with brokers a multiple of the AZs, TLS everywhere, IAM auth only, RF 3 / min ISR 2", () => {
    const [msk] = props("aws:msk/cluster:Cluster");
    expect(msk.numberOfBrokerNodes % azs.length).toBe(0);
    expect(msk.encryptionInfo.encryptionInTransit).toEqual({ clientBroker: "TLS", inCluster: true });
    expect(msk.clientAuthentication).toEqual({ sasl: { iam: true }, unauthenticated: false });
    const [conf] = props("aws:msk/configuration:Configuration");
    expect(conf.serverProperties).toContain("default.replication.factor=3");
    expect(conf.serverProperties).toContain("min.insync.replicas=2");
  });
}
