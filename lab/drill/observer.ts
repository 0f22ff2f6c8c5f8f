/**
 * The drill's eyes: every `sampleMs` it asks each agent's `/readyz`, each HAProxy's
 * `show stat` and PowerDNS for the service name; every `redisSampleMs` it reads the
 * fleet's keys (AZ states, tier, leader, fencing tokens). Each read has a short time
 * limit; a read that fails is recorded as such, never thrown.
 */
import { Redis } from "ioredis";
import { parseLeaseValue } from "../../agent/src/fleet/redis/lease";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { Loop } from "../../agent/src/util/loop";
import type { DrillStack } from "./stack";
import { mergeRows, sampleKey, type FleetSample, type L1Sample, type NodeSample, type Sample, type Timeline } from "./timeline";

export interface Observer {
  /** Resolves after the next complete sample (a scenario waits on it). */
  tick(): Promise<Sample>;
  latest(): Sample | null;
  latestFleet(): FleetSample | null;
  stop(): Promise<void>;
}

async function readyz(url: string): Promise<NodeSample> {
  try {
    const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(400) });
    const b = (await r.json()) as { status?: string; weight?: number };
    return { status: b.status ?? "ERR", weight: typeof b.weight === "number" ? b.weight : 0 };
  } catch {
    return { status: "ERR", weight: 0 };
  }
}

/**
 * One read of the fleet's keys (AZ states, tier, leader lease, standby wake, suspects, which
 * server answered), pipelined and limited to 400 ms; what did not answer stays unset (a leader
 * `undefined` is "Redis did not answer"). The drill's observer and the game-day runner read the
 * fleet with it.
 */
export async function readFleet(redis: Redis, keys: RedisKeys, azs: readonly string[]): Promise<Omit<FleetSample, "t">> {
  const f: Omit<FleetSample, "t"> = { azState: {}, tier: null, tokens: {}, standbyWake: false, suspect: "" };
  try {
    const p = redis.pipeline();
    for (const az of azs) p.hgetall(keys.azState(az));
    p.hgetall(keys.tier);
    p.get(keys.leader);
    p.hgetall(keys.standbyWake);
    p.hgetall(keys.suspect);
    // Which server answered: a failover can bring back older hashes (a rollback), which the stale-write watch must not judge as writes.
    p.info("server");
    const res = (await Promise.race([p.exec(), new Promise<null>((r) => setTimeout(() => r(null), 400))])) ?? [];
    const val = (i: number): unknown => res[i]?.[1];
    azs.forEach((az, i) => {
      const h = (val(i) ?? {}) as Record<string, string>;
      if (h.state) f.azState[az] = h.state;
      if (h.token) f.tokens[`az:${az}`] = Number(h.token);
    });
    const n = azs.length;
    const tier = (val(n) ?? {}) as Record<string, string>;
    f.tier = tier.level ?? null;
    if (tier.token) f.tokens.tier = Number(tier.token);
    if (res.length > n + 1) {
      const lease = val(n + 1);
      const parsed = typeof lease === "string" ? parseLeaseValue(lease) : null;
      f.leader = typeof lease === "string" ? (parsed?.holder ?? lease) : null;
      f.leaderToken = parsed?.token ?? null;
    }
    f.standbyWake = ((val(n + 2) ?? {}) as Record<string, string>).wake === "1";
    f.suspect = ((val(n + 3) ?? {}) as Record<string, string>).codes ?? "";
    const info = val(n + 4);
    if (typeof info === "string") f.server = /^run_id:(\w+)/m.exec(info)?.[1];
  } catch {
    // Redis down (the restart scenario): leader stays undefined = unknown.
  }
  return f;
}

export function startObserver(stack: DrillStack, tl: Timeline, now: () => number, periods: { sampleMs: number; redisSampleMs: number }): Observer {
  let latest: Sample | null = null;
  let latestFleet: FleetSample | null = null;
  let waiters: ((s: Sample) => void)[] = [];
  const sampleLoop = new Loop(
    periods.sampleMs,
    async () => {
      const t = now();
      const nodes: Record<string, NodeSample> = {};
      const l1: Record<string, L1Sample> = {};
      const proxies = [...stack.azs.map((a) => a.haproxy), stack.baseline];
      const [nodeRows, statRows, dns] = await Promise.all([
        // Spare slots too: a surge's node is watched as any other once it boots.
        Promise.all([...stack.nodes, ...stack.spares].map(async (n) => [n.id, await readyz(n.agentUrl)] as const)),
        Promise.all(proxies.map((h) => (h ? h.stats().catch(() => []) : Promise.resolve([])))),
        stack.dns.query().catch(() => null),
      ]);
      for (const [id, s] of nodeRows) nodes[id] = s;
      // A `server-template` slot is keyed by the node DNS gave it (`<backend>/<node id>`), as
      // a static server is by its name; an empty slot keeps its own name. The rows of a proxy's
      // backend through the continuation relay fold into its straight backend's (mergeRows).
      for (const rows of statRows) {
        for (const r of rows) {
          const key = sampleKey(r.proxy, (r.addr && stack.nodeAt(r.addr)?.id) || r.server);
          const row = { status: r.status, weight: r.weight, total: r.total };
          const had = l1[key];
          l1[key] = had ? mergeRows(had, row) : row;
        }
      }
      const s: Sample = { t, nodes, l1, dns };
      tl.samples.push(s);
      latest = s;
      const w = waiters;
      waiters = [];
      for (const f of w) f(s);
    },
    () => undefined,
  );
  const keys = new RedisKeys(stack.cluster);
  const redis = new Redis(stack.redis.url, { lazyConnect: false, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 500, retryStrategy: () => 200 });
  redis.on("error", () => undefined);
  const fleetLoop = new Loop(
    periods.redisSampleMs,
    async () => {
      const t = now();
      const f: FleetSample = { t, ...(await readFleet(redis, keys, stack.azs.map((a) => a.name))) };
      tl.fleet.push(f);
      latestFleet = f;
    },
    () => undefined,
  );
  sampleLoop.start();
  fleetLoop.start();
  return {
    tick: () => new Promise((r) => waiters.push(r)),
    latest: () => latest,
    latestFleet: () => latestFleet,
    async stop() {
      sampleLoop.stop();
      fleetLoop.stop();
      redis.disconnect();
    },
  };
}
