import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import type { Decision, Reason } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";

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

type Mode = "up" | "gpu-lost" | "probe-slow";
function decision(mode: Mode): Decision {
  const now = Date.now();
  const base = { since: now, checkedAt: now, loadScore: 1, pending: [] as Reason[], suppressed: [] as Reason[] };
  if (mode === "up") return { ...base, status: "HEALTHY", phase: "serving", weight: 100, reasons: [] };
  const r: Reason = mode === "gpu-lost"
    ? { source: "gpu", code: "GPU_LOST", hard: true, effect: "unhealthy" }
    : { source: "probe", code: "PROBE_LATENCY", hard: false, effect: "unhealthy" };
  return { ...base, status: "UNHEALTHY", phase: "down", weight: 0, reasons: [r] };
}

interface Sim {
  fleet: Fleet;
  mode: Mode;
  prom: Registry;
}

function sim(cluster: string, nodeId: string, az: string, extra: Partial<ConstructorParameters<typeof Fleet>[0]> = {}): Sim {
  const prom = new Registry();
  const fleet = new Fleet({
    redisUrl: redis.url, cluster, nodeId, az, intervalMs: I, log, metrics: prom, lease: LEASE,
    controller: { recoverPeriods: 2 }, ...extra,
  });
  const s: Sim = { fleet, mode: "up", prom };
  fleet.start((): NodeReport => ({ nodeId, az, decision: decision(s.mode), gpus: s.mode === "gpu-lost" ? 7 : 8, gpusExpected: 8, model: "m" }));
  return s;
}

async function metric(prom: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = (await prom.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (m?.values as { value: number; labels: Record<string, string | number> }[] | undefined)?.find((x) =>
    Object.entries(labels).every(([k, val]) => String(x.labels[k]) === val),
  );
  return v?.value;
}

describe("Fleet: controller + /az/health against a real redis-server", () => {
  it("one leader publishes AZ states with its fencing token; an AZ that loses its GPUs answers 503; graceful stop hands over", async () => {
    const c = freshCluster();
    const nodes = [sim(c, "a1", "a"), sim(c, "a2", "a"), sim(c, "b1", "b"), sim(c, "b2", "b")];
    try {
      await waitFor("one leader", () => nodes.filter((n) => n.fleet.isLeader).length === 1, { timeoutMs: 10_000 });
      const leader = nodes.find((n) => n.fleet.isLeader)!;
      const ok = await waitFor("az a published", async () => {
        const h = await nodes[0].fleet.azHealth();
        return h.body.stale ? null : h;
      }, { timeoutMs: 5000 });
      expect(ok.code).toBe(200);
      expect(ok.body).toMatchObject({ az: "a", state: "OK", healthyCapacity: 16, totalCapacity: 16, leader: leader.fleet.lease.holderId });
      expect(ok.body.fencingToken).toBe(leader.fleet.lease.token);

      // AZ a loses every GPU (hard faults): DOWN at once → 503, tier L3, metrics on the leader
      nodes[0].mode = "gpu-lost";
      nodes[1].mode = "gpu-lost";
      const down = await waitFor("az a DOWN", async () => {
        const h = await nodes[0].fleet.azHealth();
        return h.code === 503 ? h : null;
      }, { timeoutMs: 5000 });
      expect(down.body).toMatchObject({ state: "DOWN", healthyCapacity: 0, totalCapacity: 16 });
      expect((await nodes[2].fleet.azHealth()).code).toBe(200);
      await waitFor("tier L3", async () => (await metric(leader.prom, "llmha_tier_level")) === 3, { timeoutMs: 3000 });
      expect(await metric(leader.prom, "llmha_az_state", { az: "a", state: "DOWN" })).toBe(1);
      expect(await metric(leader.prom, "llmha_leader")).toBe(1);
      expect(await metric(leader.prom, "llmha_fencing_token")).toBe(leader.fleet.lease.token);
      expect(leader.fleet.status().controller?.tier).toBe("L3");

      // recovery waits for the hysteresis (recoverPeriods 2), then 200 again
      nodes[0].mode = "up";
      nodes[1].mode = "up";
      await waitFor("az a OK", async () => (await nodes[0].fleet.azHealth()).body.state === "OK", { timeoutMs: 5000 });

      // graceful stop of the leader: another takes over within one contend period (+ slack)
      const t = Date.now();
      await leader.fleet.stop();
      await waitFor("new leader", () => nodes.some((n) => n !== leader && n.fleet.isLeader), { timeoutMs: LEASE.contendMs + 3000 });
      expect(Date.now() - t).toBeLessThanOrEqual(LEASE.contendMs + 1500);
      const next = nodes.find((n) => n !== leader && n.fleet.isLeader)!;
      await waitFor("new token published", async () => {
        const h = await next.fleet.azHealth();
        return h.body.fencingToken === next.fleet.lease.token;
      }, { timeoutMs: 5000 });
      expect(next.fleet.lease.token!).toBeGreaterThan(ok.body.fencingToken!);
    } finally {
      for (const n of nodes) await n.fleet.stop();
    }
  });

  it("blast-radius cap: most nodes failing one soft check keeps them in, marks the check suspect, raises the alert metric", async () => {
    const c = freshCluster();
    const nodes = [sim(c, "n1", "a"), sim(c, "n2", "a"), sim(c, "n3", "b"), sim(c, "n4", "b")];
    try {
      await waitFor("leader", () => nodes.some((n) => n.fleet.isLeader), { timeoutMs: 10_000 });
      for (const n of nodes.slice(0, 3)) n.mode = "probe-slow";
      await waitFor("suspect seen by the agents", () => nodes.every((n) => n.fleet.suspectChecks.includes("PROBE_LATENCY")), { timeoutMs: 5000 });
      const leader = nodes.find((n) => n.fleet.isLeader)!;
      expect(await metric(leader.prom, "llmha_blast_radius_suspect", { check: "PROBE_LATENCY" })).toBe(1);
      const h = await nodes[0].fleet.azHealth();
      expect(h).toMatchObject({ code: 200, body: { state: "OK", healthyCapacity: 16 } });
    } finally {
      for (const n of nodes) await n.fleet.stop();
    }
  });

  it("/az/health fails open: nothing published yet, and Redis unreachable", async () => {
    const own = await startRedisServer();
    const prom = new Registry();
    const fleet = new Fleet({ redisUrl: own.url, cluster: freshCluster(), nodeId: "x", az: "a", intervalMs: I, log, metrics: prom, contend: false });
    fleet.start(() => ({ nodeId: "x", az: "a", decision: decision("up"), gpus: 8, gpusExpected: 8, model: "m" }));
    try {
      await waitFor("registered", () => fleet.status().redis.connected, { timeoutMs: 5000 });
      expect(await fleet.azHealth()).toMatchObject({ code: 200, body: { state: "UNKNOWN", stale: true, staleReason: "not-published" } });
      expect(await metric(prom, "llmha_redis_connected")).toBe(1);
      own.kill("SIGKILL");
      await waitFor("down", () => !fleet.status().redis.connected, { timeoutMs: 5000 });
      const t = Date.now();
      expect(await fleet.azHealth()).toMatchObject({ code: 200, body: { stale: true, staleReason: "redis-unreachable" } });
      expect(Date.now() - t).toBeLessThan(500);
      await waitFor("error metric", async () => ((await metric(prom, "llmha_redis_errors_total")) ?? 0) > 0, { timeoutMs: 5000 });
      expect(await metric(prom, "llmha_redis_connected")).toBe(0);
    } finally {
      await fleet.stop();
      await own.stop();
    }
  });

  it("pre-creates its series at zero", async () => {
    const prom = new Registry();
    const fleet = new Fleet({ redisUrl: redis.url, cluster: freshCluster(), nodeId: "x", az: "a", intervalMs: I, log, metrics: prom });
    const text = await prom.metrics();
    for (const line of [
      "llmha_redis_connected 0", "llmha_redis_errors_total 0", "llmha_leader 0", "llmha_fencing_token 0",
      'llmha_az_state{az="a",state="DOWN"} 0', "llmha_tier_level 0", "llmha_lease_acquisitions_total 0",
      "llmha_stale_writes_rejected_total 0", "llmha_blast_radius_suspect_checks 0",
    ]) expect(text).toContain(line);
    await fleet.stop();
  });
});
