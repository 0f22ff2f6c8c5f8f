/**
 * Every connection follows the endpoint: after a failover a connection that never
 * writes — the lease's own, which acquires only when the key is free — must not stay on the old
 * server, whether that one turned replica or, on the far side of a partition, is a primary again
 * while the endpoint's name points at the new one. Real redis-servers behind a loopback link
 * standing in for the endpoint's name.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { followEndpoint } from "../../agent/src/fleet/redis/follow";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { FreezableProxy, testLogger } from "./helpers";

const log = testLogger();
let a: RedisServerHandle;
let b: RedisServerHandle;

beforeAll(async () => {
  [a, b] = await Promise.all([startRedisServer(), startRedisServer()]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

/** Client names connected to a server. */
async function namesOn(s: RedisServerHandle): Promise<string[]> {
  const c = createRedisClient(s.url, { name: "follow-admin", log, followEndpointMs: 0 });
  try {
    await c.whenReady(5000);
    const list = String(await c.redis.call("CLIENT", "LIST"));
    return [...list.matchAll(/ name=(\S+)/g)].map((m) => m[1]).filter((n) => n.startsWith("follow-") && n !== "follow-admin");
  } finally {
    await c.close();
  }
}

describe("every connection follows the endpoint", () => {
  it("a connection that only reads leaves a server the process's writing connection has left, though that one is still a primary", async () => {
    const proxy = await FreezableProxy.start(a.port);
    const url = `redis://127.0.0.1:${proxy.port}`;
    const writer = createRedisClient(url, { name: "follow-writer", log });
    const reader = createRedisClient(url, { name: "follow-reader", log });
    const lease = writer.redis.duplicate({ connectionName: "follow-lease" });
    lease.on("error", () => undefined);
    followEndpoint(lease, { everyMs: 1000 });
    const clients: RedisClient[] = [writer, reader];
    try {
      await Promise.all(clients.map((c) => c.whenReady(5000)));
      await waitFor("all three on a", async () => (await namesOn(a)).length === 3, { timeoutMs: 5000 });
      // The endpoint's name moves to b; a stays a primary (the far side of a partition).
      proxy.retarget(b.port);
      // The writer's connection breaks (as on a READONLY or a reset) and reconnects: to b.
      const admin = createRedisClient(a.url, { name: "follow-admin", log, followEndpointMs: 0 });
      await admin.whenReady(5000);
      const id = / id=(\d+) .*name=follow-writer /.exec(` ${String(await admin.redis.call("CLIENT", "LIST"))}`)?.[1];
      expect(id).toBeDefined();
      await admin.redis.call("CLIENT", "KILL", "ID", id!);
      await admin.close();
      const t0 = Date.now();
      await waitFor("every connection on b, none left on a", async () => (await namesOn(a)).length === 0 && (await namesOn(b)).length === 3, { timeoutMs: 8000, everyMs: 100 });
      process.stderr.write(`[follow] every connection on the new server ${Date.now() - t0} ms after the writer moved\n`);
    } finally {
      lease.disconnect(false);
      await Promise.all(clients.map((c) => c.close()));
      await proxy.close();
    }
  }, 30_000);

  it("connections on a server that turned replica reconnect without a write to tell them", async () => {
    const proxy = await FreezableProxy.start(b.port);
    const url = `redis://127.0.0.1:${proxy.port}`;
    const reader = createRedisClient(url, { name: "follow-reader2", log });
    try {
      await reader.whenReady(5000);
      await waitFor("reader on b", async () => (await namesOn(b)).includes("follow-reader2"), { timeoutMs: 5000 });
      proxy.retarget(a.port);
      const admin = createRedisClient(b.url, { name: "follow-admin", log, followEndpointMs: 0 });
      await admin.whenReady(5000);
      await admin.redis.call("REPLICAOF", "127.0.0.1", String(a.port));
      await admin.close();
      await waitFor("reader on a", async () => (await namesOn(a)).includes("follow-reader2"), { timeoutMs: 8000, everyMs: 100 });
      expect(await namesOn(b)).not.toContain("follow-reader2");
    } finally {
      await reader.close();
      const admin = createRedisClient(b.url, { name: "follow-admin", log, followEndpointMs: 0 });
      await admin.whenReady(5000);
      await admin.redis.call("REPLICAOF", "NO", "ONE");
      await admin.close();
      await proxy.close();
    }
  }, 30_000);
});
