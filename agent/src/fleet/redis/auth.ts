/**
 * Who a process is to Redis: the ACL user and its password, given beside `LLMHA_REDIS_URL`
 * (never on the command line, where `ps` shows it), and Redis URLs built with every part
 * encoded (a token holding `#`, `?`, `%` or `@` stays one token).
 *
 * | variable                    | meaning |
 * |-----------------------------|---------|
 * | `LLMHA_REDIS_USER`          | ACL user (`llmha-agent`, …); overrides the URL's user |
 * | `LLMHA_REDIS_PASSWORD_FILE` | file holding the password (a mounted secret; one trailing newline is dropped) |
 *
 * Without any of them the URL's own user and password are used (the old way: no user = the
 * `default` user). A password stays out of the environment too: children such as nvidia-smi
 * inherit it.
 */
import { readFileSync } from "node:fs";

export class RedisAuthError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable} ${message}`);
    this.name = "RedisAuthError";
  }
}

export interface RedisAuth {
  username?: string;
  password?: string;
}

/** The user and password from the environment (empty when none is set). */
export function redisAuthFromEnv(env: NodeJS.ProcessEnv): RedisAuth {
  const out: RedisAuth = {};
  const user = env.LLMHA_REDIS_USER;
  if (user) {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(user)) throw new RedisAuthError("LLMHA_REDIS_USER", "must be 1-64 letters, digits, '.', '_' or '-'");
    out.username = user;
  }
  const file = env.LLMHA_REDIS_PASSWORD_FILE;
  if (file) {
    try {
      out.password = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (err) {
      throw new RedisAuthError("LLMHA_REDIS_PASSWORD_FILE", `cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    }
    if (out.password === "") throw new RedisAuthError("LLMHA_REDIS_PASSWORD_FILE", `is empty (${file})`);
  }
  return out;
}

export { redisUrl } from "../../../../contracts/redis-roles";
