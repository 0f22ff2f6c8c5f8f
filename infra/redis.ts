import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface RedisArgs {
  vpcId: pulumi.Input<string>;
  /** Private subnets, one per AZ. Required, ≥ 2. */
  subnetIds: pulumi.Input<string>[];
  /** The only security group allowed in: the nodes'. Required. */
  clientSecurityGroupId: pulumi.Input<string>;
  /** AUTH token (a Pulumi secret), 16–128 characters. Required. */
  authToken: pulumi.Input<string>;
  /** Default `cache.r7g.large`. */
  nodeType?: string;
  /** Primary plus replicas; ≥ 2 for automatic failover. Default 3. */
  nodes?: number;
  /** Default `7.1`. */
  engineVersion?: string;
}

/**
 * The registry and leader-election store: a Multi-AZ replication group with automatic
 * failover, TLS required, encryption at rest with its own KMS key, AUTH from a secret.
 */
export class Redis extends pulumi.ComponentResource {
  readonly replicationGroup: aws.elasticache.ReplicationGroup;
  readonly primaryEndpoint: pulumi.Output<string>;
  /** `rediss://:<token>@<primary>:6379` (secret): what `LLMHA_REDIS_URL` takes. */
  readonly url: pulumi.Output<string>;

  constructor(name: string, args: RedisArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Redis", name, {}, opts);
    this.replicationGroup = createRedis(name, args, this);
    this.primaryEndpoint = this.replicationGroup.primaryEndpointAddress;
    this.url = pulumi.secret(pulumi.interpolate`rediss://:${args.authToken}@${this.primaryEndpoint}:6379`);
    this.registerOutputs({ primaryEndpoint: this.primaryEndpoint });
  }
}

export function createRedis(name: string, args: RedisArgs, parent: pulumi.Resource): aws.elasticache.ReplicationGroup {
  const p = new Problems();
  const nodes = args.nodes ?? 3;
  if (nodes < 2) p.add("nodes", "automatic failover needs a primary and at least one replica");
  if (args.subnetIds.length < 2) p.add("subnetIds", "Multi-AZ needs subnets in at least 2 AZs");
  p.throwIfAny("Redis arguments");
  const opts = { parent };

  const sg = new aws.ec2.SecurityGroup(`${name}-sg`, { vpcId: args.vpcId, description: "Redis from the EKS nodes only", tags: tagged() }, opts);
  new aws.vpc.SecurityGroupIngressRule(
    `${name}-from-nodes`,
    { securityGroupId: sg.id, referencedSecurityGroupId: args.clientSecurityGroupId, ipProtocol: "tcp", fromPort: 6379, toPort: 6379, description: "agents", tags: tagged() },
    opts,
  );
  const subnets = new aws.elasticache.SubnetGroup(`${name}-subnets`, { subnetIds: args.subnetIds, tags: tagged() }, opts);
  const key = new aws.kms.Key(`${name}-kms`, { description: "llm-ha Redis at rest", enableKeyRotation: true, tags: tagged() }, opts);
  return new aws.elasticache.ReplicationGroup(
    `${name}-rg`,
    {
      description: "llm-ha registry and leader lease",
      engine: "redis",
      engineVersion: args.engineVersion ?? "7.1",
      nodeType: args.nodeType ?? "cache.r7g.large",
      numCacheClusters: nodes,
      port: 6379,
      multiAzEnabled: true,
      automaticFailoverEnabled: true,
      transitEncryptionEnabled: true,
      transitEncryptionMode: "required",
      atRestEncryptionEnabled: true,
      kmsKeyId: key.arn,
      authToken: args.authToken,
      subnetGroupName: subnets.name,
      securityGroupIds: [sg.id],
      snapshotRetentionLimit: 1,
      applyImmediately: false,
      tags: tagged(),
    },
    opts,
  );
}
