/**
 * The set-up of a node-identity test on real engines: a redis-server loaded with the rendered ACL
 * file, a test token issuer (test-issuer.ts), a scratch folder for token files, and clients per
 * role, all stopped after the file. Call at the top of a test file:
 *
 *   const env = identityRedis("statid");
 *   … await env.as("llmha-controller") … env.tokenOf("a1") …
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JWTVerifyGetKey } from "jose";
import { afterAll, beforeAll, expect } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import type { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { labRedisAcl, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import type { RoleName } from "../../contracts/redis-roles";
import { testLogger } from "../redis/helpers";
import { testIssuer } from "./test-issuer";

export interface IdentityRedis {
  readonly server: RedisServerHandle;
  readonly acl: LabRedisAcl;
  readonly dir: string;
  readonly jwks: JWTVerifyGetKey;
  tokenOf(node: string): Promise<string>;
  /** A connected client logged in as `role` (closed after the file). */
  as(role: RoleName, name?: string): Promise<RedisClient>;
  /** A connected client logged in as the lab's admin (what the test arranges with), closed after the file. */
  asAdmin(): Promise<RedisClient>;
  /** A lease stopped after the file. */
  track(lease: LeaderLease): void;
}

export function identityRedis(name: string): IdentityRedis {
  const log = testLogger();
  const clients: RedisClient[] = [];
  const leases: LeaderLease[] = [];
  const state: { server?: RedisServerHandle; acl?: LabRedisAcl; dir?: string; jwks?: JWTVerifyGetKey; tokenOf?: (node: string) => Promise<string> } = {};
  beforeAll(async () => {
    state.acl = labRedisAcl(name);
    state.server = await startRedisServer({ acl: state.acl });
    state.dir = mkdtempSync(join(tmpdir(), `llmha-${name}-`));
    const issuer = await testIssuer();
    state.jwks = issuer.jwks;
    state.tokenOf = issuer.tokenOf;
  });
  afterAll(async () => {
    for (const l of leases) l.abandon();
    for (const c of clients) await c.close();
    await state.server?.stop();
    if (state.dir) rmSync(state.dir, { recursive: true, force: true });
  });
  const connect = async (url: string, clientName: string): Promise<RedisClient> => {
    const c = createRedisClient(url, { name: clientName, log, env: {} });
    clients.push(c);
    expect(await c.whenReady(5000)).toBe(true);
    return c;
  };
  const must = <K extends keyof typeof state>(k: K): NonNullable<(typeof state)[K]> => {
    const v = state[k];
    if (v === undefined) throw new Error(`identityRedis(${name}): ${String(k)} used before beforeAll ran`);
    return v as NonNullable<(typeof state)[K]>;
  };
  return {
    get server() { return must("server"); },
    get acl() { return must("acl"); },
    get dir() { return must("dir"); },
    get jwks() { return must("jwks"); },
    tokenOf: (node) => must("tokenOf")(node),
    as: (role, clientName) => connect(must("server").urlAs(role), clientName ?? `${name}-${role}`),
    asAdmin: () => connect(must("server").url, `${name}-admin`),
    track: (lease) => void leases.push(lease),
  };
}
