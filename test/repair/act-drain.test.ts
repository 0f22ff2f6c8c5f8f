/**
 * The predictive drain in `act` mode on a real redis-server, acting on an in-memory cluster
 * (MemoryRepairActuator): a node that serves (HEALTHY) but reports corrected ECC errors rising
 * is cordoned, drained and rebooted at a low-load moment, recorded as `drain` in the history,
 * and uncordoned once HEALTHY again; the next warned node is then held by the 24 h budget, shown
 * as a predictive hold (`llmha_repair_predictive_held`), not as a held repair (`llmha_repair_held`,
 * which the held-repair alert reads).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { planEntries } from "../../agent/src/fleet/repair/plan";
import { parseHistory } from "../../agent/src/fleet/repair/history";
import { MemoryRepairActuator } from "../../agent/src/fleet/actuators/repair-memory";
import type { InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import type { GpuFault } from "../../agent/src/node/sources/gpu-fault";
import { waitFor } from "../../agent/src/util/net";
import { freshCluster } from "../redis/helpers";
import { active, events, gauge, repairSims } from "../support/repair-sim";

const LEASE = { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 };
const I = 200;

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

const { fleetOf } = repairSims(() => redis.url, { intervalMs: I, lease: LEASE, act: { settleMs: 3 * I }, settings: { predictiveBudget: 1 }, warningScanMs: I,
  // AZ a has two nodes of 8 GPUs: a floor of half its GPUs lets one be drained (the default, 75 %, would hold it: ladder tests).
  controller: { degradedBelow: 0.5, downBelow: 0.25 },
});
const eccRising: GpuFault = { xids: [], recovery: null, remap: null, warn: { ecc: 2000, eccRise: 1000, slow: 0 } };

describe("predictive drain, act mode, against a real redis-server and an in-memory cluster", () => {
  it("a serving node with corrected ECC errors rising: cordon, drain, reboot, history `drain`, uncordon; the next is held by the budget, not alerted", async () => {
    const cluster = new MemoryRepairActuator();
    const inventory: InventoryNode[] = [
      { nodeId: "a1", az: "a", instanceId: "i-0000000000000a1", gpus: 8 },
      { nodeId: "a2", az: "a", instanceId: "i-0000000000000a2", gpus: 8 },
      { nodeId: "b1", az: "b", instanceId: "i-0000000000000b1", gpus: 8 },
    ];
    const { keys, leader, node, all } = fleetOf(freshCluster("actp"), { cluster, inventory });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.warned = eccRising;
      await waitFor("a2 rebooted, waiting", async () => (await active(leader, keys)).get("a2")?.step === "wait", { timeoutMs: 5000 });
      expect((await active(leader, keys)).get("a2")).toMatchObject({ action: "drain", fault: "ecc-rising" });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "reboot:i-0000000000000a2"]);
      // The reboot restarted the volatile counter: no warning any more.
      node.warned = null;
      await waitFor("a2 back", async () => !cluster.cordoned.has("a2") && (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "reboot:i-0000000000000a2", "uncordon:a2"]);
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("i-0000000000000a2")).toMatchObject([{ action: "drain", nodeId: "a2", outcome: "applied", fault: "ecc-rising" }]);
      expect((await events(leader, keys)).map((e) => e.type)).toContain("repair.done");

      // The budget (1 per 24 h here) is spent: a1 warned now is held, shown apart from held repairs.
      leader.warned = { ...eccRising, warn: { ecc: 0, eccRise: 0, slow: 5 } };
      const e = await waitFor("a1 held by the budget", async () => {
        const p = planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a1");
        return p?.action === "held" ? p : null;
      }, { timeoutMs: 5000 });
      expect(e).toMatchObject({ wanted: "drain", bound: "budget", fault: "slowdowns-repeated", reason: expect.stringContaining("1 predictive drains in the last 24 h, the budget is 1") });
      await waitFor("predictive held gauge", async () => (await gauge(leader.prom, "llmha_repair_predictive_held")) === 1, { timeoutMs: 5000 });
      expect(await gauge(leader.prom, "llmha_repair_held")).toBe(0);
      expect(cluster.calls).toHaveLength(4);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });
});
