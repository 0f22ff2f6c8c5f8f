/**
 * What is read from Redis is not trusted, on a real redis-server: a forged or
 * corrupted fence value (`HSET fence:last token 1e400`) neither gives the next leader the
 * token `inf` nor freezes every fenced write — the acquisition leaves it out, heals the fence
 * and reports it; a node record no agent could have written is left out of the snapshot the
 * controller computes AZ states from, and named.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { readSnapshot } from "../../agent/src/fleet/redis/registry";
import { acquireScript, fencedHsetScript, heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "./helpers";

let server: RedisServerHandle;
let client: RedisClient;

beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "distrust-test", log: testLogger(), env: {} });
  expect(await client.whenReady(5000)).toBe(true);
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

const write = (keys: RedisKeys, token: number, holder: string) =>
  fencedHsetScript(client.redis, { fenceLast: keys.fenceLast, target: keys.tier, events: keys.events, token, holder, eventsMaxLen: 100, fields: { level: "L0" } });

describe("poisoned fence values", () => {
  for (const [name, poison] of [
    ["fence:last token 1e400", (k: RedisKeys) => client.redis.hset(k.fenceLast, "token", "1e400")],
    ["fence:last token far in the future", (k: RedisKeys) => client.redis.hset(k.fenceLast, "token", String(Date.now() + 10 * 365 * 86_400_000))],
    ["fence counter inf", (k: RedisKeys) => client.redis.set(k.fence, "inf")],
    ["fence:last token -5.5", (k: RedisKeys) => client.redis.hset(k.fenceLast, "token", "-5.5")],
  ] as const) {
    it(`${name}: the next acquisition takes a sane token, says so, and its writes are admitted`, async () => {
      const keys = new RedisKeys(freshCluster("poison"));
      await poison(keys);
      const r = await acquireScript(client.redis, keys, "leader-a", 5000, 0);
      expect(r.acquired).toBe(true);
      if (!r.acquired) return;
      expect(Number.isSafeInteger(r.token)).toBe(true);
      expect(Math.abs(r.token - Date.now())).toBeLessThan(60_000);
      expect(r.poisoned).toMatch(/^fence/);
      expect((await write(keys, r.token, "leader-a")).accepted).toBe(true);
      expect(await client.redis.hget(keys.tier, "level")).toBe("L0");
    });
  }

  it("a floor of Infinity from a confused contender is left out too", async () => {
    const keys = new RedisKeys(freshCluster("poison"));
    const r = await acquireScript(client.redis, keys, "leader-a", 5000, Infinity);
    expect(r.acquired && Number.isSafeInteger(r.token)).toBe(true);
  });

  it("poisoned under a sitting leader: its next write is refused once with a sane highest token, the re-acquisition heals and reports it", async () => {
    const keys = new RedisKeys(freshCluster("poison"));
    const first = await acquireScript(client.redis, keys, "leader-a", 5000, 0);
    if (!first.acquired) throw new Error("not acquired");
    await client.redis.hset(keys.fenceLast, "token", "1e400");
    const refused = await write(keys, first.token, "leader-a");
    expect(refused.accepted).toBe(false);
    if (refused.accepted) return;
    expect(Number.isSafeInteger(refused.highestToken)).toBe(true);
    const again = await acquireScript(client.redis, keys, "leader-a", 5000, refused.highestToken);
    if (!again.acquired) throw new Error("not re-acquired");
    expect(again.token).toBeGreaterThan(refused.highestToken);
    expect(again.poisoned).toContain("1e400");
    expect((await write(keys, again.token, "leader-a")).accepted).toBe(true);
    // reported once: the next acquisition finds nothing to report
    await client.redis.del(keys.leader);
    const third = await acquireScript(client.redis, keys, "leader-b", 5000, 0);
    expect(third.acquired && third.poisoned).toBe("");
  });
});

describe("node records the controller reads", () => {
  it("leaves out forged or corrupted records and names them; real nodes stay", async () => {
    const keys = new RedisKeys(freshCluster("records"));
    for (const id of ["n1", "n2"]) {
      await heartbeatScript(
        client.redis,
        { node: keys.node(id), available: keys.azAvailable("az-a"), events: keys.events, nodes: keys.nodes, members: keys.members, azs: keys.azs, dead: keys.dead },
        {
          nodeId: id, az: "az-a", status: "HEALTHY", phase: "serving", weight: 100, loadScore: 1, gpus: 8, gpusExpected: 8, model: "m", updatedAt: Date.now(),
          ttlMs: 60_000, takesTraffic: true, soft: "", hard: "", eventsMaxLen: 100, prefix: keys.prefix, instance: "",
        },
      );
    }
    const forge = async (id: string, member: string, c: string): Promise<void> => {
      await client.redis.hset(keys.members, id, member);
      await client.redis.hset(keys.node(id), "c", c);
    };
    await forge("f-az", "az-x|8|1", "az-x|UNHEALTHY|down|0|0|8||GPU_LOST");
    await forge("f-gpus", "az-a|9999|1", "az-a|UNHEALTHY|down|0|0|9999||GPU_LOST");
    await forge("f-mismatch", "az-a|8|1", "az-b|HEALTHY|serving|100|8|8||");
    await forge("f-weight", "az-a|8|1", "az-a|HEALTHY|serving|1e400|8|8||");
    await forge("f-status", "az-a|8|1", "az-a|PWNED|serving|100|8|8||");
    const snap = await readSnapshot(client.redis, keys);
    expect(snap.nodes.map((n) => n.nodeId).sort()).toEqual(["n1", "n2"]);
    expect(Object.fromEntries((snap.skipped ?? []).map((s) => [s.nodeId, s.reason]))).toEqual({
      "f-az": expect.stringMatching(/unknown AZ "az-x"/),
      "f-gpus": expect.stringMatching(/9999/),
      "f-mismatch": expect.stringMatching(/differs/),
      "f-weight": expect.stringMatching(/weight/),
      "f-status": expect.stringMatching(/status/),
    });
  });
});
