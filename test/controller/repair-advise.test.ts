/**
 * The repair ladder in `advise` mode on a real redis-server: the leader reads a node record
 * whose agent reports XID 79, publishes the advised `reboot` in `repair:plan` (fenced) with
 * one `repair.advised` event (not one per period), and a leader whose token is no longer the
 * highest cannot change the plan.
 */
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import { planEntries } from "../../agent/src/fleet/repair/plan";
import { encodeGpuFault, type GpuFault } from "../../agent/src/node/sources/gpu-fault";
import { sleep, waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";
import { repairDecision } from "../support/repair-decision";

const log = testLogger();
const LEASE = { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 };
const I = 200;

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

interface Sim {
  fleet: Fleet;
  fault: GpuFault | null;
  /** Warning facts reported while HEALTHY (a predictive drain's input). */
  warned?: GpuFault | null;
  prom: Registry;
}

const decision = repairDecision;

function sim(cluster: string, nodeId: string, az: string, contend: boolean, warningScanMs?: number): Sim {
  const prom = new Registry();
  // A floor of half an AZ's GPUs: AZ a's two nodes may lose one to a predictive drain (the default 75 % would hold it).
  const controller = warningScanMs === undefined ? undefined : { degradedBelow: 0.5, downBelow: 0.25 };
  const fleet = new Fleet({ redisUrl: redis.url, cluster, nodeId, az, intervalMs: I, log, metrics: prom, lease: LEASE, contend, controller, repair: { mode: "advise", warningScanMs } });
  const s: Sim = { fleet, fault: null, prom };
  fleet.start((): NodeReport => ({
    nodeId, az, decision: decision(s.fault !== null), gpus: s.fault ? 0 : 8, gpusExpected: 8, model: "m", gpuFault: encodeGpuFault(s.fault ?? s.warned ?? null),
  }));
  return s;
}

async function gauge(prom: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = (await prom.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as { value: number; labels: Record<string, string | number> }[] | undefined)?.find((v) => Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x))?.value;
}

describe("repair ladder, advise mode, against a real redis-server", () => {
  it("publishes reboot for a node reporting XID 79 with one repair.advised event; a stale token cannot change the plan", async () => {
    const c = freshCluster("repair");
    const keys = new RedisKeys(c);
    const leader = sim(c, "a1", "a", true);
    const others = [sim(c, "a2", "a", false), sim(c, "b1", "b", false)];
    const all = [leader, ...others];
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      const node = others[0];
      node.fault = { xids: [79], recovery: null, remap: null };
      const entry = await waitFor("a2 in the plan", async () => planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a2") ?? null, { timeoutMs: 5000 });
      expect(entry).toMatchObject({ action: "reboot", wanted: "reboot", fault: "off-bus", host: "a2", az: "a", reason: expect.stringContaining("XID 79") });
      const plan = await leader.fleet.client.redis.hgetall(keys.repairPlan);
      expect(plan[":mode"]).toBe("advise");
      expect(Number(plan.token)).toBe(leader.fleet.lease.token);
      // The plan entry is written before the round ends; the gauge is set when it ends.
      await waitFor("reboot advised", async () => (await gauge(leader.prom, "llmha_repair_advised", { action: "reboot" })) === 1, { timeoutMs: 5000 });
      expect(await gauge(leader.prom, "llmha_repair_held")).toBe(0);

      // Several more periods: the decision is unchanged, so still one event.
      await sleep(5 * I);
      const events = async (): Promise<Record<string, string>[]> =>
        (await leader.fleet.client.redis.xrange(keys.events, "-", "+")).map(([, f]) => Object.fromEntries(f.flatMap((_, i) => (i % 2 ? [] : [[f[i], f[i + 1]]])))).filter((e) => e.type === "repair.advised");
      const advised = await events();
      expect(advised).toHaveLength(1);
      expect(JSON.parse(advised[0].a2)).toMatchObject({ action: "reboot" });
      expect(Number(advised[0].token)).toBe(leader.fleet.lease.token);

      // A newer leader (the lease and a higher token): the old one's next change (row remap failure → replace) is refused.
      const token = leader.fleet.lease.token!;
      await leader.fleet.client.redis.multi().set(keys.leader, `newer:${token + 1_000_000}`, "PX", 20_000).hset(keys.fenceLast, "token", token + 1_000_000, "holder", "newer").exec();
      node.fault = { xids: [79], recovery: null, remap: "failure" };
      await waitFor("a stale write refused", async () => ((await gauge(leader.prom, "llmha_stale_writes_rejected_total")) ?? 0) > 0, { timeoutMs: 5000 });
      await sleep(5 * I);
      const after = planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a2");
      expect(after).toMatchObject({ action: "reboot" });
      expect(await events()).toHaveLength(1);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });

  it("advises a predictive drain for a serving node with repeated slowdowns, read by the periodic warning scan; nothing is done", async () => {
    const c = freshCluster("repairp");
    const keys = new RedisKeys(c);
    const all = [sim(c, "a1", "a", true, I), sim(c, "a2", "a", false, I), sim(c, "b1", "b", false, I)];
    const [leader, node] = all;
    try {
      await waitFor("a1 leads", () => leader.fleet.isLeader, { timeoutMs: 10_000 });
      node.warned = { xids: [], recovery: null, remap: null, warn: { ecc: 0, eccRise: 0, slow: 4 } };
      const entry = await waitFor("a2 in the plan", async () => planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).get("a2") ?? null, { timeoutMs: 5000 });
      expect(entry).toMatchObject({ action: "drain", wanted: "drain", fault: "slowdowns-repeated", reason: expect.stringContaining("4 thermal/hardware slowdown episodes") });
      await waitFor("drain advised", async () => (await gauge(leader.prom, "llmha_repair_advised", { action: "drain" })) === 1, { timeoutMs: 5000 });
      // The warnings gone (a reboot by hand): a2 leaves the plan.
      node.warned = null;
      await waitFor("a2 out of the plan", async () => !planEntries(await leader.fleet.client.redis.hgetall(keys.repairPlan)).has("a2"), { timeoutMs: 5000 });
      expect(await leader.fleet.client.redis.exists(keys.repairActive)).toBe(0);
    } finally {
      await Promise.all(all.map((s) => s.fleet.stop()));
    }
  });
});
