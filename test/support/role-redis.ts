/**
 * A redis-server loaded with the lab's ACL file for one test file, and clients logged in per
 * role (or as the admin that arranges the test), all stopped after the file. Call at the top:
 *
 *   const env = roleRedis("early");
 *   … await env.as("llmha-agent") … env.keys.events …
 */
import { afterAll, beforeAll, expect } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { RoleName } from "../../contracts/redis-roles";
import { labRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { testLogger } from "../redis/helpers";

export interface RoleRedis {
  readonly keys: RedisKeys;
  /** A connected client logged in as `role`, or as the admin with null (closed after the file). */
  as(role: RoleName | null): Promise<RedisClient>;
}

export function roleRedis(name: string): RoleRedis {
  const log = testLogger();
  const acl = labRedisAcl(name);
  const clients: RedisClient[] = [];
  let server: RedisServerHandle | undefined;
  beforeAll(async () => {
    server = await startRedisServer({ acl });
  });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await server?.stop();
  });
  return {
    keys: new RedisKeys(acl.cluster),
    async as(role) {
      const c = createRedisClient(role ? server!.urlAs(role) : server!.url, { name: `${name}-${role ?? "admin"}`, log, env: {} });
      clients.push(c);
      expect(await c.whenReady(5000)).toBe(true);
      return c;
    },
  };
}
