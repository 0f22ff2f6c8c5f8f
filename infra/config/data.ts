import * as pulumi from "@pulumi/pulumi";
import { WORKLOAD_ROLE_NAMES as WORKLOAD_ROLES, type RoleName } from "../../contracts/redis-roles";
import type { StackConfig } from "./stack-config";
import { DEFAULT_KAFKA_VERSION } from "../kafka";
import { isObj, type Settings } from "./read";

/**
 * `llm-ha:redis.existing`: an ElastiCache replication group the stack adopts instead of creating
 * one. The stack still creates one RBAC user per llm-ha role and adds each to `userGroupId`, and
 * lets its clients' security groups in on `securityGroupId`; it changes nothing else there.
 */
export interface ExistingRedisConfig {
  /** The replication group (`aws elasticache describe-replication-groups`). */
  replicationGroupId: string;
  /** A user group already attached to that replication group: the role users join it. */
  userGroupId: string;
  /** A security group of the replication group: the ingress rules from llm-ha's clients go on it. */
  securityGroupId: string;
}

/** `llm-ha:kafka.existing`: an MSK cluster the stack adopts (IAM auth); the stack only adds ingress rules on `securityGroupId`. */
export interface ExistingKafkaConfig {
  /** The cluster's ARN (`aws kafka list-clusters-v2`). */
  clusterArn: string;
  /** A security group of the brokers: the ingress rule from the L1 pods goes on it. */
  securityGroupId: string;
}

const SECURITY_GROUP = /^sg-[0-9a-f]{8,17}$/;
/** ElastiCache ids: a letter, then letters, digits and single hyphens, 40 at most, lowercase. */
const ELASTICACHE_ID = /^[a-z](?:[a-z0-9]|-(?!-)){0,39}$/;
/** arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>-<n>. */
const MSK_CLUSTER_ARN = /^arn:aws[a-z-]*:kafka:([a-z0-9-]+):(\d{12}):cluster\/([A-Za-z0-9-]{1,64})\/[0-9a-f-]{36}-\d+$/;

/** The settings that size a created data store: refused beside `existing`, naming why. */
const CREATE_ONLY = {
  redis: { nodeType: "the adopted replication group's node type is its own", replicas: "the adopted replication group's replicas are its own (llm-ha preflight checks failover and Multi-AZ)" },
  kafka: {
    brokersPerAz: "the adopted cluster's brokers are its own (llm-ha preflight checks ≥ 3 brokers over ≥ 2 AZs)",
    instanceType: "the adopted cluster's broker type is its own",
    volumeSizeGb: "the adopted cluster's storage is its own",
    version: "the adopted cluster's Kafka version is its own",
  },
} as const;

/** `llm-ha:<tier>.existing` checked field by field; undefined when absent or malformed (reported). */
function existingOf(s: Settings, tier: "redis" | "kafka", o: Record<string, unknown>, fields: Record<string, { re: RegExp; how: string }>): Record<string, string> | undefined {
  if (o.existing === undefined) return undefined;
  const k = s.key(`${tier}.existing`);
  const known = Object.keys(fields);
  if (!isObj(o.existing)) {
    s.p.add(k, `must be an object {${known.join(", ")}}`);
    return undefined;
  }
  const e = o.existing;
  const out: Record<string, string> = {};
  for (const [f, { re, how }] of Object.entries(fields)) {
    const v = e[f];
    if (typeof v !== "string" || !re.test(v)) s.p.add(`${k}.${f}`, `${v === undefined ? "is required" : `${JSON.stringify(v)} is malformed`}: ${how}`);
    else out[f] = v;
  }
  for (const extra of Object.keys(e).filter((x) => !known.includes(x))) s.p.add(`${k}.${extra}`, `unknown key; known: ${known.join(", ")}`);
  for (const [setting, why] of Object.entries(CREATE_ONLY[tier])) {
    if (o[setting] !== undefined) s.p.add(s.key(`${tier}.${setting}`), `does not apply with ${k}: ${why}; remove it`);
  }
  return Object.keys(out).length === known.length ? out : undefined;
}

/** `llm-ha:redis.existing`, checked; undefined when absent or malformed (reported). */
function existingRedisOf(s: Settings, redis: Record<string, unknown>): ExistingRedisConfig | undefined {
  return existingOf(s, "redis", redis, {
    replicationGroupId: { re: ELASTICACHE_ID, how: "the replication group's id (aws elasticache describe-replication-groups --query 'ReplicationGroups[].ReplicationGroupId')" },
    userGroupId: { re: ELASTICACHE_ID, how: "a user group attached to that replication group (aws elasticache describe-replication-groups --replication-group-id <id> --query 'ReplicationGroups[0].UserGroupIds')" },
    securityGroupId: { re: SECURITY_GROUP, how: "sg-…, a security group of the replication group's nodes (aws elasticache describe-cache-clusters --show-cache-node-info --query 'CacheClusters[].SecurityGroups')" },
  }) as ExistingRedisConfig | undefined;
}

/** `llm-ha:kafka.existing`, checked (its ARN in the stack's region); undefined when absent or malformed (reported). */
function existingKafkaOf(s: Settings, kafka: Record<string, unknown>, region: string): ExistingKafkaConfig | undefined {
  const e = existingOf(s, "kafka", kafka, {
    clusterArn: { re: MSK_CLUSTER_ARN, how: "arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>-<n> (aws kafka list-clusters-v2 --query 'ClusterInfoList[].ClusterArn')" },
    securityGroupId: { re: SECURITY_GROUP, how: "sg-…, a security group of the brokers (aws kafka describe-cluster-v2 --cluster-arn <arn> --query 'ClusterInfo.Provisioned.BrokerNodeGroupInfo.SecurityGroups')" },
  }) as ExistingKafkaConfig | undefined;
  const arnRegion = e && MSK_CLUSTER_ARN.exec(e.clusterArn)?.[1];
  if (e && region && arnRegion !== region) {
    s.p.add(s.key("kafka.existing.clusterArn"), `is in ${arnRegion}, not the stack's region ${region}: the L1 pods reach MSK inside the cluster's VPC only`);
    return undefined;
  }
  return e;
}

/** The command that gives every Redis role its password (docs/redis-roles.md). */
export const ROLE_PASSWORDS_HOW = `for r in ${WORKLOAD_ROLES.join(" ")}; do pulumi config set --secret --path "llm-ha:redisRolePasswords.$r" "$(openssl rand -hex 32)"; done`;

/**
 * `llm-ha:redis`, `redisRolePasswords` and `redisAuthToken`: the registry and leader lease
 * (ElastiCache). Per-role users are the default: `redisRolePasswords` (secret, one password per
 * role) is required; a stack with only the old `redisAuthToken` still runs (a migration path,
 * warned here, refused in staging and prod by the policy `redis-roles-required`).
 */
export function redisOf(s: Settings, azs: string[]): StackConfig["redis"] {
  const redis = s.obj("redis");
  const existing = existingRedisOf(s, redis);
  const replicas = s.int(redis, "replicas", s.key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = s.cfg.getSecret("redisAuthToken");
  // Read in clear to check the roles (the values stay secrets: each is wrapped again below).
  const given = s.cfg.getObject<unknown>("redisRolePasswords");
  // The break-glass user (SCRIPT KILL, FUNCTION KILL/LOAD; no key) is an operator's, never a workload's: its own
  // secret, `redisBreakglassPassword`; without it there is no such user.
  const breakglass = s.cfg.getSecret("redisBreakglassPassword");
  let rolePasswords: Partial<Record<RoleName, pulumi.Output<string>>> | undefined;
  if (authToken !== undefined && redis.existing !== undefined) {
    // One token shared by every client, with every command and key, is what the roles remove: an adopted group
    // is reached only through the role users the stack adds to its user group.
    s.p.add(
      s.key("redisAuthToken"),
      `does not apply with ${s.key("redis.existing")}: an AUTH token shared by every node and pod holds every command and every key (the lease, the fencing tokens), which is what the per-role users remove; the stack adds one user per role to the adopted user group instead (${ROLE_PASSWORDS_HOW}); remove it`,
    );
  }
  if (given === undefined) {
    if (authToken === undefined || redis.existing !== undefined) s.p.add(s.key("redisRolePasswords"), `is required: one password per Redis role (${ROLE_PASSWORDS_HOW})`);
    else {
      pulumi.log.warn(
        `${s.key("redisAuthToken")} without ${s.key("redisRolePasswords")}: every Redis client shares the one all-powerful token (a migration path; staging and prod stacks are refused by the policy redis-roles-required). Give each role its user: ${ROLE_PASSWORDS_HOW}`,
      );
    }
  } else if (typeof given !== "object" || given === null || Array.isArray(given)) {
    s.p.add(s.key("redisRolePasswords"), `must be an object of role → password (${ROLE_PASSWORDS_HOW})`);
  } else {
    // An offline run of a stack file (preflight) sees a nested secret as `{secure: <ciphertext>}`:
    // present, its length unknown. `pulumi up` hands the program the decrypted values.
    const o = Object.fromEntries(
      Object.entries(given as Record<string, unknown>).map(([k, v]) => [k, typeof (v as { secure?: unknown } | null)?.secure === "string" ? { secure: (v as { secure: string }).secure } : v]),
    );
    // Every workload role gets its user: a role left out would have no way in.
    for (const r of WORKLOAD_ROLES) {
      const pw = o[r];
      if (typeof pw === "object" && pw !== null && "secure" in pw) continue;
      if (typeof pw !== "string" || pw.length < 16 || pw.length > 128) s.p.add(s.key(`redisRolePasswords.${r}`), `${pw === undefined ? "is required" : "must be 16-128 characters"} (pulumi config set --secret --path 'llm-ha:redisRolePasswords.${r}' "$(openssl rand -hex 32)")`);
    }
    for (const k of Object.keys(o).filter((k) => !(WORKLOAD_ROLES as readonly string[]).includes(k))) {
      s.p.add(s.key(`redisRolePasswords.${k}`), k === "llmha-breakglass" ? "is set apart, as redisBreakglassPassword (an operator's, never a workload's)" : `is not a Redis role (${WORKLOAD_ROLES.join(", ")})`);
    }
    const text = (v: unknown) => (typeof v === "string" ? v : typeof v === "object" && v !== null && "secure" in v ? String(v.secure) : "");
    rolePasswords = {
      ...Object.fromEntries(WORKLOAD_ROLES.map((r) => [r, pulumi.secret(text(o[r]))])),
      ...(breakglass !== undefined ? { "llmha-breakglass": breakglass } : {}),
    } as Partial<Record<RoleName, pulumi.Output<string>>>;
  }
  return { nodeType: s.str(redis, "nodeType", s.key("redis.nodeType"), "cache.r7g.large"), replicas, authToken, rolePasswords, ...(existing ? { existing } : {}) };
}

/** `llm-ha:kafka`: the event log (MSK), replication factor 3; or an adopted cluster (`kafka.existing`). */
export function kafkaOf(s: Settings, azs: string[], region: string): StackConfig["kafka"] {
  const kafka = s.obj("kafka");
  const existing = existingKafkaOf(s, kafka, region);
  const c = {
    version: s.str(kafka, "version", s.key("kafka.version"), DEFAULT_KAFKA_VERSION),
    brokersPerAz: s.int(kafka, "brokersPerAz", s.key("kafka.brokersPerAz"), 1),
    instanceType: s.str(kafka, "instanceType", s.key("kafka.instanceType"), "kafka.m7g.large"),
    volumeSizeGb: s.int(kafka, "volumeSizeGb", s.key("kafka.volumeSizeGb"), 100),
  };
  if (existing) return { ...c, existing };
  if (c.brokersPerAz * azs.length < 3) s.p.add(s.key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  return c;
}
