/**
 * The Redis roles (contracts/redis-roles.ts) as redis-server takes them: an ACL file with the
 * default user off (`llm-ha redis-acl`, the drill, the tests).
 */
import { createHash } from "node:crypto";
import { aclRules, redisRole, redisRoles, RoleError } from "../../../../contracts/redis-roles";

export { accessString, aclRules, redisRole, redisRoles, ROLE_NAMES, RoleError, type RedisRole, type RoleName } from "../../../../contracts/redis-roles";

/** A password as redis-server stores it in an ACL file: `#` + SHA-256, so the file holds no secret. */
export function passwordHash(password: string): string {
  return `#${createHash("sha256").update(password, "utf8").digest("hex")}`;
}

/**
 * A redis-server ACL file: the default user off (no one has every permission), one line per
 * role that has a password. Roles without a password are left out (no way in).
 */
export function aclFile(cluster: string, passwords: ReadonlyMap<string, string>): string {
  // redis-server refuses comment lines in an ACL file: only `user` lines.
  const lines = ["user default off resetkeys resetchannels -@all"];
  for (const role of redisRoles(cluster)) {
    const pw = passwords.get(role.name);
    if (pw === undefined) continue;
    if (pw.length < 16) throw new RoleError(`the password of ${role.name} must have at least 16 characters`);
    lines.push(`user ${role.name} on ${passwordHash(pw)} ${aclRules(role)}`);
  }
  for (const name of passwords.keys()) redisRole(cluster, name);
  return `${lines.join("\n")}\n`;
}
