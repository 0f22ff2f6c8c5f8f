/**
 * The repair ladder in `act` mode on a real redis-server, acting on an in-memory cluster
 * (MemoryRepairActuator): a node with XID 13 is cordoned, drained, restarted, its history
 * recorded, and uncordoned once its record is HEALTHY again; a failed step leaves it cordoned
 * and shown held; a new leader continues an active repair at its step; a stale token does
 * nothing; a fault back within the window after a reboot yields `replace` from real history.
 */
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import { planEntries } from "../../agent/src/fleet/repair/plan";
import { historyRecords, parseHistory } from "../../agent/src/fleet/repair/history";
import { repairLadder } from "../../agent/src/fleet/repair/ladder";
import { MemoryRepairActuator } from "../../agent/src/fleet/actuators/repair-memory";
import { DryRunRepairActuator } from "../../agent/src/fleet/actuators/repair-dry-run";
import { FencedRepairActuator } from "../../agent/src/fleet/actuators/repair-gate";
import type { InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import { encodeGpuFault } from "../../agent/src/node/sources/gpu-fault";
import { sleep, waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";
import { active, events, gauge, repairSims, type Sim } from "../support/repair-sim";
import { repairDecision as decision } from "../support/repair-decision";

const log = testLogger();
const LEASE = { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 };
const I = 200;
const ACT = { settleMs: 3 * I };

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

const { sim, fleetOf } = repairSims(() => redis.url, { intervalMs: I, lease: LEASE, act: ACT });

describe("repair ladder, act mode, against a real redis-server and an in-memory cluster", () => {
  it("XID 13 → restart: cordon, drain, restart, history recorded, uncordon once HEALTHY", async () => {
    const cluster = new MemoryRepairActuator();
    cluster.pods.set("a2", ["inference-a2", "other-a2"]);
    const { keys, leader, node, all } = fleetOf(freshCluster("act"), { cluster });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [13], recovery: null, remap: null };
      const a = await waitFor("a2 restarted, waiting", async () => ((await active(leader, keys)).get("a2")?.step === "wait" ? (await active(leader, keys)).get("a2")! : null), { timeoutMs: 5000 });
      expect(a).toMatchObject({ action: "restart", host: "a2", az: "a", fault: "app-xid", token: leader.fleet.lease.token });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "restart:a2"]);
      expect(cluster.cordoned.has("a2")).toBe(true);
      expect(cluster.pods.get("a2")).toEqual([]);
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("a2")).toEqual([{ action: "restart", at: expect.any(Number), nodeId: "a2", outcome: "applied", fault: "app-xid" }]);
      expect((await leader.fleet.client.redis.hgetall(keys.repairPlan))[":mode"]).toBe("act");

      // Still broken: it stays cordoned, nothing more is done.
      await sleep(5 * I);
      expect(cluster.calls).toHaveLength(3);
      expect(cluster.cordoned.has("a2")).toBe(true);

      node.fault = null;
      await waitFor("a2 uncordoned", () => !cluster.cordoned.has("a2"), { timeoutMs: 5000 });
      await waitFor("repair:active empty", async () => (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "restart:a2", "uncordon:a2"]);
      expect(await leader.fleet.client.redis.exists(keys.repairActive)).toBe(0);
      const ev = await events(leader, keys);
      expect(ev.map((e) => `${e.type}:${JSON.parse(e.a2).step}`)).toEqual(["repair.started:cordon", "repair.started:drain", "repair.started:action", "repair.started:wait", "repair.done:done"]);
      expect(await gauge(leader.prom, "llmha_repair_steps_total", { step: "restart", outcome: "applied", kind: "memory" })).toBe(1);
      expect(await gauge(leader.prom, "llmha_repair_steps_total", { step: "uncordon", outcome: "applied", kind: "memory" })).toBe(1);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });

  it("a failed step leaves the node cordoned, shown held (bound failed), with a repair.failed event", async () => {
    const cluster = new MemoryRepairActuator();
    cluster.failNext.add("drain");
    const { keys, leader, node, all } = fleetOf(freshCluster("actf"), { cluster });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [13], recovery: null, remap: null };
      const a = await waitFor("a2 failed", async () => ((await active(leader, keys)).get("a2")?.step === "failed" ? (await active(leader, keys)).get("a2")! : null), { timeoutMs: 5000 });
      expect(a).toMatchObject({ action: "restart", failedStep: "drain", detail: expect.stringContaining("injected") });
      const entry = await waitFor("held in the plan", async () => {
        const e = planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a2");
        return e?.action === "held" ? e : null;
      }, { timeoutMs: 5000 });
      expect(entry).toMatchObject({ wanted: "restart", bound: "failed" });
      await waitFor("held gauge", async () => (await gauge(leader.prom, "llmha_repair_held")) === 1, { timeoutMs: 5000 });
      expect((await events(leader, keys)).map((e) => e.type)).toContain("repair.failed");
      // Healthy again or not, a failed repair never uncordons by itself.
      node.fault = null;
      await sleep(6 * I);
      expect(cluster.cordoned.has("a2")).toBe(true);
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2"]);
      expect((await active(leader, keys)).get("a2")?.step).toBe("failed");
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });

  it("a new leader continues an active repair at its step; the old leader's stale token does nothing", async () => {
    const cluster = new MemoryRepairActuator();
    const name = freshCluster("actl");
    const { keys, leader, node, all } = fleetOf(name, { cluster });
    let next: Sim | null = null;
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [13], recovery: null, remap: null };
      await waitFor("a2 waiting", async () => (await active(leader, keys)).get("a2")?.step === "wait", { timeoutMs: 5000 });
      const oldToken = leader.fleet.lease.token!;

      // The old leader's actuator with its (now stale) token once a newer term holds the fence: refused, nothing called.
      await leader.fleet.client.redis.hset(keys.fenceLast, "token", oldToken + 1, "holder", "newer");
      const gate = new FencedRepairActuator(cluster, { redis: leader.fleet.client.redis, keys, lease: { currentToken: () => oldToken }, log, holder: leader.fleet.lease.holderId });
      const r = await gate.uncordon("a2", { token: oldToken, reason: "test" });
      expect(r.outcome).toBe("refused-stale");
      expect(cluster.cordoned.has("a2")).toBe(true);
      await leader.fleet.client.redis.hset(keys.fenceLast, "token", oldToken, "holder", leader.fleet.lease.holderId);

      // The leader goes; a new one takes the lease and finishes the repair without starting it again.
      await leader.fleet.stop();
      next = sim(name, "c1", "b", { contend: true, cluster });
      await waitFor("c1 leads", () => next!.fleet.isLeader, { timeoutMs: 10_000 });
      expect(next.fleet.lease.token).toBeGreaterThan(oldToken);
      node.fault = null;
      await waitFor("a2 uncordoned by the new leader", () => !cluster.cordoned.has("a2"), { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "restart:a2", "uncordon:a2"]);
      const done = (await events(next, keys)).filter((e) => e.type === "repair.done");
      expect(done).toHaveLength(1);
      expect(Number(done[0].token)).toBe(next.fleet.lease.token);
    } finally {
      await Promise.all([...all.filter((s) => s !== leader), ...(next ? [next] : [])].map((s) => s.fleet.stop()));
    }
  });

  it("a reboot acts on the node's instance; off the bus again within the window → replace, from real history", async () => {
    const cluster = new MemoryRepairActuator();
    const inventory: InventoryNode[] = [
      { nodeId: "a1", az: "a", instanceId: "i-0000000000000a1", gpus: 8 },
      { nodeId: "a2", az: "a", instanceId: "i-0000000000000a2", gpus: 8 },
      { nodeId: "b1", az: "b", instanceId: "i-0000000000000b1", gpus: 8 },
    ];
    const { keys, leader, node, all } = fleetOf(freshCluster("actr"), { cluster, inventory, spare: new Map([["a", 1]]) });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [79], recovery: null, remap: null };
      await waitFor("a2 rebooted", async () => (await active(leader, keys)).get("a2")?.step === "wait", { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "reboot:i-0000000000000a2"]);
      node.fault = null;
      await waitFor("a2 back", async () => !cluster.cordoned.has("a2") && (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("i-0000000000000a2")).toMatchObject([{ action: "reboot", nodeId: "a2", outcome: "applied", fault: "off-bus" }]);

      // The same GPU falls off the bus again within the window: replace. Its group is at its max (0 here):
      // no surge, the host is terminated and the group launches its replacement.
      node.fault = { xids: [79], recovery: null, remap: null };
      const e = await waitFor("replace decided", async () => {
        const x = planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a2");
        return x?.action === "replace" ? x : null;
      }, { timeoutMs: 5000 });
      expect(e.reason).toMatch(/off the bus again .* after its reboot/);
      await waitFor("a2 terminated", () => cluster.terminated.length === 1, { timeoutMs: 5000 });
      expect(cluster.calls.slice(4)).toEqual(["cordon:a2", "drain:a2", "surge:i-0000000000000a2", "terminate:i-0000000000000a2"]);
      await waitFor("replace done", async () => (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      const after = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(after.get("i-0000000000000a2")?.map((h) => h.action)).toEqual(["reboot", "replace"]);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });

  it("a pending row remap → reset, carried out as a reboot of the instance; the history keeps reset; without an instance id nothing is done", async () => {
    const cluster = new MemoryRepairActuator();
    const inventory: InventoryNode[] = [
      { nodeId: "a1", az: "a", instanceId: "i-0000000000000a1", gpus: 8 },
      { nodeId: "a2", az: "a", instanceId: "i-0000000000000a2", gpus: 8 },
      { nodeId: "b1", az: "b", instanceId: "i-0000000000000b1", gpus: 8 },
    ];
    const { keys, leader, node, all } = fleetOf(freshCluster("actx"), { cluster, inventory });
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [], recovery: null, remap: "pending" };
      await waitFor("a2 reset", async () => (await active(leader, keys)).get("a2")?.step === "wait", { timeoutMs: 5000 });
      expect(cluster.calls).toEqual(["cordon:a2", "drain:a2", "reboot:i-0000000000000a2"]);
      expect((await active(leader, keys)).get("a2")).toMatchObject({ action: "reset", fault: "reset-needed" });
      node.fault = null;
      await waitFor("a2 back", async () => !cluster.cordoned.has("a2") && (await active(leader, keys)).size === 0, { timeoutMs: 5000 });
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("i-0000000000000a2")).toMatchObject([{ action: "reset", nodeId: "a2", outcome: "applied", fault: "reset-needed" }]);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
    // No inventory: no instance id to reboot, so the reset stays advised and nothing is called.
    const bare = new MemoryRepairActuator();
    const f2 = fleetOf(freshCluster("actx2"), { cluster: bare });
    try {
      await waitFor("a1 leads", () => f2.leader.fleet.isLeader, { timeoutMs: 10_000 });
      f2.node.fault = { xids: [48], recovery: null, remap: null };
      await waitFor("reset planned", async () => planEntries(await f2.leader.fleet.client.redis.hgetall(f2.keys.repairPlan)).get("a2")?.action === "reset", { timeoutMs: 5000 });
      await sleep(4 * I);
      expect(bare.calls).toEqual([]);
      expect((await active(f2.leader, f2.keys)).size).toBe(0);
    } finally {
      await Promise.all(f2.all.map((s) => s.fleet.stop()));
    }
  });

  it("with a dry-run actuator every step is logged only and the rehearsal ends as done, never failed", async () => {
    const name = freshCluster("actd");
    const keys = new RedisKeys(name);
    const mk = (nodeId: string, az: string, contend: boolean): Sim => {
      const prom = new Registry();
      const fleet = new Fleet({ redisUrl: redis.url, cluster: name, nodeId, az, intervalMs: I, log, metrics: prom, lease: LEASE, contend, repair: { mode: "act", actuator: new DryRunRepairActuator(log), act: { settleMs: 3 * I, waitTimeoutMs: 6 * I } } });
      const s: Sim = { fleet, fault: null, prom };
      fleet.start((): NodeReport => ({ nodeId, az, decision: decision(s.fault !== null), gpus: s.fault ? 0 : 8, gpusExpected: 8, model: "m", gpuFault: encodeGpuFault(s.fault) }));
      return s;
    };
    const all = [mk("a1", "a", true), mk("a2", "a", false), mk("b1", "b", false)];
    const [leader, node] = all;
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.fault = { xids: [13], recovery: null, remap: null };
      await waitFor("a rehearsal done", async () => (await events(leader, keys)).some((e) => e.type === "repair.done"), { timeoutMs: 8000 });
      expect((await events(leader, keys)).some((e) => e.type === "repair.failed")).toBe(false);
      const hist = parseHistory(await leader.fleet.client.redis.hgetall(keys.repairHistory));
      expect(hist.get("a2")?.[0]).toMatchObject({ action: "restart", outcome: "dry-run" });
      expect(await gauge(leader.prom, "llmha_repair_steps_total", { step: "restart", outcome: "dry-run", kind: "dry-run" })).toBeGreaterThanOrEqual(1);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });

  it("another hard fault after a reboot within the window is quarantined; after the window it is a reboot again", () => {
    const at = 1_000_000;
    const records = historyRecords(parseHistory({ "i-1": JSON.stringify([{ action: "reboot", at, nodeId: "n1", outcome: "applied", fault: "gpu-fault" }]), token: "3" }));
    const node = { nodeId: "n1", az: "a", host: "i-1", alive: true, takesTraffic: false, gpus: 0, hard: ["GPU_ECC_UNCORRECTABLE"], soft: [], fault: null };
    const capacity = new Map([["a", { healthy: 8, floor: 0, spare: 1 }]]);
    expect(repairLadder({ nodes: [node], history: records, capacity, now: at + 3_600_000 }).decisions[0]).toMatchObject({ action: "quarantine" });
    expect(repairLadder({ nodes: [node], history: records, capacity, now: at + 90_000_000 }).decisions[0]).toMatchObject({ action: "reboot" });
    // A dry-run "repair" is no repair: never escalated on.
    const dry = historyRecords(parseHistory({ "i-1": JSON.stringify([{ action: "reboot", at, nodeId: "n1", outcome: "dry-run", fault: "gpu-fault" }]) }));
    expect(repairLadder({ nodes: [node], history: dry, capacity, now: at + 3_600_000 }).decisions[0]).toMatchObject({ action: "reboot" });
  });
});
