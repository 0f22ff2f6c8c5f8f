import * as pulumi from "@pulumi/pulumi";
import type { Settings } from "./read";
import { ROLE_NAMES, type RoleName } from "../../contracts/redis-roles";
import type { StackConfig } from "./stack-config";

/** `llm-ha:redis` and `redisAuthToken`: the registry and leader lease (ElastiCache). */
export function redisOf(s: Settings, azs: string[]): StackConfig["redis"] {
  const redis = s.obj("redis");
  const replicas = s.int(redis, "replicas", s.key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = s.cfg.getSecret("redisAuthToken");
  if (authToken === undefined) s.p.add(s.key("redisAuthToken"), "is required (pulumi config set --secret redisAuthToken <16-128 chars>)");
  const rolePasswordsObj = s.cfg.getSecretObject<Record<string, string>>("redisRolePasswords");
  // Every role gets its user: a role left out would have no way in (pulumi config set --secret --path 'redisRolePasswords.llmha-agent' …).
  // The break-glass user (SCRIPT KILL, FUNCTION KILL/LOAD; no key) is an operator's, never a workload's: its own
  // secret, `redisBreakglassPassword`; without it there is no such user.
  const breakglass = s.cfg.getSecret("redisBreakglassPassword");
  const rolePasswords = rolePasswordsObj
    ? ({
        ...Object.fromEntries(ROLE_NAMES.filter((r) => r !== "llmha-breakglass").map((r) => [r, pulumi.secret(rolePasswordsObj.apply((o) => o[r] ?? ""))])),
        ...(breakglass !== undefined ? { "llmha-breakglass": breakglass } : {}),
      } as Partial<Record<RoleName, pulumi.Output<string>>>)
    : undefined;
  return { nodeType: s.str(redis, "nodeType", s.key("redis.nodeType"), "cache.r7g.large"), replicas, authToken: authToken ?? pulumi.secret(""), rolePasswords };
}

/** `llm-ha:kafka`: the event log (MSK), replication factor 3. */
export function kafkaOf(s: Settings, azs: string[]): StackConfig["kafka"] {
  const kafka = s.obj("kafka");
  const c = {
    version: s.str(kafka, "version", s.key("kafka.version"), "3.6.0"),
    brokersPerAz: s.int(kafka, "brokersPerAz", s.key("kafka.brokersPerAz"), 1),
    instanceType: s.str(kafka, "instanceType", s.key("kafka.instanceType"), "kafka.m7g.large"),
    volumeSizeGb: s.int(kafka, "volumeSizeGb", s.key("kafka.volumeSizeGb"), 100),
  };
  if (c.brokersPerAz * azs.length < 3) s.p.add(s.key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  return c;
}
