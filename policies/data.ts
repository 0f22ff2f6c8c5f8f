// The data services the tiers lean on: Redis holds the node registry, the leader lease
// and fencing tokens (L1–L2); MSK is the durable queue the L4 tier falls back to.
import * as aws from "@pulumi/aws";
import { validateResourceOfType, type ResourceValidationPolicy } from "@pulumi/policy";
import { num, record, str, strings } from "./props";

export interface RedisConfig {
  minCacheClusters: number;
}

export const redisHaEncrypted: ResourceValidationPolicy = {
  name: "redis-ha-encrypted",
  description:
    "ElastiCache Redis has cluster mode disabled, automatic failover, multi-AZ, at least 2 cache clusters, TLS required, at-rest encryption, and authentication: an RBAC user group (userGroupIds: one user per role, llm-ha:redisRolePasswords) or, as the old way, an auth token (L2 cluster tier: the registry and the leader lease survive a node or AZ loss, and nobody on the network can forge node state or fencing tokens).",
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
