/**
 * The repair ladder's `replace` in `act` mode on a real redis-server and an in-memory cluster:
 * the host that does not heal is cordoned and drained, its group asked for one more instance,
 * and it is terminated only once a replacement is HEALTHY in its AZ (the surge taken back with
 * the termination); a replacement that never comes leaves it drained, never terminated; a
 * terminated host gets no decision again while its record lingers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { MemoryRepairActuator } from "../../agent/src/fleet/actuators/repair-memory";
import type { InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import { parseHistory } from "../../agent/src/fleet/repair/history";
import { sleep, waitFor } from "../../agent/src/util/net";
import { freshCluster } from "../redis/helpers";
import { active, events, repairSims, type Sim } from "../support/repair-sim";

const LEASE = { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 };
const I = 200;

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

const inventory: InventoryNode[] = [
  { nodeId: "a1", az: "a", instanceId: "i-0000000000000a1", gpus: 8 },
  { nodeId: "a2", az: "a", instanceId: "i-0000000000000a2", gpus: 8 },
  { nodeId: "a3", az: "a", instanceId: "i-0000000000000a3", gpus: 8 },
  { nodeId: "b1", az: "b", instanceId: "i-0000000000000b1", gpus: 8 },
];
const REMAP_FAILURE = { xids: [], recovery: null, remap: "failure" as const };

describe("repair ladder, act mode: replace", () => {
  it("surges its group, waits for a replacement HEALTHY in the AZ, then terminates the old host and takes the surge back", async () => {
    const { sim, fleetOf } = repairSims(() => redis.url, { intervalMs: I, lease: LEASE, act: { settleMs: 3 * I } });
    const cluster = new MemoryRepairActuator();
    Object.assign(cluster.group, { desired: 2, max: 4 });
    const name = freshCluster("actrep");
    const { keys, leader, node, all } = fleetOf(name, { cluster, inventory, spare: new Map([["a", 1]]) });
    let a3: Sim | null = null;
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = REMAP_FAILURE;
      await waitFor("waiting for a replacement", async () => (await active(leader, keys)).get("a2")?.step === "replacement", { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "surge:i-0000000000000a2"]);
      expect(cluster.group).toMatchObject({ desired: 3, surgedFor: "i-0000000000000a2" });
      // Nothing new serves yet: the old host is kept, drained.
      await sleep(5 * I);
      expect(cluster.terminated).toEqual([]);
      expect(cluster.cordoned.has("a2")).toBe(true);

      a3 = sim(name, "a3", "a", { contend: false, cluster, inventory, spare: new Map([["a", 1]]) });
      await waitFor("a2 terminated", () => cluster.terminated.length > 0, { timeoutMs: 5000 });
      expect(cluster.terminated).toEqual(["i-0000000000000a2"]);
      expect(cluster.group).toMatchObject({ desired: 2, surgedFor: null });
      await waitFor("done", async () => (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("i-0000000000000a2")).toMatchObject([{ action: "replace", nodeId: "a2", outcome: "applied", fault: "remap-failure" }]);
      const done = (await events(leader, keys)).filter((e) => e.type === "repair.done");
      expect(done).toHaveLength(1);
      expect(done[0].change ?? JSON.stringify(done[0])).toMatch(/replaced/);

      // Its record lingers (the stand-in keeps reporting): the terminated host gets no second repair.
      const calls = cluster.calls.length;
      await sleep(6 * I);
      expect(cluster.calls.length).toBe(calls);
    } finally {
      await Promise.all([...all, ...(a3 ? [a3] : [])].map((s) => s.fleet.stop()));
    }
  });

  it("no replacement HEALTHY in time: the repair fails, the host stays drained and is never terminated", async () => {
    const { fleetOf } = repairSims(() => redis.url, { intervalMs: I, lease: LEASE, act: { settleMs: 3 * I, replacementTimeoutMs: 6 * I } });
    const cluster = new MemoryRepairActuator();
    Object.assign(cluster.group, { desired: 2, max: 4 });
    const { keys, leader, node, all } = fleetOf(freshCluster("actrepf"), { cluster, inventory, spare: new Map([["a", 1]]) });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = REMAP_FAILURE;
      await waitFor("failed", async () => (await events(leader, keys)).some((e) => e.type === "repair.failed"), { timeoutMs: 8000 });
      const a = (await active(leader, keys)).get("a2");
      expect(a).toMatchObject({ action: "replace", step: "failed", failedStep: "replacement" });
      expect(a?.detail).toMatch(/no replacement HEALTHY in a .* stays drained, not terminated/);
      expect(cluster.terminated).toEqual([]);
      expect(cluster.cordoned.has("a2")).toBe(true);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });
});
