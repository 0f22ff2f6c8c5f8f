/**
 * A standby wake onto bad GPUs. The loop seen on a loaded machine: an active AZ's state came
 * and went past the standby hold while its GPUs were lost; each time it went DOWN the leader
 * woke the standby's first group from scratch, whose nodes booted onto lost GPUs and never
 * became HEALTHY (the wake follow counted their instances in service as serving), and each time
 * it came back the leader released it: wake, unhealthy nodes, release, wake…
 *
 * Here the pure evaluation (controller/state.ts) and the real Reconciler behind the real
 * FencedActuator (real redis-server and lease) drive a fake cloud whose groups follow
 * wake-follow.ts as the AWS and local actuators do; the standby's nodes appear in the
 * registry snapshot when their group is woken.
 */
import type { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ActuatorMetrics, FencedActuator } from "../../agent/src/fleet/actuators/gate";
import { Reconciler } from "../../agent/src/fleet/actuators/reconciler";
import type { ActionContext, ActionResult, Actuator } from "../../agent/src/fleet/actuators/types";
import { afterRelease, backoffLine, emptyWakeIncident, incidentFields, incidentFrom, withHealthy, withUnhealthy } from "../../agent/src/fleet/actuators/wake-backoff";
import { planWake, type WakeGroupView } from "../../agent/src/fleet/actuators/wake-follow";
import { standbyFields } from "../../agent/src/fleet/controller/standby";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";
import { emptyControllerMemory, evaluate, resolveControllerSettings, type ControllerMemory, type Evaluation } from "../../agent/src/fleet/controller/state";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import type { NodeView } from "../../agent/src/fleet/redis/registry";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";

const log = testLogger();
let server: RedisServerHandle;
let client: RedisClient;
let redis: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "wake-backoff-test", log });
  redis = client.redis;
});
afterAll(async () => {
  await client?.close();
  await server?.stop();
});

const HEALTHY_BOUND_MS = 10_000;
const MIN = 60_000;

/** One group of the fake cloud: its node boots at once when woken, onto good or bad GPUs. */
interface Group {
  name: string;
  node: string;
  badGpus: boolean;
  woken: boolean;
  wokenAt: number | null;
}

/** The standby's groups in fallback order, followed with wake-follow.ts as the real actuators follow theirs. */
class FakeCloud implements Actuator {
  readonly kind = "fake-cloud";
  readonly log: { action: "wake" | "release"; group?: string; at: number }[] = [];
  constructor(
    readonly groups: Group[],
    private readonly clock: { t: number },
  ) {}

  async wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    const views: WakeGroupView[][] = this.groups.map((g) => [{ name: g.name, woken: g.woken, wokenAt: g.wokenAt, inService: g.woken ? 1 : 0, pending: 0, failures: [] }]);
    const plan = planWake(views, { boundMs: 15 * MIN, healthyBoundMs: HEALTHY_BOUND_MS }, this.clock.t, ctx.wakeHealth);
    let outcome: ActionResult["outcome"] = "already";
    if (plan.wake !== null && !this.groups[plan.wake].woken) {
      Object.assign(this.groups[plan.wake], { woken: true, wokenAt: this.clock.t });
      this.log.push({ action: "wake", group: this.groups[plan.wake].name, at: this.clock.t });
      outcome = "applied";
    }
    if (plan.report.phase === "unavailable") outcome = "failed";
    return { action: "standby.wake", az, outcome, calls: 1, detail: plan.detail, durationMs: 0, wake: plan.report };
  }
  async releaseStandby(az: string): Promise<ActionResult> {
    const any = this.groups.some((g) => g.woken);
    for (const g of this.groups) Object.assign(g, { woken: false, wokenAt: null });
    if (any) this.log.push({ action: "release", at: this.clock.t });
    return { action: "standby.release", az, outcome: any ? "applied" : "already", calls: 1, detail: "", durationMs: 0 };
  }
  async startZonalShift(az: string): Promise<ActionResult> {
    return { action: "shift.start", az, outcome: "already", calls: 0, detail: "", durationMs: 0 };
  }
  async cancelZonalShift(az: string): Promise<ActionResult> {
    return { action: "shift.cancel", az, outcome: "already", calls: 0, detail: "", durationMs: 0 };
  }

  /** The standby's nodes as the registry shows them: a node booted onto lost GPUs reports a hard fault and takes no traffic. */
  nodes(): NodeView[] {
    return this.groups.filter((g) => g.woken).map((g) => (g.badGpus ? out(g.node, "c", { hard: ["GPU_LOST"], gpus: 0, served: false }) : node(g.node, "c")));
  }
}

function node(id: string, az: string, o: Partial<NodeView> = {}): NodeView {
  return { nodeId: id, az, alive: true, status: "HEALTHY", phase: "serving", weight: 100, gpus: 8, gpusExpected: 8, soft: [], hard: [], takesTraffic: true, ...o };
}
const out = (id: string, az: string, o: Partial<NodeView> = {}): NodeView => node(id, az, { status: "UNHEALTHY", phase: "down", weight: 0, takesTraffic: false, ...o });

const SETTINGS = resolveControllerSettings({ standbyAz: "c", standbyHoldMs: 3000, coldStartGraceMs: 0 });

async function setup(groups: Omit<Group, "woken" | "wokenAt">[]) {
  const keys = new RedisKeys(freshCluster());
  const lease = new LeaderLease({ redis, keys, holderId: "leader-1", settings: { ttlMs: 10_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
  lease.start();
  await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
  const clock = { t: Date.parse("2026-12-05T03:00:00Z") };
  const cloud = new FakeCloud(groups.map((g) => ({ ...g, woken: false, wokenAt: null })), clock);
  const currentToken = (): number | null => lease.current?.token ?? null;
  const prom = new Registry();
  const gate = new FencedActuator(cloud, { redis, keys, lease: { currentToken }, log, metrics: new ActuatorMetrics(prom, cloud.kind), holder: "leader-1" });
  const rec = new Reconciler({
    actuator: gate, redis, keys, writer: new FencedWriter(redis, keys, lease), currentToken, log,
    settings: { reassertMs: 30_000, wakeFollowMs: 1000 }, now: () => clock.t,
  });
  let mem: ControllerMemory = emptyControllerMemory();
  let last: Evaluation | null = null;
  const token = lease.current!.token;
  /** One controller period per second for `ms`, az-a's GPUs lost or not. */
  const run = async (ms: number, azALost: boolean): Promise<void> => {
    for (let end = clock.t + ms; clock.t < end; clock.t += 1000) {
      const active = [azALost ? out("a1", "a", { hard: ["GPU_LOST"], gpus: 0 }) : node("a1", "a"), azALost ? out("a2", "a", { hard: ["GPU_LOST"], gpus: 0 }) : node("a2", "a"), node("b1", "b"), node("b2", "b")];
      const r = evaluate({ nodes: [...active, ...cloud.nodes()] }, mem, SETTINGS, clock.t, { standbyUnavailable: rec.standbyUnavailable(), standbyBackoff: rec.standbyBackoff() });
      mem = r.memory;
      last = r.evaluation;
      rec.onEvaluation(r.evaluation, token);
      await rec.idle();
    }
  };
  return { keys, lease, clock, cloud, rec, run, last: () => last! };
}

describe("a standby wake onto bad GPUs backs off instead of looping", () => {
  it("a flapping trigger with the standby booting onto lost GPUs: one wake, then the back-off holds the next (the loop: one wake per flap)", async () => {
    const { lease, cloud, rec, run, last, keys } = await setup([{ name: "c-p5", node: "c1", badGpus: true }]);
    try {
      // az-a's GPUs lost 20 s (past the healthy bound), then back 10 s (past the 3 s hold), four times over.
      for (let i = 0; i < 4; i++) {
        await run(20_000, true);
        await run(10_000, false);
      }
      const wakes = cloud.log.filter((l) => l.action === "wake");
      const releases = cloud.log.filter((l) => l.action === "release");
      // Without the back-off every flap woke c-p5 again and released it: 4 wakes, 4 releases.
      expect(wakes.map((w) => w.group)).toEqual(["c-p5"]);
      expect(releases).toHaveLength(1);
      expect(rec.wakeIncident()).toMatchObject({ backoffMs: 5 * MIN, healthy: false });
      // Wanted awake again now, and held: the tier and the standby decision say why.
      await run(1000, true);
      expect(last().standby).toMatchObject({ wake: true, backoff: expect.stringMatching(/^backoff until 2026-12-05T03:05:\d\d\.\d+Z, because the last wake ended with no healthy standby node \(unhealthy on c-p5: 1 in service, no standby node HEALTHY 1\d s after the wake/) });
      expect(last().tier.reason).toContain("; standby c backoff until");
      // `llm-ha status` shows it from the standby hash the leader publishes.
      await redis.hset(keys.standbyWake, standbyFields(last(), null, Date.now()));
      const line = renderFleetView(await readFleetView(redis, keys), { width: 400 }).find((l) => l.includes("WAKE HELD"));
      expect(line).toMatch(/WAKE HELD: backoff until 2026-12-05T03:05:\d\d\.\d+Z, because the last wake ended with no healthy standby node/);
      // Kept in Redis for the next leader.
      const h = await redis.hgetall(keys.actuation);
      expect(Number(h["standby.backoffMs"])).toBe(5 * MIN);
      expect(h["standby.backoffReason"]).toContain("unhealthy on c-p5");
      // Past the back-off the next wake goes out; failing again, the one after waits twice as long.
      await run(5 * MIN, true);
      expect(cloud.log.filter((l) => l.action === "wake")).toHaveLength(2);
      await run(10_000, false);
      expect(rec.wakeIncident().backoffMs).toBe(10 * MIN);
    } finally {
      await lease.release();
    }
  });

  it("the first group boots onto bad GPUs: after the healthy bound the fallback is woken, the failed group is not woken again, no release before recovery, no back-off", async () => {
    const { lease, cloud, rec, run, last } = await setup([
      { name: "c-p5", node: "c1", badGpus: true },
      { name: "c-p4d", node: "c2", badGpus: false },
    ]);
    try {
      await run(HEALTHY_BOUND_MS - 2000, true);
      expect(cloud.log.map((l) => `${l.action}:${l.group}`)).toEqual(["wake:c-p5"]); // within the bound: waiting for its nodes
      await run(60_000, true);
      expect(cloud.log.map((l) => `${l.action}:${l.group ?? ""}`)).toEqual(["wake:c-p5", "wake:c-p4d"]);
      expect(rec.wakeReport()).toMatchObject({ phase: "serving", step: 1, failure: { class: "unhealthy", group: "c-p5" } });
      expect(Object.keys(rec.wakeIncident().failed)).toEqual(["c-p5"]);
      expect(last().standbyHealthy).toBe(8);
      await run(10_000, false);
      expect(cloud.log.map((l) => l.action)).toEqual(["wake", "wake", "release"]);
      expect(rec.standbyBackoff()).toBeNull(); // the wake reached HEALTHY: a next one goes out at once
      await run(3000, true);
      expect(cloud.log.map((l) => `${l.action}:${l.group ?? ""}`).at(-1)).toBe("wake:c-p5");
    } finally {
      await lease.release();
    }
  });
});

describe("wake-backoff (pure)", () => {
  const S = { backoffBaseMs: 5 * MIN, backoffMaxMs: 60 * MIN };
  const bad = { class: "unhealthy" as const, group: "g1,g2", message: "1 in service, no standby node HEALTHY", at: 5 };
  it("exponential from 5 min, capped at 1 h, only after a step was judged failed, reset by a wake that reached HEALTHY", () => {
    let w = afterRelease(emptyWakeIncident(), S, 0);
    expect(w.backoffUntil).toBe(0); // released before any step was judged: a blip proves nothing
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) {
      w = afterRelease(withUnhealthy(w, [bad]), S, 1000);
      seen.push(w.backoffMs);
    }
    expect(seen.map((ms) => ms / MIN)).toEqual([5, 10, 20, 40, 60, 60]);
    expect(backoffLine(w, 1000 + 60 * MIN - 1)).toMatch(/^backoff until .*, because the last wake ended with no healthy standby node \(unhealthy on g1,g2: /);
    expect(backoffLine(w, 1000 + 60 * MIN)).toBeNull();
    w = afterRelease(withHealthy(withUnhealthy(w, [bad])), S, 2000);
    expect(w).toEqual(emptyWakeIncident());
    // Every step unavailable (no step judged unhealthy) counts too.
    expect(afterRelease(emptyWakeIncident(), S, 0, { ...bad, class: "capacity" }).backoffMs).toBe(5 * MIN);
  });
  it("each group of a failed step is recorded once; the fields round-trip through the actuation hash", () => {
    const w = withUnhealthy({ ...emptyWakeIncident(), backoffMs: 600_000, backoffUntil: 9, backoffReason: "x" }, [bad]);
    expect(Object.keys(w.failed)).toEqual(["g1", "g2"]);
    const h = Object.fromEntries(Object.entries(incidentFields(w)).map(([k, v]) => [k, String(v)]));
    expect(incidentFrom(h)).toEqual(w);
    expect(incidentFrom({ "standby.unhealthy": "{not json" })).toEqual(emptyWakeIncident());
  });
});
