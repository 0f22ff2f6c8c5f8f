// The data services the tiers lean on: Redis holds the node registry, the leader lease
// and fencing tokens (L1–L2); MSK is the durable queue the L4 tier falls back to.
import * as aws from "@pulumi/aws";
import { validateResourceOfType, type ResourceValidationPolicy, type StackValidationPolicy } from "@pulumi/policy";
import { findReferenced } from "./conventions";
import { num, record, str, strings, type Props } from "./props";

export interface RedisConfig {
  minCacheClusters: number;
}

export const redisHaEncrypted: ResourceValidationPolicy = {
  name: "redis-ha-encrypted",
  description:
    "ElastiCache Redis has cluster mode disabled, automatic failover, multi-AZ, at least 2 cache clusters placed by preferredCacheClusterAzs over at least 2 AZs, TLS required, at-rest encryption, and authentication: an RBAC user group (userGroupIds: one user per role, llm-ha:redisRolePasswords) or, as the old way, an auth token (L2 cluster tier: the registry and the leader lease survive a node or AZ loss, and nobody on the network can forge node state or fencing tokens).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      minCacheClusters: { type: "integer", minimum: 2, default: 2, description: "Fewest nodes (primary + replicas)." },
    },
  },
  validateResource: validateResourceOfType(aws.elasticache.ReplicationGroup, (rg, args, reportViolation) => {
    const { minCacheClusters } = args.getConfig<RedisConfig>();
    const name = args.name;
    if (rg.automaticFailoverEnabled !== true) reportViolation(`Redis ${name} must set automaticFailoverEnabled to true.`);
    if (rg.multiAzEnabled !== true) reportViolation(`Redis ${name} must set multiAzEnabled to true.`);
    // Cluster mode counts nodes per shard as 1 + replicasPerNodeGroup.
    const replicas = num(rg.replicasPerNodeGroup);
    const nodes = num(rg.numCacheClusters) ?? (replicas === undefined ? undefined : 1 + replicas);
    if (nodes === undefined || nodes < minCacheClusters) {
      reportViolation(`Redis ${name} has ${nodes ?? "no"} cache clusters; it needs at least ${minCacheClusters}.`);
    }
    // multiAzEnabled alone lets ElastiCache put the primary and a replica in one AZ: the AZ's loss then takes both.
    const placed = strings(rg.preferredCacheClusterAzs);
    if (nodes !== undefined && nodes >= 2 && num(rg.numNodeGroups) === undefined && num(rg.replicasPerNodeGroup) === undefined) {
      if (new Set(placed).size < 2) {
        reportViolation(`Redis ${name} places its nodes in ${placed.length === 0 ? "no named AZ (no preferredCacheClusterAzs)" : `${new Set(placed).size} AZ (${[...new Set(placed)].join(", ")})`}; list one AZ per node over at least 2 AZs, so the primary and a replica never share one.`);
      } else if (nodes !== undefined && placed.length !== nodes) {
        reportViolation(`Redis ${name} lists ${placed.length} preferredCacheClusterAzs for ${nodes} cache clusters; ElastiCache takes one per node.`);
      }
    }
    if (rg.transitEncryptionEnabled !== true) {
      reportViolation(`Redis ${name} must set transitEncryptionEnabled to true.`);
    } else if (str(rg.transitEncryptionMode) === "preferred") {
      reportViolation(`Redis ${name} has transitEncryptionMode "preferred"; TLS must be required.`);
    }
    if (rg.atRestEncryptionEnabled !== true) reportViolation(`Redis ${name} must set atRestEncryptionEnabled to true.`);
    // Either a user group (each client its own role's user) or the AUTH token: never neither.
    if (!str(rg.authToken) && strings(rg.userGroupIds).length === 0) {
      reportViolation(`Redis ${name} has neither an RBAC user group (userGroupIds) nor an authToken: set llm-ha:redisRolePasswords.`);
    }
    // One primary: llm-ha's Lua scripts touch keys of several hash slots (cluster mode fails them with CROSSSLOT).
    const shards = num(rg.numNodeGroups);
    const mode = str(rg.clusterMode);
    if ((mode !== undefined && mode !== "disabled") || (shards !== undefined && shards > 1) || /cluster\.on/.test(str(rg.parameterGroupName) ?? "")) {
      reportViolation(`Redis ${name} must run with cluster mode disabled (one primary and its replicas): llm-ha's scripts need every key on one node.`);
    }
  }),
};

export interface RedisRolesConfig {
  tokenOnlyEnvironments: string[];
}

/** The tag infra/tags.ts puts on every resource: the stack's name. */
const ENVIRONMENT_TAG = "Environment";

export const redisRolesRequired: ResourceValidationPolicy = {
  name: "redis-roles-required",
  description:
    "ElastiCache Redis authenticates each client as its own role's user (an RBAC user group from llm-ha:redisRolePasswords), not with the one AUTH token alone, outside the environments listed as a migration path (default dev) (L2 cluster tier: a GPU node or the internet-facing L1 pod that leaks its credential leaks its role's keys only, not every key, the lease and the fencing tokens).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      tokenOnlyEnvironments: {
        type: "array",
        items: { type: "string" },
        default: ["dev"],
        description: "Stacks (the Environment tag) that may still run on the AUTH token alone while they migrate.",
      },
    },
  },
  validateResource: validateResourceOfType(aws.elasticache.ReplicationGroup, (rg, args, reportViolation) => {
    const { tokenOnlyEnvironments } = args.getConfig<RedisRolesConfig>();
    if (strings(rg.userGroupIds).length > 0) return;
    const env = (rg.tags as Record<string, string> | undefined)?.[ENVIRONMENT_TAG];
    if (env !== undefined && tokenOnlyEnvironments.includes(env)) return;
    reportViolation(
      `Redis ${args.name}${env ? ` (${env})` : ""} authenticates with the AUTH token alone: every client holds every permission. Set llm-ha:redisRolePasswords (one password per role: pulumi config set --secret --path 'llm-ha:redisRolePasswords.<role>' …, docs/redis-roles.md), which gives each client its own user.`,
    );
  }),
};

export interface MskConfig {
  minClientSubnets: number;
}

export const mskHaEncrypted: ResourceValidationPolicy = {
  name: "msk-ha-encrypted",
  description:
    "MSK has a broker count that is a multiple of its client subnets (at least 2), TLS client-broker and in-cluster, IAM as its only client authentication (no SASL/SCRAM, no TLS client certificates, no unauthenticated access) (L4 global tier: the request queue survives an AZ loss and only the platform's roles can read or write it).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      minClientSubnets: { type: "integer", minimum: 1, default: 2, description: "Fewest client subnets (AZs) for the brokers." },
    },
  },
  validateResource: validateResourceOfType(aws.msk.Cluster, (c, args, reportViolation) => {
    const { minClientSubnets } = args.getConfig<MskConfig>();
    const name = args.name;
    const subnets = strings(c.brokerNodeGroupInfo?.clientSubnets);
    const brokers = num(c.numberOfBrokerNodes);
    if (subnets.length < minClientSubnets) {
      reportViolation(`MSK ${name} has ${subnets.length} client subnets; it needs at least ${minClientSubnets}.`);
    }
    if (brokers === undefined || subnets.length === 0 || brokers % subnets.length !== 0) {
      reportViolation(`MSK ${name} has ${brokers ?? "no"} brokers, not a multiple of its ${subnets.length} client subnets.`);
    }
    const transit = record(record(c.encryptionInfo)?.encryptionInTransit);
    // Unset fields take the provider defaults (TLS, in-cluster on), which are what this asks for.
    const clientBroker = str(transit?.clientBroker) ?? "TLS";
    if (clientBroker !== "TLS") reportViolation(`MSK ${name} has clientBroker encryption ${clientBroker}; it must be TLS.`);
    if (transit?.inCluster === false) reportViolation(`MSK ${name} must encrypt in-cluster traffic (inCluster true).`);
    const auth = record(c.clientAuthentication);
    if (record(auth?.sasl)?.iam !== true) reportViolation(`MSK ${name} must enable IAM client authentication (sasl.iam).`);
    if (auth?.unauthenticated === true) reportViolation(`MSK ${name} allows unauthenticated access.`);
    // IAM only: a SCRAM user or a client certificate is a principal IAM does not govern, so it could write the L4 queue.
    if (record(auth?.sasl)?.scram === true) reportViolation(`MSK ${name} enables SASL/SCRAM; IAM must be its only client authentication.`);
    if (record(auth?.tls) !== undefined && strings(record(auth?.tls)?.certificateAuthorityArns).length > 0) {
      reportViolation(`MSK ${name} enables TLS client-certificate authentication; IAM must be its only client authentication.`);
    }
  }),
};

/** The user and user-group types whose ids are account- and region-wide. */
const ELASTICACHE_USER_TYPES: Record<string, string> = { "aws:elasticache/user:User": "userId", "aws:elasticache/userGroup:UserGroup": "userGroupId" };

/** The stack name as it begins an ElastiCache id (infra/redis.ts `stackScopedId`): lowercase, runs of other characters as one `-`. */
export function stackIdSlug(stack: string): string {
  const slug = stack.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  return /^[a-z]/.test(slug) ? slug : `s${slug}`;
}

export const redisIdsPerStack: ResourceValidationPolicy = {
  name: "redis-ids-per-stack",
  description:
    "ElastiCache user ids and user-group ids begin with the stack's name (the Environment tag): those ids are unique per account and region, so two stacks with the same ids (staging beside prod) collide and the second `pulumi up` fails with UserAlreadyExists (L2 cluster tier: a stack that cannot be created has no registry). User names, what clients AUTH as, stay the role names.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    const field = ELASTICACHE_USER_TYPES[args.type];
    if (field === undefined) return;
    const p = args.props as Props;
    const id = str(p[field]);
    const env = (record(p.tags) as Record<string, string> | undefined)?.[ENVIRONMENT_TAG];
    if (id === undefined || env === undefined) return;
    const slug = stackIdSlug(env);
    // A long stack name is cut and carries a hash; its first characters still lead.
    if (!id.startsWith(`${slug}-`) && !(slug.length > 12 && id.startsWith(slug.slice(0, 8)))) {
      reportViolation(`ElastiCache ${field} ${JSON.stringify(id)} of ${args.name} does not begin with the stack's name (${slug}-): ids are unique per account and region, so another stack with the same id fails with UserAlreadyExists.`);
    }
  },
};

const MSK_TYPE = "aws:msk/cluster:Cluster";
const LOG_GROUP_TYPE = "aws:cloudwatch/logGroup:LogGroup";

/** Whether an MSK version string runs in KRaft mode: `3.7.x.kraft` and later (`<x.y>.x.kraft`), every 4.x. */
export function isKraftVersion(version: string): boolean {
  return /\.kraft$/i.test(version) || Number(/^(\d+)\./.exec(version)?.[1] ?? 0) >= 4;
}

export const mskKraftBrokerLogs: StackValidationPolicy = {
  name: "msk-kraft-broker-logs",
  description:
    "MSK runs in KRaft mode (a `<x.y>.x.kraft` version, 3.7 or later; ZooKeeper versions are refused: 3.6.0 is past MSK's end of support and a cluster cannot switch later) and sends its broker logs somewhere kept, a CloudWatch log group with a retention where CloudWatch is the target (L4 global tier: the queue's incident can be read afterwards, and no log is kept forever).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const c of args.resources.filter((r) => r.type === MSK_TYPE)) {
      const p = c.props as Props;
      const version = str(p.kafkaVersion) ?? "";
      if (!isKraftVersion(version)) {
        reportViolation(`MSK ${c.name} runs Kafka ${JSON.stringify(version)} on ZooKeeper; use a KRaft version (3.9.x.kraft, llm-ha:kafka.version). KRaft is chosen at creation only: the cluster is replaced.`, c.urn);
      }
      const logs = record(record(p.loggingInfo)?.brokerLogs);
      const cw = record(logs?.cloudwatchLogs);
      const other = record(logs?.s3)?.enabled === true || record(logs?.firehose)?.enabled === true;
      if (cw?.enabled !== true && !other) {
        reportViolation(`MSK ${c.name} sends no broker logs (loggingInfo.brokerLogs): turn on CloudWatch logs to a log group with a retention.`, c.urn);
        continue;
      }
      if (cw?.enabled === true) {
        const group = findReferenced(args.resources, c, "loggingInfo", str(cw.logGroup), LOG_GROUP_TYPE);
        const days = num(record(group?.props)?.retentionInDays);
        if (group !== undefined && !(days !== undefined && days > 0)) {
          reportViolation(`MSK ${c.name} logs to log group ${group.name}, which has no retentionInDays: its events are kept (and billed) forever.`, c.urn);
        }
      }
    }
  },
};
