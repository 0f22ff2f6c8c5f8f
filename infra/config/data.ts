import * as pulumi from "@pulumi/pulumi";
import type { Settings } from "./read";
import { WORKLOAD_ROLE_NAMES as WORKLOAD_ROLES, type RoleName } from "../../contracts/redis-roles";
import type { StackConfig } from "./stack-config";
import { DEFAULT_KAFKA_VERSION } from "../kafka";

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
  const replicas = s.int(redis, "replicas", s.key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = s.cfg.getSecret("redisAuthToken");
  // Read in clear to check the roles (the values stay secrets: each is wrapped again below).
  const given = s.cfg.getObject<unknown>("redisRolePasswords");
  // The break-glass user (SCRIPT KILL, FUNCTION KILL/LOAD; no key) is an operator's, never a workload's: its own
  // secret, `redisBreakglassPassword`; without it there is no such user.
  const breakglass = s.cfg.getSecret("redisBreakglassPassword");
  let rolePasswords: Partial<Record<RoleName, pulumi.Output<string>>> | undefined;
  if (given === undefined) {
    if (authToken === undefined) s.p.add(s.key("redisRolePasswords"), `is required: one password per Redis role (${ROLE_PASSWORDS_HOW})`);
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
  return { nodeType: s.str(redis, "nodeType", s.key("redis.nodeType"), "cache.r7g.large"), replicas, authToken, rolePasswords };
}

/** `llm-ha:kafka`: the event log (MSK), replication factor 3. */
export function kafkaOf(s: Settings, azs: string[]): StackConfig["kafka"] {
  const kafka = s.obj("kafka");
  const c = {
    version: s.str(kafka, "version", s.key("kafka.version"), DEFAULT_KAFKA_VERSION),
    brokersPerAz: s.int(kafka, "brokersPerAz", s.key("kafka.brokersPerAz"), 1),
    instanceType: s.str(kafka, "instanceType", s.key("kafka.instanceType"), "kafka.m7g.large"),
    volumeSizeGb: s.int(kafka, "volumeSizeGb", s.key("kafka.volumeSizeGb"), 100),
  };
  if (c.brokersPerAz * azs.length < 3) s.p.add(s.key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  return c;
}
