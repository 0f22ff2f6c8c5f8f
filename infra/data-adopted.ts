/**
 * The data tier a stack adopts instead of creating (`llm-ha:redis.existing`,
 * `llm-ha:kafka.existing`): an ElastiCache replication group and an MSK cluster the operator
 * runs. The stack reads them by data source and changes only what llm-ha's clients need there:
 * on Redis, one RBAC user per role added to the given user group and the clients' ingress
 * rules; on MSK, the L1 pods' ingress rule. Their settings (TLS, failover, `noeviction`, IAM
 * auth, server properties) are the operator's: `llm-ha preflight --online` checks them.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { RoleName } from "../contracts/redis-roles";
import { clientIngress } from "./client-ingress";
import type { ExistingKafkaConfig, ExistingRedisConfig } from "./config/data";
import { createRoleUserList } from "./redis-users";

/** The port MSK serves SASL/IAM over TLS on, inside the VPC. */
export const MSK_IAM_PORT = 9098;

export interface AdoptedRedisArgs {
  existing: ExistingRedisConfig;
  /** Key namespace of the roles' key patterns (`LLMHA_CLUSTER`). Default `default`. */
  cluster?: string;
  /** One password per role: each role's user joins `existing.userGroupId`. */
  rolePasswords: Partial<Record<RoleName, pulumi.Input<string>>>;
  /** The clients' security groups, let in on `existing.securityGroupId`. */
  clientSecurityGroupIds: Record<string, pulumi.Input<string>>;
}

/** The adopted group's id, primary endpoint and port, after its role users and ingress rules. */
export function adoptRedis(name: string, args: AdoptedRedisArgs, parent: pulumi.Resource): { replicationGroupId: pulumi.Output<string>; primaryEndpoint: pulumi.Output<string>; port: pulumi.Output<number> } {
  const { existing } = args;
  const users = createRoleUserList(name, args.cluster ?? "default", args.rolePasswords, parent);
  // The group is the operator's: the stack adds its members one by one (and removes only those on destroy).
  for (const [role, user] of Object.entries(users) as [RoleName, aws.elasticache.User][]) {
    new aws.elasticache.UserGroupAssociation(`${name}-member-${role}`, { userGroupId: existing.userGroupId, userId: user.userId }, { parent });
  }
  const rg = aws.elasticache.getReplicationGroupOutput({ replicationGroupId: existing.replicationGroupId }, { parent });
  // The group's own port (6379 unless its creator chose another).
  clientIngress(name, existing.securityGroupId, args.clientSecurityGroupIds, rg.port, parent);
  return { replicationGroupId: pulumi.output(existing.replicationGroupId), primaryEndpoint: rg.primaryEndpointAddress, port: rg.port };
}

/** The adopted cluster's ARN and its SASL/IAM bootstrap brokers, after the clients' ingress rules. */
export function adoptKafka(name: string, existing: ExistingKafkaConfig, clientSecurityGroupIds: Record<string, pulumi.Input<string>>, parent: pulumi.Resource): { clusterArn: pulumi.Output<string>; bootstrapBrokers: pulumi.Output<string> } {
  clientIngress(name, existing.securityGroupId, clientSecurityGroupIds, MSK_IAM_PORT, parent);
  const brokers = aws.msk.getBootstrapBrokersOutput({ clusterArn: existing.clusterArn }, { parent });
  return { clusterArn: pulumi.output(existing.clusterArn), bootstrapBrokers: brokers.bootstrapBrokersSaslIam };
}
