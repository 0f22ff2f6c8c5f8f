import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { clientIngress } from "./client-ingress";
import type { ExistingKafkaConfig } from "./config/data";
import { adoptKafka, MSK_IAM_PORT } from "./data-adopted";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface KafkaArgs {
  vpcId: pulumi.Input<string>;
  /** Private subnets, one per AZ: MSK takes 2 or 3. Required. */
  subnetIds: pulumi.Input<string>[];
  /** The only security groups allowed in: those of the nodes and pods that use it (infra/fences.ts). Required, non-empty. */
  clientSecurityGroupIds: Record<string, pulumi.Input<string>>;
  /** Brokers per AZ; total brokers = this × AZs, at least 3. Default 1. */
  brokersPerAz?: number;
  /** Default `DEFAULT_KAFKA_VERSION` (KRaft). A ZooKeeper version is refused (policy msk-kraft-broker-logs). */
  kafkaVersion?: string;
  /** Days the brokers' CloudWatch log group keeps its events. Default `BROKER_LOG_RETENTION_DAYS`. */
  brokerLogRetentionDays?: number;
  /** Default `kafka.m7g.large`. */
  instanceType?: string;
  /** EBS per broker, GiB. Default 100. */
  volumeSizeGb?: number;
  /**
   * An MSK cluster to adopt instead of creating one (`llm-ha:kafka.existing`): no cluster,
   * configuration, log group, KMS key or security group of the stack's; the clients' ingress
   * rules go on `securityGroupId`. Default none (the stack creates its cluster).
   */
  existing?: ExistingKafkaConfig;
}

/**
 * MSK's KRaft version string for Apache Kafka 3.9 (MSK takes `<x.y>.x.kraft` for a cluster in
 * KRaft mode, `<x.y>.x` for ZooKeeper; KRaft from 3.7, and only at creation: a ZooKeeper
 * cluster cannot switch). 3.6.0, the old default, is ZooKeeper-only and past MSK's end of
 * support (2026-06-01). 3.9 rather than 4.x: Kafka 4 drops the protocol versions older than
 * 2.1 that the fallback's client (kafkajs 2.2) still speaks.
 */
export const DEFAULT_KAFKA_VERSION = "3.9.x.kraft";

/** Days the broker logs are kept (CloudWatch): long enough to read a weekend's incident on Monday. */
export const BROKER_LOG_RETENTION_DAYS = 30;

/** Broker settings that make the L4 queue durable through one broker's or AZ's loss. */
export const KAFKA_SERVER_PROPERTIES = [
  "default.replication.factor=3",
  "min.insync.replicas=2",
  "unclean.leader.election.enable=false",
  "auto.create.topics.enable=false",
  // The L4 replay group's session is 2 s (a crashed fallback's partitions move within ~3 s);
  // MSK's default floor is 6 s.
  "group.min.session.timeout.ms=2000",
].join("\n");

/**
 * MSK, the platform's durable queue for the L4 tier: brokers spread evenly over the AZs,
 * TLS between clients and brokers and inside the cluster, IAM authentication only. Or an
 * adopted cluster (`existing`, infra/data-adopted.ts), whose settings preflight checks.
 */
export class Kafka extends pulumi.ComponentResource {
  /** The cluster the stack created; undefined where it adopts one (`existing`). */
  readonly cluster?: aws.msk.Cluster;
  /** The cluster's ARN, created or adopted (the fallback's IAM policy is scoped to it). */
  readonly clusterArn: pulumi.Output<string>;
  /** Bootstrap brokers for IAM (SASL) over TLS. */
  readonly bootstrapBrokers: pulumi.Output<string>;

  constructor(name: string, args: KafkaArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Kafka", name, {}, opts);
    if (args.existing) {
      const adopted = adoptKafka(name, args.existing, args.clientSecurityGroupIds, this);
      this.clusterArn = adopted.clusterArn;
      this.bootstrapBrokers = adopted.bootstrapBrokers;
    } else {
      this.cluster = createKafka(name, args, this);
      this.clusterArn = this.cluster.arn;
      this.bootstrapBrokers = this.cluster.bootstrapBrokersSaslIam;
    }
    this.registerOutputs({ bootstrapBrokers: this.bootstrapBrokers });
  }
}

export function createKafka(name: string, args: KafkaArgs, parent: pulumi.Resource): aws.msk.Cluster {
  const p = new Problems();
  const azs = args.subnetIds.length;
  const brokers = (args.brokersPerAz ?? 1) * azs;
  if (azs < 2 || azs > 3) p.add("subnetIds", `MSK takes subnets in 2 or 3 AZs, got ${azs}`);
  if (brokers < 3) p.add("brokersPerAz", `${brokers} brokers cannot hold replication factor 3`);
  if (Object.keys(args.clientSecurityGroupIds).length === 0) p.add("clientSecurityGroupIds", "needs at least one client security group");
  const retention = args.brokerLogRetentionDays ?? BROKER_LOG_RETENTION_DAYS;
  if (!Number.isInteger(retention) || retention < 1) p.add("brokerLogRetentionDays", `must be a whole number of days ≥ 1 (got ${retention})`);
  p.throwIfAny("Kafka arguments");
  const opts = { parent };
  const kafkaVersion = args.kafkaVersion ?? DEFAULT_KAFKA_VERSION;

  const sg = new aws.ec2.SecurityGroup(`${name}-sg`, { vpcId: args.vpcId, description: "MSK IAM/TLS from its clients' security groups only", tags: tagged() }, opts);
  clientIngress(name, sg.id, args.clientSecurityGroupIds, MSK_IAM_PORT, parent);
  // No kafkaVersions: the configuration then fits every version, the KRaft ones included.
  const configuration = new aws.msk.Configuration(`${name}-config`, { serverProperties: KAFKA_SERVER_PROPERTIES }, opts);
  // The brokers' own logs (a broker's view of an ISR shrink, a rejected produce): without them an L4 incident leaves no trace.
  const brokerLogs = new aws.cloudwatch.LogGroup(`${name}-broker-logs`, { retentionInDays: retention, tags: tagged() }, opts);
  const key = new aws.kms.Key(`${name}-kms`, { description: "llm-ha MSK at rest", enableKeyRotation: true, tags: tagged() }, opts);
  return new aws.msk.Cluster(
    `${name}-msk`,
    {
      kafkaVersion,
      numberOfBrokerNodes: brokers,
      brokerNodeGroupInfo: {
        instanceType: args.instanceType ?? "kafka.m7g.large",
        clientSubnets: args.subnetIds,
        securityGroups: [sg.id],
        storageInfo: { ebsStorageInfo: { volumeSize: args.volumeSizeGb ?? 100 } },
      },
      configurationInfo: { arn: configuration.arn, revision: configuration.latestRevision },
      encryptionInfo: { encryptionAtRestKmsKeyArn: key.arn, encryptionInTransit: { clientBroker: "TLS", inCluster: true } },
      clientAuthentication: { sasl: { iam: true }, unauthenticated: false },
      loggingInfo: { brokerLogs: { cloudwatchLogs: { enabled: true, logGroup: brokerLogs.name } } },
      tags: tagged(),
    },
    opts,
  );
}
