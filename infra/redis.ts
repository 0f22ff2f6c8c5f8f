import * as crypto from "node:crypto";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { accessString, redisRoles, redisUrl, WORKLOAD_ROLE_NAMES, type RoleName } from "../contracts/redis-roles";
import { Problems } from "./problems";
import { tagged } from "./tags";

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
}

/**
 * The registry and leader-election store: a Multi-AZ replication group with automatic
 * failover, TLS required, encryption at rest with its own KMS key, AUTH from a secret.
 */
export class Redis extends pulumi.ComponentResource {
  readonly replicationGroup: aws.elasticache.ReplicationGroup;
  readonly primaryEndpoint: pulumi.Output<string>;
  /** `rediss://:<token>@<primary>:6379` (secret), where the AUTH token authenticates (no roles): what every client takes then. */
  readonly url?: pulumi.Output<string>;
  /** Per role with a password: `rediss://<role>:<password>@<primary>:6379` (secret). */
  readonly roleUrls: Partial<Record<RoleName, pulumi.Output<string>>>;
  readonly userGroup?: aws.elasticache.UserGroup;

  constructor(name: string, args: RedisArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Redis", name, {}, opts);
    const p = new Problems();
    if (!args.rolePasswords && args.authToken === undefined) p.add("rolePasswords", "is required (or, as the old way, authToken)");
    // A role left out of a partly set map would have no user (its clients locked out) or, read
    // as "", a blank password: refused here, naming the roles, as the config reader does.
    const missing = args.rolePasswords ? WORKLOAD_ROLE_NAMES.filter((r) => args.rolePasswords?.[r] === undefined || args.rolePasswords[r] === "") : [];
    if (missing.length > 0) p.add("rolePasswords", `has no password for ${missing.join(", ")} (every workload role needs one: llm-ha:redisRolePasswords.<role>)`);
    p.throwIfAny("Redis arguments");
    this.userGroup = args.rolePasswords ? createRoleUsers(name, args.cluster ?? "default", args.rolePasswords, args.authToken ?? disabledUserPassword(args.rolePasswords), this) : undefined;
    this.replicationGroup = createRedis(name, args, this, this.userGroup);
    this.primaryEndpoint = this.replicationGroup.primaryEndpointAddress;
    // Built with every part encoded: a token holding `#`, `?` or `%` stays one token.
    const token = args.authToken;
    this.url = this.userGroup || token === undefined ? undefined : pulumi.secret(pulumi.all([token, this.primaryEndpoint]).apply(([password, host]) => redisUrl({ host, port: 6379, tls: true, password })));
    this.roleUrls = {};
    for (const [role, pw] of Object.entries(args.rolePasswords ?? {}) as [RoleName, pulumi.Input<string>][]) {
      this.roleUrls[role] = pulumi.secret(pulumi.all([pw, this.primaryEndpoint]).apply(([password, host]) => redisUrl({ host, port: 6379, tls: true, username: role, password })));
    }
    this.registerOutputs({ primaryEndpoint: this.primaryEndpoint });
  }
}

/**
 * The password of the group's `default` user (off: no command, no key) where no AUTH token is
 * given: ElastiCache wants one. Derived from the roles' passwords (SHA-256, 64 hex characters),
 * so it is as secret as they are, stable across runs, and needs no setting nobody would use.
 */
export function disabledUserPassword(passwords: Partial<Record<RoleName, pulumi.Input<string>>>): pulumi.Output<string> {
  const names = Object.keys(passwords).sort() as RoleName[];
  return pulumi.secret(
    pulumi.all(names.map((n) => passwords[n] as pulumi.Input<string>)).apply((pws) => crypto.createHash("sha256").update(`llm-ha default user\0${names.map((n, i) => `${n}=${pws[i]}`).join("\0")}`).digest("hex")),
  );
}

/**
 * One ElastiCache RBAC user per role with a password, and a user group with them and a
 * `default` user that is off (ElastiCache requires a user named `default` in every group).
 */
/**
 * An ElastiCache user or user-group id of this stack. Those ids are unique per account and
 * region, not per stack, so a second stack (staging beside prod) with the same ids fails with
 * UserAlreadyExists: each id carries the stack's name. The user *names* (what clients AUTH as)
 * stay the role names: a name need only be unique within its user group (ElastiCache's own
 * examples give several users the name `default`, each with its own id). Ids match
 * `[a-z][a-z0-9-]*` (user groups are stored lowercase) and stay within 40 characters: a long
 * stack name is cut and keeps a hash of the whole.
 */
export function stackScopedId(stack: string, name: string, suffix: string): string {
  let slug = stack.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  if (!/^[a-z]/.test(slug)) slug = `s${slug}`;
  const tail = `-${name}-${suffix}`;
  if (slug.length + tail.length > 40) {
    const hash = crypto.createHash("sha256").update(stack).digest("hex").slice(0, 6);
    slug = `${slug.slice(0, Math.max(1, 40 - tail.length - 7)).replace(/-+$/, "")}-${hash}`;
  }
  return `${slug}${tail}`.replace(/-{2,}/g, "-").slice(0, 40).replace(/-+$/, "");
}

export function createRoleUsers(
  name: string,
  cluster: string,
  passwords: Partial<Record<RoleName, pulumi.Input<string>>>,
  defaultPassword: pulumi.Input<string>,
  parent: pulumi.Resource,
): aws.elasticache.UserGroup {
  const opts = { parent };
  const stack = pulumi.getStack();
  const off = new aws.elasticache.User(
    `${name}-user-default`,
    { userId: stackScopedId(stack, name, "default-off"), userName: "default", engine: "redis", accessString: "off resetkeys resetchannels -@all", passwords: [defaultPassword], tags: tagged() },
    opts,
  );
  const users = [off];
  for (const role of redisRoles(cluster)) {
    const pw = passwords[role.name];
    if (pw === undefined) continue;
    users.push(
      new aws.elasticache.User(
        `${name}-user-${role.name}`,
        { userId: stackScopedId(stack, name, role.name), userName: role.name, engine: "redis", accessString: accessString(role), passwords: [nonBlank(pw, role.name)], tags: tagged() },
        opts,
      ),
    );
  }
  return new aws.elasticache.UserGroup(`${name}-users`, { userGroupId: stackScopedId(stack, name, "llmha"), engine: "redis", userIds: users.map((u) => u.userId), tags: tagged() }, opts);
}

/** The password, refused when it resolves blank (ElastiCache would take no user without one; a blank one must never reach it). */
function nonBlank(pw: pulumi.Input<string>, role: string): pulumi.Output<string> {
  return pulumi.secret(
    pulumi.output(pw).apply((v) => {
      if (v.trim() === "") throw new Error(`Redis arguments: rolePasswords.${role}: is blank (llm-ha:redisRolePasswords.${role} needs 16-128 characters)`);
      return v;
    }),
  );
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
  // Each client group by reference, never a CIDR: a pod outside them has no route in.
  for (const [client, groupId] of Object.entries(args.clientSecurityGroupIds)) {
    new aws.vpc.SecurityGroupIngressRule(
      `${name}-from-${client}`,
      { securityGroupId: sg.id, referencedSecurityGroupId: groupId, ipProtocol: "tcp", fromPort: 6379, toPort: 6379, description: client, tags: tagged() },
      opts,
    );
  }
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
      port: 6379,
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
