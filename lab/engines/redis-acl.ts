/**
 * The lab's Redis with the production roles (agent/src/fleet/redis/roles.ts): a random password per
 * role, the rendered ACL file (default user off) and, for the harness itself (the drill's
 * observer, fault injection, replication and the endpoint's check), one lab-only admin user.
 * Role passwords carry `#`, `?`, `%` and `@` on purpose: every URL and file on the way must
 * keep them intact.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { redisUrl } from "../../agent/src/fleet/redis/auth";
import { aclFile, passwordHash, ROLE_NAMES, type RoleName } from "../../agent/src/fleet/redis/roles";

/** The lab harness's own user: everything, on every key (never given to a runtime process). */
export const LAB_ADMIN_USER = "llmha-lab-admin";

export interface LabRedisAcl {
  readonly cluster: string;
  readonly passwords: ReadonlyMap<RoleName, string>;
  /** Alphanumeric: it travels in HAProxy's `tcp-check send` and the sentinels' config. */
  readonly adminPassword: string;
}

export function labRedisAcl(cluster: string): LabRedisAcl {
  const passwords = new Map<RoleName, string>();
  for (const r of ROLE_NAMES) passwords.set(r, `${randomBytes(12).toString("base64url")}#?%@x`);
  return { cluster, passwords, adminPassword: randomBytes(16).toString("hex") };
}

/** The ACL file redis-server loads: the roles plus the harness's admin. */
export function labAclText(acl: LabRedisAcl): string {
  return `${aclFile(acl.cluster, acl.passwords)}user ${LAB_ADMIN_USER} on ${passwordHash(acl.adminPassword)} ~* &* +@all\n`;
}

/** Writes the ACL file into `dir`; returns its path. */
export function writeLabAcl(dir: string, acl: LabRedisAcl): string {
  const path = join(dir, "users.acl");
  writeFileSync(path, labAclText(acl), { mode: 0o600 });
  return path;
}

/** A URL that logs in as `role` (or the admin) on 127.0.0.1:port. */
export function labUrlAs(acl: LabRedisAcl, port: number, role: RoleName | typeof LAB_ADMIN_USER): string {
  const password = role === LAB_ADMIN_USER ? acl.adminPassword : acl.passwords.get(role);
  return redisUrl({ host: "127.0.0.1", port, username: role, password });
}

/** Writes `role`'s password into `dir/<role>` and returns the env that makes an llm-ha process log in as it. */
export function labRoleEnv(acl: LabRedisAcl, dir: string, role: RoleName): { LLMHA_REDIS_USER: string; LLMHA_REDIS_PASSWORD_FILE: string } {
  const file = join(dir, `${role}.password`);
  writeFileSync(file, `${acl.passwords.get(role) ?? ""}\n`, { mode: 0o600 });
  return { LLMHA_REDIS_USER: role, LLMHA_REDIS_PASSWORD_FILE: file };
}
