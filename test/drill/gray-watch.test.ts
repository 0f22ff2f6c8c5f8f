/**
 * The registry watch of the gray scenarios against a real redis-server: a node whose hash
 * was there and then is gone has expired; a node never seen (a standby still booting, its
 * first heartbeat not written) has not — `leader-isolated` counted two of those once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { sleep } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { watchRegistry } from "../../lab/drill/scenarios/gray-watch";
import type { ScenarioContext } from "../../lab/drill/scenarios/runner";

describe("watchRegistry", () => {
  let server: RedisServerHandle;
  let r: Redis;
  const keys = new RedisKeys("c1");
  beforeAll(async () => {
    server = await startRedisServer();
    r = new Redis(server.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await server?.stop();
  });

  it("counts a node as expired only once it was seen", async () => {
    const running = [{ id: "gpu-a1" }, { id: "gpu-c1" }];
    const ctx = { stack: { cluster: "c1", redis: { url: server.url }, running: () => running } } as unknown as ScenarioContext;
    const now = Date.now();
    await r.hset(keys.node("gpu-a1"), "status", "HEALTHY");
    await r.zadd(keys.nodes, now - 1500, "gpu-a1");
    const w = watchRegistry(ctx, { everyMs: 50 });
    await sleep(300);
    // gpu-a1's heartbeats stop reaching Redis: its hash expires. gpu-c1 boots and writes its first one late.
    await r.del(keys.node("gpu-a1"));
    await sleep(300);
    await r.hset(keys.node("gpu-c1"), "status", "HEALTHY");
    await sleep(300);
    const out = await w.stop();
    expect(out.samples).toBeGreaterThan(5);
    expect(out.expired).toEqual(["gpu-a1"]);
    // The heartbeat score was 1.5 s old when first read.
    expect(out.maxHeartbeatAgeMs).toBeGreaterThanOrEqual(1400);
  });
});
