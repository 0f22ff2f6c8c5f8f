/**
 * `llm-ha preflight --online` over an adopted Redis and MSK (infra/preflight/data-tier.ts), driven
 * by a fake `aws` CLI that answers as the real one does (JSON, a coded AwsCliError for a missing
 * resource): a ready group and cluster pass; each setting llm-ha relies on, when wrong, is one
 * named finding with the command that fixes it.
 */
import { describe, expect, it } from "vitest";
import type { ExistingKafkaConfig, ExistingRedisConfig } from "../../infra/config/data";
import { KAFKA_SERVER_PROPERTIES } from "../../infra/kafka";
import { AwsCliError, type AwsCli } from "../../infra/preflight/aws-cli";
import type { CheckRow } from "../../infra/preflight/checks";
import type { StackConfig } from "../../infra/config";
import { adoptedDataChecks, adoptedMskRows, adoptedRedisRows, serverProperties } from "../../infra/preflight/data-tier";

type O = Record<string, unknown>;
const REDIS: ExistingRedisConfig = { replicationGroupId: "platform-redis", userGroupId: "platform-users", securityGroupId: "sg-0aa11bb22cc33dd44" };
const ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/platform-msk/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-2";
const KAFKA: ExistingKafkaConfig = { clusterArn: ARN, securityGroupId: "sg-0ee55ff66aa77bb88" };
const CONFIG_ARN = "arn:aws:kafka:us-east-1:123456789012:configuration/platform/1a2b";

const readyGroup = (): O => ({
  ReplicationGroupId: "platform-redis", Status: "available", MemberClusters: ["platform-redis-001", "platform-redis-002"], AutomaticFailover: "enabled", MultiAZ: "enabled",
  ClusterEnabled: false, ClusterMode: "disabled", TransitEncryptionEnabled: true, TransitEncryptionMode: "required", AtRestEncryptionEnabled: true, UserGroupIds: ["platform-users"],
});
const readyNode = (): O => ({ CacheClusterId: "platform-redis-001", Engine: "redis", EngineVersion: "7.1.0", CacheParameterGroup: { CacheParameterGroupName: "platform-redis7" }, SecurityGroups: [{ SecurityGroupId: "sg-0aa11bb22cc33dd44", Status: "active" }] });
const readyCluster = (): O => ({
  ClusterArn: ARN, ClusterName: "platform-msk", ClusterType: "PROVISIONED", CurrentVersion: "K3AEGXETSR30VB", State: "ACTIVE",
  Provisioned: {
    NumberOfBrokerNodes: 3,
    BrokerNodeGroupInfo: { ClientSubnets: ["subnet-a", "subnet-b", "subnet-c"], SecurityGroups: ["sg-0ee55ff66aa77bb88"], ZoneIds: ["use1-az4", "use1-az6", "use1-az1"] },
    ClientAuthentication: { Sasl: { Iam: { Enabled: true }, Scram: { Enabled: false } }, Unauthenticated: { Enabled: false } },
    EncryptionInfo: { EncryptionInTransit: { ClientBroker: "TLS", InCluster: true } },
    CurrentBrokerSoftwareInfo: { ConfigurationArn: CONFIG_ARN, ConfigurationRevision: 4, KafkaVersion: "3.9.x.kraft" },
  },
});

/** Answers by "<service> <operation>"; `parameters` is the maxmemory-policy; the CLI prints a blob as base64. */
function fakeCli(o: { group?: O | AwsCliError; node?: O; policy?: string; cluster?: O | AwsCliError; properties?: string } = {}): { cli: AwsCli; calls: string[][] } {
  const calls: string[][] = [];
  const cli: AwsCli = async (args) => {
    calls.push(args);
    const answer = (v: O | AwsCliError | undefined, wrap: (x: O) => O) => {
      if (v instanceof AwsCliError) throw v;
      return wrap(v ?? {});
    };
    switch (`${args[0]} ${args[1]}`) {
      case "elasticache describe-replication-groups":
        return answer(o.group ?? readyGroup(), (g) => ({ ReplicationGroups: [g] }));
      case "elasticache describe-cache-clusters":
        return { CacheClusters: [o.node ?? readyNode()] };
      case "elasticache describe-cache-parameters":
        return { Parameters: [{ ParameterName: "maxmemory-policy", ParameterValue: o.policy ?? "noeviction" }, { ParameterName: "maxmemory-samples", ParameterValue: "3" }] };
      case "kafka describe-cluster-v2":
        return answer(o.cluster ?? readyCluster(), (c) => ({ ClusterInfo: c }));
      case "kafka describe-configuration-revision":
        return { Arn: CONFIG_ARN, Revision: 4, ServerProperties: Buffer.from(o.properties ?? `# platform\nlog.retention.hours=168\n${KAFKA_SERVER_PROPERTIES}\n`).toString("base64") };
      default:
        throw new Error(`unexpected aws ${args.join(" ")}`);
    }
  };
  return { cli, calls };
}

const bad = (rows: CheckRow[]) => rows.filter((r) => r.status !== "ok");

describe("adopted Redis", () => {
  it("passes a ready group: TLS required, failover, Multi-AZ, one shard, the user group, Redis 7, its security group, noeviction", async () => {
    const { cli, calls } = fakeCli();
    const rows = await adoptedRedisRows(REDIS, cli);
    expect(rows.map((r) => [r.check, r.status])).toEqual(
      ["TLS", "failover", "Multi-AZ", "cluster mode", "user group", "engine", "security group", "eviction"].map((w) => [`adopted Redis ${w}`, "ok"]),
    );
    expect(calls).toEqual([
      ["elasticache", "describe-replication-groups", "--replication-group-id", "platform-redis"],
      ["elasticache", "describe-cache-clusters", "--cache-cluster-id", "platform-redis-001"],
      ["elasticache", "describe-cache-parameters", "--cache-parameter-group-name", "platform-redis7"],
    ]);
  });

  it("names a group that is not there", async () => {
    const { cli } = fakeCli({ group: new AwsCliError("aws elasticache describe-replication-groups: An error occurred (ReplicationGroupNotFoundFault)", "ReplicationGroupNotFoundFault") });
    expect(await adoptedRedisRows(REDIS, cli)).toEqual([
      { check: "adopted Redis platform-redis", status: "missing", detail: "no replication group platform-redis in this account and region", fix: "set llm-ha:redis.existing.replicationGroupId to one of: aws elasticache describe-replication-groups --query 'ReplicationGroups[].ReplicationGroupId'" },
    ]);
  });

  it("flags each setting llm-ha relies on, with the command that fixes it", async () => {
    const { cli } = fakeCli({
      group: { ...readyGroup(), TransitEncryptionMode: "preferred", AutomaticFailover: "disabled", MultiAZ: "disabled", ClusterEnabled: true, ClusterMode: "enabled", UserGroupIds: ["other"] },
      node: { ...readyNode(), EngineVersion: "6.2.6", CacheParameterGroup: { CacheParameterGroupName: "default.redis6.x" }, SecurityGroups: [{ SecurityGroupId: "sg-0999" }] },
      policy: "volatile-lru",
    });
    const rows = bad(await adoptedRedisRows(REDIS, cli));
    expect(rows.map((r) => r.check)).toEqual(["TLS", "failover", "Multi-AZ", "cluster mode", "user group", "engine", "security group", "eviction"].map((w) => `adopted Redis ${w}`));
    expect(rows.every((r) => r.status === "invalid")).toBe(true);
    const fix = (w: string) => rows.find((r) => r.check === `adopted Redis ${w}`)!.fix;
    expect(fix("TLS")).toBe("aws elasticache modify-replication-group --replication-group-id platform-redis --transit-encryption-mode required --apply-immediately");
    expect(fix("failover")).toBe("aws elasticache modify-replication-group --replication-group-id platform-redis --automatic-failover-enabled --apply-immediately");
    expect(fix("Multi-AZ")).toBe("aws elasticache modify-replication-group --replication-group-id platform-redis --multi-az-enabled --apply-immediately");
    expect(fix("user group")).toBe("aws elasticache modify-replication-group --replication-group-id platform-redis --user-group-ids-to-add platform-users --apply-immediately");
    expect(fix("engine")).toMatch(/--engine-version 7\.1 --apply-immediately/);
    // A default parameter group cannot be changed: the fix makes one, sets noeviction and attaches it.
    expect(fix("eviction")).toMatch(/^aws elasticache create-cache-parameter-group --cache-parameter-group-name llm-ha-redis7 .*ParameterName=maxmemory-policy,ParameterValue=noeviction; .*--cache-parameter-group-name llm-ha-redis7 --apply-immediately$/);
    expect(rows.find((r) => r.check === "adopted Redis eviction")!.detail).toMatch(/maxmemory-policy volatile-lru .*the leader lease, the fencing keys and the node records carry TTLs/);
  });

  it("fixes noeviction in place on a parameter group of the operator's", async () => {
    const { cli } = fakeCli({ policy: "volatile-lru" });
    expect(bad(await adoptedRedisRows(REDIS, cli))).toEqual([
      expect.objectContaining({ check: "adopted Redis eviction", status: "invalid", fix: "aws elasticache modify-cache-parameter-group --cache-parameter-group-name platform-redis7 --parameter-name-values ParameterName=maxmemory-policy,ParameterValue=noeviction" }),
    ]);
  });
});

describe("adopted MSK", () => {
  it("passes a ready cluster: IAM auth, TLS, 3 brokers over 3 AZs, its security group, llm-ha's server properties", async () => {
    const { cli, calls } = fakeCli();
    expect((await adoptedMskRows(KAFKA, cli)).map((r) => [r.check, r.status])).toEqual(["IAM auth", "TLS", "brokers", "security group", "server properties"].map((w) => [`adopted MSK ${w}`, "ok"]));
    expect(calls.at(-1)).toEqual(["kafka", "describe-configuration-revision", "--arn", CONFIG_ARN, "--revision", "4"]);
  });

  it("names a cluster that is not there", async () => {
    const { cli } = fakeCli({ cluster: new AwsCliError("aws kafka describe-cluster-v2: An error occurred (NotFoundException)", "NotFoundException") });
    expect((await adoptedMskRows(KAFKA, cli)).map((r) => [r.check, r.status])).toEqual([["adopted MSK platform-msk", "missing"]]);
  });

  it("flags IAM auth off, clear text, too few brokers or AZs and a foreign security group, each with its fix", async () => {
    const c = readyCluster();
    const p = c.Provisioned as O;
    const { cli } = fakeCli({
      cluster: {
        ...c,
        Provisioned: {
          ...p,
          NumberOfBrokerNodes: 2,
          BrokerNodeGroupInfo: { ClientSubnets: ["subnet-a", "subnet-b"], SecurityGroups: ["sg-0999"], ZoneIds: ["use1-az4", "use1-az6"] },
          ClientAuthentication: { Sasl: { Iam: { Enabled: false }, Scram: { Enabled: true } } },
          EncryptionInfo: { EncryptionInTransit: { ClientBroker: "TLS_PLAINTEXT", InCluster: true } },
        },
      },
    });
    const rows = bad(await adoptedMskRows(KAFKA, cli));
    expect(rows.map((r) => r.check)).toEqual(["IAM auth", "TLS", "brokers", "security group"].map((w) => `adopted MSK ${w}`));
    expect(rows[0].fix).toBe(`aws kafka update-security --cluster-arn ${ARN} --current-version K3AEGXETSR30VB --client-authentication '{"Sasl":{"Iam":{"Enabled":true}}}'`);
    expect(rows[1].fix).toBe(`aws kafka update-security --cluster-arn ${ARN} --current-version K3AEGXETSR30VB --encryption-info '{"EncryptionInTransit":{"ClientBroker":"TLS"}}'`);
    expect(rows[2].detail).toBe("platform-msk: 2 brokers over 2 AZs: replication factor 3 with min.insync.replicas 2 needs ≥ 3 brokers, and an AZ's loss ≥ 2 AZs");
    expect(rows[2].fix).toBe(`aws kafka update-broker-count --cluster-arn ${ARN} --current-version K3AEGXETSR30VB --target-number-of-broker-nodes 4 (a multiple of its 2 AZs)`);
  });

  it("flags each server property llm-ha needs that the configuration lacks or sets otherwise", async () => {
    const { cli } = fakeCli({ properties: "default.replication.factor=2\nmin.insync.replicas=2\nunclean.leader.election.enable=true\ngroup.min.session.timeout.ms=6000\n" });
    const [row] = bad(await adoptedMskRows(KAFKA, cli));
    expect(row.check).toBe("adopted MSK server properties");
    expect(row.detail).toMatch(
      /revision 4: default\.replication\.factor=2 \(needs 3\); unclean\.leader\.election\.enable=true \(needs false\); auto\.create\.topics\.enable=\(unset: MSK's default\) \(needs false\); group\.min\.session\.timeout\.ms=6000 \(needs ≤ 2000\)\./,
    );
    expect(row.fix).toContain(`aws kafka update-configuration --arn ${CONFIG_ARN} --server-properties fileb://llm-ha.properties`);
  });

  it("flags a cluster on MSK's default configuration", async () => {
    const c = readyCluster();
    const p = c.Provisioned as O;
    const { cli } = fakeCli({ cluster: { ...c, Provisioned: { ...p, CurrentBrokerSoftwareInfo: { KafkaVersion: "3.9.x.kraft" } } } });
    const [row] = bad(await adoptedMskRows(KAFKA, cli));
    expect(row.detail).toMatch(/runs MSK's default configuration: llm-ha needs default\.replication\.factor=3, /);
    expect(row.fix).toMatch(/aws kafka create-configuration --name llm-ha --server-properties fileb:\/\/llm-ha\.properties; aws kafka update-cluster-configuration/);
  });

  it("reads server.properties lines, skipping comments and blanks", () => {
    expect([...serverProperties("# c\n\n a.b = 1 \nc=d=e\n")]).toEqual([["a.b", "1"], ["c", "d=e"]]);
  });
});

describe("adopted data tier in preflight --online", () => {
  const run = async (c: Pick<StackConfig, "redis" | "kafka">, cli: AwsCli) => {
    const guarded: string[] = [];
    const rows: CheckRow[] = [];
    await adoptedDataChecks(c as StackConfig, cli, async (check, f) => {
      guarded.push(check);
      try {
        rows.push(...(await f()));
      } catch (err) {
        rows.push({ check, status: "fail", detail: String(err), fix: "" });
      }
    });
    return { guarded, rows };
  };
  const sized = { nodeType: "cache.r7g.large", replicas: 3, version: "3.9.x.kraft", brokersPerAz: 1, instanceType: "kafka.m7g.large", volumeSizeGb: 100 };

  it("reads nothing for a stack that creates its own stores", async () => {
    const { cli, calls } = fakeCli();
    expect(await run({ redis: { ...sized }, kafka: { ...sized } }, cli)).toEqual({ guarded: [], rows: [] });
    expect(calls).toEqual([]);
  });

  it("checks each adopted store under its own guard: a failed read is that store's row, the other is still read", async () => {
    const { cli } = fakeCli({ group: new AwsCliError("aws elasticache describe-replication-groups: An error occurred (AccessDenied)", "AccessDenied") });
    const { guarded, rows } = await run({ redis: { ...sized, existing: REDIS }, kafka: { ...sized, existing: KAFKA } }, cli);
    expect(guarded).toEqual(["adopted Redis", "adopted MSK"]);
    expect(rows[0]).toMatchObject({ check: "adopted Redis", status: "fail" });
    expect(rows.slice(1).map((r) => r.status)).toEqual(["ok", "ok", "ok", "ok", "ok"]);
  });
});
