/**
 * The fencing check is written once (fence.inc.lua) and included by both fenced scripts:
 * the leader's state writes (fenced-hset-3) and its registry sweep (sweep-5) must refuse
 * the same stale tokens, on a real redis-server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { fencedHsetScript, sweepScript } from "../../agent/src/fleet/redis/scripts";
import { freshCluster, testLogger } from "./helpers";

let server: RedisServerHandle;
let client: RedisClient;

beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "fence-test", log: testLogger() });
  expect(await client.whenReady(5000)).toBe(true);
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

function writers(keys: RedisKeys) {
  const write = (token: number, holder: string) =>
    fencedHsetScript(client.redis, { fenceLast: keys.fenceLast, target: keys.tier, events: keys.events, token, holder, eventsMaxLen: 100, fields: { level: "L0" } });
  const sweep = (token: number, holder: string) =>
    sweepScript(
      client.redis,
      { nodes: keys.nodes, members: keys.members, dead: keys.dead, events: keys.events, fenceLast: keys.fenceLast },
      { prefix: keys.prefix, token, holder, silentMs: 1000, forgetAfterMs: 60_000, eventsMaxLen: 100, limit: 10 },
    );
  return { write, sweep };
}

describe("one fencing check in both fenced scripts", () => {
  it("admits the highest token, refuses a lower one or the same one from another holder, in both scripts", async () => {
    const keys = new RedisKeys(freshCluster("fence"));
    const { write, sweep } = writers(keys);
    // A first write with no fence:last: the check seeds it from the server clock, so a small token is refused.
    expect(await write(5, "a")).toMatchObject({ accepted: false });
    const now = Date.now() + 60_000;
    expect(await write(now, "a")).toMatchObject({ accepted: true });
    expect(await sweep(now, "a")).toMatchObject({ accepted: true });
    expect(await sweep(now - 1, "b")).toEqual({ accepted: false, highestToken: now });
    expect(await write(now - 1, "b")).toEqual({ accepted: false, highestToken: now });
    expect(await sweep(now, "b")).toEqual({ accepted: false, highestToken: now });
    // A newer term raises the fence for both: the old holder is refused everywhere at once.
    expect(await sweep(now + 1, "b")).toMatchObject({ accepted: true });
    expect(await write(now, "a")).toEqual({ accepted: false, highestToken: now + 1 });
  });

  it("refuses every token from before Redis lost fence:last", async () => {
    const keys = new RedisKeys(freshCluster("fence"));
    const { write, sweep } = writers(keys);
    const old = Date.now() - 60_000;
    await client.redis.hset(keys.fenceLast, "token", old - 1, "holder", "");
    expect(await write(old, "a")).toMatchObject({ accepted: true });
    await client.redis.del(keys.fenceLast);
    expect(await sweep(old, "a")).toMatchObject({ accepted: false });
    expect(await write(old, "a")).toMatchObject({ accepted: false });
  });
});
