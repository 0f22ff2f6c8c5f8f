/**
 * The ElastiCache RBAC users of llm-ha's Redis roles (contracts/redis-roles.ts): one per role,
 * in the stack's own user group or added to an adopted one (infra/data-adopted.ts).
 */
import * as crypto from "node:crypto";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { accessString, redisRoles, type RoleName } from "../contracts/redis-roles";
import { tagged } from "./tags";

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

/**
 * One ElastiCache RBAC user per role with a password, and a user group with them and a
 * `default` user that is off (ElastiCache requires a user named `default` in every group).
 */
export function createRoleUsers(
  name: string,
  cluster: string,
  passwords: Partial<Record<RoleName, pulumi.Input<string>>>,
  defaultPassword: pulumi.Input<string>,
  parent: pulumi.Resource,
): aws.elasticache.UserGroup {
  const stack = pulumi.getStack();
  const off = new aws.elasticache.User(
    `${name}-user-default`,
    { userId: stackScopedId(stack, name, "default-off"), userName: "default", engine: "redis", accessString: "off resetkeys resetchannels -@all", passwords: [defaultPassword], tags: tagged() },
    { parent },
  );
  const users = [off, ...Object.values(createRoleUserList(name, cluster, passwords, parent))];
  return new aws.elasticache.UserGroup(`${name}-users`, { userGroupId: stackScopedId(stack, name, "llmha"), engine: "redis", userIds: users.map((u) => u.userId), tags: tagged() }, { parent });
}

/**
 * One ElastiCache RBAC user per role with a password (its access string from
 * contracts/redis-roles.ts), by role: the members of the stack's own user group, or of an
 * adopted one (infra/data-adopted.ts).
 */
export function createRoleUserList(name: string, cluster: string, passwords: Partial<Record<RoleName, pulumi.Input<string>>>, parent: pulumi.Resource): Partial<Record<RoleName, aws.elasticache.User>> {
  const stack = pulumi.getStack();
  const users: Partial<Record<RoleName, aws.elasticache.User>> = {};
  for (const role of redisRoles(cluster)) {
    const pw = passwords[role.name];
    if (pw === undefined) continue;
    users[role.name] = new aws.elasticache.User(
      `${name}-user-${role.name}`,
      { userId: stackScopedId(stack, name, role.name), userName: role.name, engine: "redis", accessString: accessString(role), passwords: [nonBlank(pw, role.name)], tags: tagged() },
      { parent },
    );
  }
  return users;
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
