import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { redisUrl, WORKLOAD_ROLE_NAMES, type RoleName } from "../contracts/redis-roles";
import { clientIngress } from "./client-ingress";
import type { ExistingRedisConfig } from "./config/data";
import { adoptRedis } from "./data-adopted";
import { Problems } from "./problems";
import { createRoleUsers, disabledUserPassword } from "./redis-users";
import { tagged } from "./tags";

/** How the stack's ElastiCache ids are made (infra/redis-users.ts), beside the component that makes them. */
export { stackScopedId } from "./redis-users";

/** The port the stack's replication group listens on. */
export const REDIS_PORT = 6379;

export interface RedisArgs {
  vpcId: pulumi.Input<string>;
  /** Private subnets, one per AZ. Required, ≥ 2. */
  subnetIds: pulumi.Input<string>[];
  /** The only security groups allowed in: those of the nodes and pods that use it (infra/fences.ts). Required, non-empty. */
  clientSecurityGroupIds: Record<string, pulumi.Input<string>>;
  /**
   * The old AUTH token (a Pulumi secret), 16–128 characters: every client with every permission.
   * Alone, a migration path; beside `rolePasswords`, the password of the group's disabled
   * `default` user. One of the two is required.
   */
  authToken?: pulumi.Input<string>;
  /** Default `cache.r7g.large`. */
  nodeType?: string;
  /** Primary plus replicas; ≥ 2 for automatic failover. Default 3. */
  nodes?: number;
  /** Default `7.1`. At least 7: llm-ha's scripts are Redis Functions (`FUNCTION LOAD`, `FCALL`). */
  engineVersion?: string;
  /**
   * Key namespace of the roles' key patterns (`LLMHA_CLUSTER`). Default `default`.
   */
  cluster?: string;
  /**
   * One password (a Pulumi secret, 16–128 characters) per Redis role (contracts/redis-roles.ts):
   * each becomes an ElastiCache RBAC user with the role's access string, all in one user group
   * whose `default` user is off, and the group replaces the AUTH token. The default way; without
   * it, the AUTH token alone (every client has every permission; the old way).
   */
  rolePasswords?: Partial<Record<RoleName, pulumi.Input<string>>>;
  /**
   * The stack's AZs: the replication group's `preferredCacheClusterAzs` take them in turn (one
   * node per AZ before any AZ gets a second), so the primary and its replicas never share an AZ
   * by ElastiCache's choice. Default none (ElastiCache places them).
   */
  azs?: string[];
  /**
   * A replication group to adopt instead of creating one (`llm-ha:redis.existing`): no group,
   * subnet group, parameter group, KMS key or security group of the stack's; the role users
   * join `userGroupId` and the clients' ingress rules go on `securityGroupId`. Needs
   * `rolePasswords`; refuses `authToken`. Default none (the stack creates its group).
   */
  existing?: ExistingRedisConfig;
}

/**
 * The registry and leader-election store: a Multi-AZ replication group with automatic
 * failover, TLS required, encryption at rest with its own KMS key, a user per role. Or an
 * adopted group (`existing`, infra/data-adopted.ts): the role users join its user group.
 */
export class Redis extends pulumi.ComponentResource {
  /** The group the stack created; undefined where it adopts one (`existing`). */
  readonly replicationGroup?: aws.elasticache.ReplicationGroup;
  /** The replication group's id, created or adopted (the game day's FIS target). */
  readonly replicationGroupId: pulumi.Output<string>;
  readonly primaryEndpoint: pulumi.Output<string>;
  /** `rediss://:<token>@<primary>:6379` (secret), where the AUTH token authenticates (no roles): what every client takes then. */
  readonly url?: pulumi.Output<string>;
  /** Per role with a password: `rediss://<role>:<password>@<primary>:<port>` (secret). */
  readonly roleUrls: Partial<Record<RoleName, pulumi.Output<string>>>;
  readonly userGroup?: aws.elasticache.UserGroup;

  constructor(name: string, args: RedisArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Redis", name, {}, opts);
    const p = new Problems();
    if (!args.rolePasswords && (args.authToken === undefined || args.existing)) p.add("rolePasswords", args.existing ? "is required with an adopted replication group (existing): each role gets its user in the given user group" : "is required (or, as the old way, authToken)");
    if (args.existing && args.authToken !== undefined) p.add("authToken", "does not apply to an adopted replication group (existing): one token shared by every client is what the role users remove");
    // A role left out of a partly set map would have no user (its clients locked out) or, read
    // as "", a blank password: refused here, naming the roles, as the config reader does.
    const missing = args.rolePasswords ? WORKLOAD_ROLE_NAMES.filter((r) => args.rolePasswords?.[r] === undefined || args.rolePasswords[r] === "") : [];
    if (missing.length > 0) p.add("rolePasswords", `has no password for ${missing.join(", ")} (every workload role needs one: llm-ha:redisRolePasswords.<role>)`);
    p.throwIfAny("Redis arguments");
    let port: pulumi.Input<number> = REDIS_PORT;
    if (args.existing) {
      const adopted = adoptRedis(name, { ...args, existing: args.existing, rolePasswords: args.rolePasswords! }, this);
      this.replicationGroupId = adopted.replicationGroupId;
      this.primaryEndpoint = adopted.primaryEndpoint;
      port = adopted.port;
    } else {
      this.userGroup = args.rolePasswords ? createRoleUsers(name, args.cluster ?? "default", args.rolePasswords, args.authToken ?? disabledUserPassword(args.rolePasswords), this) : undefined;
      this.replicationGroup = createRedis(name, args, this, this.userGroup);
      this.replicationGroupId = this.replicationGroup.id;
      this.primaryEndpoint = this.replicationGroup.primaryEndpointAddress;
    }
    // Built with every part encoded: a token holding `#`, `?` or `%` stays one token.
    const token = args.authToken;
    this.url = this.userGroup || token === undefined ? undefined : pulumi.secret(pulumi.all([token, this.primaryEndpoint]).apply(([password, host]) => redisUrl({ host, port: REDIS_PORT, tls: true, password })));
    this.roleUrls = {};
    for (const [role, pw] of Object.entries(args.rolePasswords ?? {}) as [RoleName, pulumi.Input<string>][]) {
      this.roleUrls[role] = pulumi.secret(pulumi.all([pw, this.primaryEndpoint, port]).apply(([password, host, p]) => redisUrl({ host, port: p, tls: true, username: role, password })));
    }
    this.registerOutputs({ primaryEndpoint: this.primaryEndpoint });
  }
}

export function createRedis(name: string, args: RedisArgs, parent: pulumi.Resource, userGroup?: aws.elasticache.UserGroup): aws.elasticache.ReplicationGroup {
  const p = new Problems();
  const nodes = args.nodes ?? 3;
  if (nodes < 2) p.add("nodes", "automatic failover needs a primary and at least one replica");
  if (args.subnetIds.length < 2) p.add("subnetIds", "Multi-AZ needs subnets in at least 2 AZs");
  if (Object.keys(args.clientSecurityGroupIds).length === 0) p.add("clientSecurityGroupIds", "needs at least one client security group");
  const engineVersion = args.engineVersion ?? "7.1";
  const major = Number(/^(\d+)/.exec(engineVersion)?.[1] ?? NaN);
  if (!(major >= 7)) p.add("engineVersion", `must be 7 or later (got ${JSON.stringify(engineVersion)}): llm-ha's scripts are Redis Functions (FUNCTION LOAD, FCALL), and no role may EVAL`);
  p.throwIfAny("Redis arguments");
  const opts = { parent };

  const sg = new aws.ec2.SecurityGroup(`${name}-sg`, { vpcId: args.vpcId, description: "Redis from its clients' security groups only", tags: tagged() }, opts);
  clientIngress(name, sg.id, args.clientSecurityGroupIds, REDIS_PORT, parent);
  const subnets = new aws.elasticache.SubnetGroup(`${name}-subnets`, { subnetIds: args.subnetIds, tags: tagged() }, opts);
  // ElastiCache's default `volatile-lru` evicts keys with a TTL under memory pressure: the lease and a node's
  // record are such keys. With `noeviction` a full Redis refuses writes (an error the agent degrades on) and
  // never drops the lease or the fence; the functions bound what one call may write.
  const params = new aws.elasticache.ParameterGroup(
    `${name}-params`,
    { family: `redis${major}`, description: "llm-ha: never evict (lease, fence, node records)", parameters: [{ name: "maxmemory-policy", value: "noeviction" }], tags: tagged() },
    opts,
  );
  const key = new aws.kms.Key(`${name}-kms`, { description: "llm-ha Redis at rest", enableKeyRotation: true, tags: tagged() }, opts);
  return new aws.elasticache.ReplicationGroup(
    `${name}-rg`,
    {
      description: "llm-ha registry and leader lease",
      engine: "redis",
      engineVersion,
      parameterGroupName: params.name,
      nodeType: args.nodeType ?? "cache.r7g.large",
      numCacheClusters: nodes,
      // One node per AZ in turn: the primary and its replicas in different AZs.
      ...(args.azs && args.azs.length > 0 ? { preferredCacheClusterAzs: Array.from({ length: nodes }, (_, i) => args.azs![i % args.azs!.length]) } : {}),
      port: REDIS_PORT,
      multiAzEnabled: true,
      automaticFailoverEnabled: true,
      transitEncryptionEnabled: true,
      transitEncryptionMode: "required",
      atRestEncryptionEnabled: true,
      kmsKeyId: key.arn,
      // With roles, the user group replaces the AUTH token (ElastiCache takes one or the other).
      ...(userGroup ? { userGroupIds: [userGroup.userGroupId] } : { authToken: args.authToken! }),
      subnetGroupName: subnets.name,
      securityGroupIds: [sg.id],
      snapshotRetentionLimit: 1,
      applyImmediately: false,
      tags: tagged(),
    },
    opts,
  );
}
