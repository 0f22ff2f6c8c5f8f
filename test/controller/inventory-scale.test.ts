/**
 * A leader with an inventory of thousands of GPU nodes must still decide. Its fenced
 * `inventory` hash has a field per node; written whole in one call, more than 253 nodes exceeded
 * the function's argument bound and every period failed (no AZ state was ever published). Now
 * the leader writes only what changed, the bound admits MAX_FLEET_NODES and the script sets the
 * fields in slices. On a real redis-server with the ACL roles: 5,000 nodes in three AZs heartbeat as `llmha-agent`; the
 * leader (`llmha-controller`) decides every AZ OK; a node served for the first time costs one
 * field, a node leaving the list leaves the hash.
 */
import { describe, expect, it } from "vitest";
import { Controller } from "../../agent/src/fleet/controller/controller";
import type { Inventory, InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import type { RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { heartbeatArgs } from "../../agent/src/fleet/redis/registry";
import { heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import { waitFor } from "../../agent/src/util/net";
import { roleRedis } from "../support/role-redis";
import { testLogger } from "../redis/helpers";

const log = testLogger();
// Above 253 nodes the whole hash exceeded the argument bound; above about 4,000 one HSET of
// every field exceeded Lua's unpack limit (the script now sets them in slices).
const N = 5000;
const azOf = (i: number): string => `az-${"abc"[i % 3]}`;
const LAST_AZ = azOf(N - 1);
const BEATS_IN_FLIGHT = 250;
const { keys, as } = roleRedis("invscale");

function beat(agent: RedisClient, id: string, az: string, serving: boolean): Promise<unknown> {
  const now = Date.now();
  const { k, a } = heartbeatArgs(keys, {
    nodeId: id, az, gpus: 8, gpusExpected: 8, model: "m",
    decision: { status: "HEALTHY", phase: serving ? "serving" : "loading", weight: serving ? 100 : 0, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 0.5 },
  }, 60_000, 1000);
  return heartbeatScript(agent.redis, k, a);
}

describe("a leader over hundreds of inventory nodes", () => {
  it(`decides every AZ at ${N} nodes and writes its inventory hash by the field`, async () => {
    const agent = await as("llmha-agent");
    const ctl = await as("llmha-controller");
    const admin = await as(null);
    let list: InventoryNode[] = Array.from({ length: N }, (_, i) => ({ nodeId: `n-${i}`, az: azOf(i), gpus: 8 }));
    const inventory: Inventory = { source: "test", list: async () => list };
    // All serving but the last node, still loading its model. A few hundred beats in flight at a
    // time, as a fleet's agents send them: all 5,000 pipelined on one connection put the last
    // reply behind every other, past the client's 1 s command timeout on a loaded machine.
    for (let at = 0; at < N; at += BEATS_IN_FLIGHT) {
      await Promise.all(list.slice(at, at + BEATS_IN_FLIGHT).map((n, j) => beat(agent, n.nodeId, n.az, at + j < N - 1)));
    }
    const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "invscale-leader", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    lease.start();
    try {
      await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
      const controller = new Controller({ redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, settings: { intervalMs: 1000 }, inventory });
      const e = await controller.tick();
      // (The node still loading is no capacity yet: not counted in its AZ.)
      const count = (az: string): number => list.filter((n, i) => n.az === az && i < N - 1).length;
      expect(e?.azs.map((a) => [a.az, a.state, a.nodes])).toEqual(["az-a", "az-b", "az-c"].map((az) => [az, "OK", count(az)]));
      const h = await admin.redis.hgetall(keys.inventory);
      expect(Object.keys(h).filter((f) => f.startsWith("n-")).length).toBe(N);
      expect(h[`n-${N - 1}`]).toBe(`${LAST_AZ}|8|0`);

      // Nothing changed: no write (the hash's write time stays).
      const at = h.at;
      await new Promise((r) => setTimeout(r, 5));
      await controller.tick();
      expect(await admin.redis.hget(keys.inventory, "at")).toBe(at);

      // The last node serves: one field changes, merged into the hash.
      await beat(agent, `n-${N - 1}`, LAST_AZ, true);
      await controller.tick();
      expect(await admin.redis.hget(keys.inventory, `n-${N - 1}`)).toBe(`${LAST_AZ}|8|1`);
      expect(await admin.redis.hlen(keys.inventory)).toBe(N + 3); // + token, leader, at

      // A node leaves the list (re-read every 10 s; a fresh tracker reads it at once): out of the hash.
      list = list.slice(1);
      const next = new Controller({ redis: ctl.redis, keys, lease, writer: new FencedWriter(ctl.redis, keys, lease), log, settings: { intervalMs: 1000 }, inventory });
      expect(await next.tick()).not.toBeNull();
      expect(await admin.redis.hexists(keys.inventory, "n-0")).toBe(0);
      expect(await admin.redis.hlen(keys.inventory)).toBe(N - 1 + 3);
    } finally {
      await lease.release();
    }
  });
});
