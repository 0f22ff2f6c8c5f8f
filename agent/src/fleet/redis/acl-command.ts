/**
 * `llm-ha redis-acl`: prints the Redis roles (roles.ts) as a redis-server ACL file, or as the
 * access strings ElastiCache takes. Passwords come from files (one per role, named after it),
 * never from the command line.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { flagErrorMessage } from "../../../../contracts/did-you-mean";
import { RedisKeys } from "./keys";
import { accessString, aclFile, redisRoles, ROLE_NAMES, RoleError } from "./roles";

export const REDIS_ACL_HELP = `llm-ha redis-acl — the Redis roles as a redis-server ACL file (default user off)

Usage:
  llm-ha redis-acl --password-dir DIR [--cluster NAME] > users.acl
  llm-ha redis-acl --access-strings [--cluster NAME]      ElastiCache access strings (JSON)

  --password-dir DIR  one file per role, named after it (${ROLE_NAMES.join(", ")}),
                      holding its password (≥ 16 characters); roles without a file get no user
  --cluster NAME      key namespace (default $LLMHA_CLUSTER, else "default")
  --access-strings    print {role: accessString} for ElastiCache RBAC users instead

Start Redis with it: redis-server --aclfile users.acl
`;

/** The passwords in a folder: file name = role, content = password (one trailing newline dropped). */
export function readPasswordDir(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(dir)) {
    if (!(ROLE_NAMES as readonly string[]).includes(name)) continue;
    out.set(name, readFileSync(join(dir, name), "utf8").replace(/\r?\n$/, ""));
  }
  return out;
}

export function redisAclCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): number {
  const fail = (msg: string): number => {
    process.stderr.write(`llm-ha redis-acl: ${msg}\n`);
    return 2;
  };
  let values: { "password-dir"?: string; cluster?: string; "access-strings"?: boolean; help?: boolean };
  const options = { "password-dir": { type: "string" }, cluster: { type: "string" }, "access-strings": { type: "boolean" }, help: { type: "boolean", short: "h" } } as const;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, options }));
  } catch (err) {
    return fail(`${flagErrorMessage(err, Object.keys(options))} (see llm-ha redis-acl --help)`);
  }
  if (values.help) {
    process.stdout.write(REDIS_ACL_HELP);
    return 0;
  }
  const cluster = values.cluster ?? (env.LLMHA_CLUSTER || "default");
  try {
    new RedisKeys(cluster);
  } catch (err) {
    return fail(`--cluster: ${(err as Error).message}`);
  }
  if (values["access-strings"]) {
    process.stdout.write(`${JSON.stringify(Object.fromEntries(redisRoles(cluster).map((r) => [r.name, accessString(r)])), null, 2)}\n`);
    return 0;
  }
  if (!values["password-dir"]) return fail("--password-dir is required (passwords are never taken from the command line)");
  let passwords: Map<string, string>;
  try {
    passwords = readPasswordDir(values["password-dir"]);
  } catch (err) {
    return fail(`--password-dir cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  if (passwords.size === 0) return fail(`--password-dir holds no file named after a role (${ROLE_NAMES.join(", ")})`);
  try {
    process.stdout.write(aclFile(cluster, passwords));
  } catch (err) {
    if (err instanceof RoleError) return fail(err.message);
    throw err;
  }
  return 0;
}
