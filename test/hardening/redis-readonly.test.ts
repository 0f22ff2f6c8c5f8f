/**
 * Redis refuses writes for a while (`maxmemory 1`, `noeviction`), then takes
 * them again. Every node hash expires meanwhile, but no node stopped serving: the leader
 * must not publish an AZ worse than it was, nor a tier at L2+, and /az/health must not
 * answer 503. Real redis-server, real Fleet (registry + lease + controller) per node.
 */
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import { sleep, waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";

const I = 200;
let redis: RedisServerHandle;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedisServer();
  admin = new Redis(redis.url);
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

describe("Redis refusing writes", () => {
  it("publishes no false DOWN, no L2+ and no 503 while the nodes' hashes expire and come back", async () => {
    const cluster = freshCluster("ro");
    const keys = new RedisKeys(cluster);
    const fleets = ["a1", "a2", "b1", "b2"].map((id) => {
      const az = id[0];
      const f = new Fleet({
        redisUrl: redis.url, cluster, nodeId: id, az, intervalMs: I, log: testLogger(), metrics: new Registry(),
        lease: { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 },
      });
      const now = Date.now();
      f.start((): NodeReport => ({
        nodeId: id, az, gpus: 8, gpusExpected: 8, model: "m",
        decision: { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: Date.now(), loadScore: 1 },
      }));
      return f;
    });
    try {
      await waitFor("both AZs published OK", async () => (await admin.hget(keys.azState("a"), "state")) === "OK" && (await admin.hget(keys.azState("b"), "state")) === "OK", { timeoutMs: 10_000 });
      const seen: string[] = [];
      const watch = async (ms: number): Promise<void> => {
        const end = Date.now() + ms;
        while (Date.now() < end) {
          const [a, b, tier] = await Promise.all([admin.hget(keys.azState("a"), "state"), admin.hget(keys.azState("b"), "state"), admin.hget(keys.tier, "level")]);
          const health = await fleets[0].azHealth();
          if (a !== "OK" || b !== "OK" || (tier !== "L0" && tier !== "L1") || health.code !== 200) seen.push(`a=${a} b=${b} tier=${tier} /az/health=${health.code}`);
          await sleep(50);
        }
      };
      await admin.config("SET", "maxmemory-policy", "noeviction");
      await admin.config("SET", "maxmemory", "1");
      await watch(3000); // hashes expire after 3 periods (600 ms)
      expect(await admin.exists(keys.node("a1"))).toBe(0);
      await admin.config("SET", "maxmemory", "0");
      await watch(4000); // the false DOWN came right after writes were taken again
      await waitFor("every node heartbeating again", async () => (await admin.exists(...["a1", "a2", "b1", "b2"].map((id) => keys.node(id)))) === 4, { timeoutMs: 5000 });
      expect(seen).toEqual([]);
    } finally {
      await admin.config("SET", "maxmemory", "0");
      await Promise.all(fleets.map((f) => f.stop()));
    }
  }, 60_000);
});
