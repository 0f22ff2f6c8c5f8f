/**
 * `/az/health` judges a publication's age on Redis's clock: the leader's fenced
 * write stamps `at` with Redis TIME, and the reader compares it with TIME in the same round
 * trip. Real redis-server; hosts' clocks are made to disagree through the stored fields.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { fencedHsetScript } from "../../agent/src/fleet/redis/scripts";
import { readAzHealth } from "../../agent/src/fleet/controller/az-health";
import { freshCluster, testLogger } from "../redis/helpers";

let server: RedisServerHandle;
let client: RedisClient;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "az-health-test", log: testLogger() });
  await client.whenReady(5000);
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

async function redisNowMs(): Promise<number> {
  const [s, us] = await client.redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

describe("/az/health freshness on Redis's clock", () => {
  it("the leader's fenced write stamps `at` with Redis TIME", async () => {
    const keys = new RedisKeys(freshCluster("azh"));
    const before = await redisNowMs();
    const r = await fencedHsetScript(client.redis, {
      fenceLast: keys.fenceLast, target: keys.azState("az-a"), events: keys.events, token: before + 1000, holder: "l", eventsMaxLen: 100,
      fields: { state: "DOWN", healthyCapacity: 0, totalCapacity: 16, updatedAt: Date.now() },
    });
    expect(r.accepted).toBe(true);
    const at = Number(await client.redis.hget(keys.azState("az-a"), "at"));
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual((await redisNowMs()) + 1);
    expect(await readAzHealth(client.redis, keys, "az-a")).toMatchObject({ code: 503, body: { state: "DOWN" } });
  });

  it("a DOWN a dead leader published 80 s ago is stale even to a reader whose clock says 20 s", async () => {
    const keys = new RedisKeys(freshCluster("azh"));
    // The leader's clock ran 60 s ahead of this reader's: by its own `updatedAt` the publication looks 20 s old.
    await client.redis.hset(keys.azState("az-a"), {
      state: "DOWN", healthyCapacity: 0, totalCapacity: 16, leader: "dead", token: 9,
      updatedAt: Date.now() - 20_000, at: (await redisNowMs()) - 80_000,
    });
    const r = await readAzHealth(client.redis, keys, "az-a", { staleAfterMs: 30_000 });
    expect(r).toMatchObject({ code: 200, body: { state: "DOWN", stale: true, staleReason: "too-old" } });
  });

  it("a fresh DOWN by Redis's clock answers 503 whatever the reader's clock says", async () => {
    const keys = new RedisKeys(freshCluster("azh"));
    await client.redis.hset(keys.azState("az-a"), {
      state: "DOWN", healthyCapacity: 0, totalCapacity: 16, leader: "l", token: 9,
      updatedAt: Date.now() - 120_000, at: (await redisNowMs()) - 1000,
    });
    expect(await readAzHealth(client.redis, keys, "az-a", { staleAfterMs: 30_000 })).toMatchObject({ code: 503, body: { state: "DOWN" } });
  });

  it("a fresh DOWN read by a node rejoining (its heartbeats back only moments ago) fails open: the leader has not seen the AZ back yet", async () => {
    const keys = new RedisKeys(freshCluster("azh"));
    await client.redis.hset(keys.azState("az-a"), { state: "DOWN", healthyCapacity: 0, totalCapacity: 16, leader: "l", token: 9, updatedAt: Date.now(), at: await redisNowMs() });
    expect(await readAzHealth(client.redis, keys, "az-a", { rejoining: true })).toMatchObject({ code: 200, body: { state: "DOWN", stale: true, staleReason: "rejoining" } });
    expect(await readAzHealth(client.redis, keys, "az-a", { rejoining: false })).toMatchObject({ code: 503, body: { state: "DOWN" } });
  });

  it("a publication without `at` (an older leader) falls back to the leader's updatedAt", async () => {
    const keys = new RedisKeys(freshCluster("azh"));
    await client.redis.hset(keys.azState("az-a"), { state: "DOWN", healthyCapacity: 0, totalCapacity: 16, updatedAt: Date.now() - 40_000 });
    expect(await readAzHealth(client.redis, keys, "az-a", { staleAfterMs: 30_000 })).toMatchObject({ code: 200, body: { stale: true, staleReason: "too-old" } });
  });
});
