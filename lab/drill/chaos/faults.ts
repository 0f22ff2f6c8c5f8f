/**
 * The chaos campaign's injectors: each catalogue kind (`schedule.ts`) as an inject that returns
 * its heal, built from the same primitives the drill's scenarios use (sim-node, the stack's AZ
 * proxies, redis-ha, the link cuts and Redis paths of the drill's own namespace). A leader
 * fault resolves its node when it fires; it is skipped, saying why, when there is no leader or
 * another fault already holds that node.
 */
import { Redis } from "ioredis";
import type { LinkSpec } from "../../engines/netns";
import { within } from "../../engines/redis-ha";
import type { SimNode } from "../../sim/sim-node";
import { leaderNode } from "../scenarios/fleet";
import { partitionLinks } from "../scenarios/az-partition";
import { CROSS_AZ_LOSS, crossAzLinks } from "../scenarios/cross-az-loss";
import { endpointOn } from "../scenarios/redis";
import { REDIS_ONE_WAY_MS } from "../scenarios/redis-latency";
import type { ScenarioContext } from "../scenarios/runner";
import type { DrillAz } from "../stack";
import type { QueueProbe } from "../scenarios/queue-probe";
import { KAFKA_TARGET, type ChaosEvent } from "./schedule";

export class ChaosFaultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChaosFaultError";
  }
}

/** An inject whose precondition is missing (e.g. no replica in sync to promote): the fault is skipped, saying why. */
export class ChaosSkip extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChaosSkip";
  }
}

/** A fault as it fired: what it hit (AZs by the node it resolved to) and how to undo it. */
export interface FiredFault {
  victims: string[];
  azs: string[];
  heal(): Promise<void>;
}

/** Node ids under a fault now (set by the runner): a leader fault does not take a node another fault holds. */
export type BusyNodes = Set<string>;

type NodeInject = (n: SimNode) => Promise<() => Promise<void>>;

const NODE_FAULTS: Record<string, NodeInject> = {
  crash: async (n) => {
    await n.crashInference();
    return () => n.startInference("ready");
  },
  "gpu-lost": async (n) => {
    await n.gpuFault("gpuLost");
    return () => n.gpuFault(null);
  },
  wedged: async (n) => {
    await n.setMode("wedged");
    return () => n.setMode("ready");
  },
  slow: async (n) => {
    await n.setMode({ mode: "slow", slowMs: 900 });
    return () => n.setMode("ready");
  },
  "agent-kill": async (n) => {
    await n.killAgent("SIGKILL");
    return () => n.startAgent();
  },
};

function cutAll(ctx: ScenarioContext, links: LinkSpec[]): () => Promise<void> {
  const cuts = ctx.cuts;
  if (!cuts) throw new ChaosFaultError("a link fault needs the drill's own network namespace");
  for (const l of links) cuts.cut(l);
  return async () => {
    for (const l of links) cuts.heal(l);
  };
}

function redisCut(ctx: ScenarioContext, n: SimNode): () => Promise<void> {
  return cutAll(ctx, [{ from: n.address, to: "127.0.0.1", port: ctx.stack.redis.port }]);
}

async function azFault(ctx: ScenarioContext, kind: string, az: DrillAz): Promise<() => Promise<void>> {
  const { stack } = ctx;
  const nodes = stack.nodes.filter((n) => n.az === az.name);
  switch (kind) {
    case "az-proxy-kill":
      stack.killAzProxy(az);
      return () => stack.startAzProxy(az);
    case "az-loss":
      stack.killAzProxy(az);
      await Promise.all(nodes.map((n) => Promise.all([n.crashInference(), n.killAgent("SIGKILL")])));
      return async () => {
        await Promise.all(
          nodes.map(async (n) => {
            await n.startInference("ready");
            await n.startAgent();
          }),
        );
        await stack.startAzProxy(az);
      };
    case "az-partition":
      return cutAll(ctx, partitionLinks(stack, az));
    default:
      throw new ChaosFaultError(`no AZ fault named ${JSON.stringify(kind)}`);
  }
}

async function redisFault(ctx: ScenarioContext, kind: string, holdMs: number): Promise<() => Promise<void>> {
  const ha = ctx.stack.redis;
  switch (kind) {
    case "redis-failover":
      try {
        await ha.failover();
      } catch (err) {
        // After a slow settle the sentinels may not count the replica as in sync yet: nothing to fail over to.
        if (/NOGOODSLAVE/.test((err as Error).message)) throw new ChaosSkip("no replica in sync to promote (sentinels: NOGOODSLAVE)");
        throw err;
      }
      return () => ha.settle();
    case "redis-primary-kill": {
      const [first, second] = ha.servers;
      const before = (await ha.primary()) ?? first;
      const next = before === first ? second : first;
      before.kill("SIGKILL");
      return async () => {
        // As ElastiCache: the failed primary comes back as a replica of the promoted one.
        if (!(await within(30_000, () => endpointOn(ha.url, next.port).catch(() => false), 200))) throw new ChaosFaultError("the endpoint did not reach the promoted replica within 30 s");
        await before.restart(["--replicaof", "127.0.0.1", String(next.port)]);
        await ha.settle();
      };
    }
    case "redis-write-pause": {
      const admin = new Redis(ha.url, { maxRetriesPerRequest: 0, connectTimeout: 1000, lazyConnect: true });
      admin.on("error", () => undefined);
      try {
        await admin.connect();
        await admin.call("CLIENT", "PAUSE", Math.max(1, Math.round(holdMs)), "WRITE");
      } finally {
        admin.disconnect();
      }
      // The pause ends by itself at the end of the hold.
      return async () => undefined;
    }
    default:
      throw new ChaosFaultError(`no Redis fault named ${JSON.stringify(kind)}`);
  }
}

function linkFault(ctx: ScenarioContext, kind: string): () => Promise<void> {
  switch (kind) {
    case "redis-latency": {
      const paths = ctx.stack.redisPaths;
      if (!paths) throw new ChaosFaultError("redis-latency needs the nodes' own Redis paths");
      for (const p of paths.all()) p.setDelay(REDIS_ONE_WAY_MS);
      return async () => {
        for (const p of paths.all()) p.setDelay(0);
      };
    }
    case "cross-az-loss":
      return cutAll(ctx, crossAzLinks(ctx.stack, CROSS_AZ_LOSS));
    default:
      throw new ChaosFaultError(`no link fault named ${JSON.stringify(kind)}`);
  }
}

/** Fires one scheduled fault; resolves what it hit and its heal, or a reason it was skipped. */
export async function fire(ctx: ScenarioContext, ev: ChaosEvent, busy: BusyNodes, queue: QueueProbe | null = null): Promise<FiredFault | { skipped: string }> {
  try {
    return await fireOrThrow(ctx, ev, busy, queue);
  } catch (err) {
    if (err instanceof ChaosSkip) return { skipped: err.message };
    throw err;
  }
}

async function fireOrThrow(ctx: ScenarioContext, ev: ChaosEvent, busy: BusyNodes, queue: QueueProbe | null): Promise<FiredFault | { skipped: string }> {
  const { stack } = ctx;
  const node = (id: string): SimNode => {
    const n = stack.nodes.find((x) => x.id === id);
    if (!n) throw new ChaosFaultError(`no node ${id}`);
    return n;
  };
  const holding = (nodes: SimNode[], heal: () => Promise<void>): FiredFault => {
    for (const n of nodes) busy.add(n.id);
    return {
      victims: nodes.map((n) => n.id),
      azs: [...new Set(nodes.map((n) => n.az))],
      heal: async () => {
        try {
          await heal();
        } finally {
          for (const n of nodes) busy.delete(n.id);
        }
      },
    };
  };
  if (NODE_FAULTS[ev.kind]) {
    const n = node(ev.target);
    return holding([n], await NODE_FAULTS[ev.kind](n));
  }
  if (ev.kind === "node-redis-cut") {
    const n = node(ev.target);
    return holding([n], redisCut(ctx, n));
  }
  if (ev.kind === "leader-kill" || ev.kind === "leader-isolated") {
    const n = leaderNode(ctx);
    if (!n) return { skipped: "no leader in Redis" };
    if (busy.has(n.id)) return { skipped: `the leader's node ${n.id} is under another fault` };
    if (ev.kind === "leader-isolated") return holding([n], redisCut(ctx, n));
    await n.killAgent("SIGKILL");
    return holding([n], () => n.startAgent());
  }
  const az = stack.azs.find((a) => a.name === ev.target);
  if (az) {
    const nodes = stack.nodes.filter((n) => n.az === az.name);
    return { ...holding(nodes, await azFault(ctx, ev.kind, az)), victims: [az.name], azs: [az.name] };
  }
  if (ev.target === "redis") return { victims: ["redis"], azs: [], heal: await redisFault(ctx, ev.kind, ev.durationMs) };
  if (ev.target === "links") return { victims: ["links"], azs: [], heal: linkFault(ctx, ev.kind) };
  if (ev.target.startsWith(KAFKA_TARGET)) {
    if (!queue) throw new ChaosFaultError("no Kafka cluster with its mock API to fail a broker of (python3 missing?)");
    const az = ev.target.slice(KAFKA_TARGET.length);
    // One broker, what the queue's topic promises (replication factor 3, min.insync.replicas 2): on a two-AZ
    // fleet the three brokers place two in one AZ, and failing both broke acks=all by design (chaos seed 9).
    const ids = await queue.failBroker(az);
    return { victims: ids.map((id) => `kafka broker ${id} (${az})`), azs: [], heal: () => queue.healAz() };
  }
  throw new ChaosFaultError(`fault #${ev.n} ${ev.kind}: unknown target ${JSON.stringify(ev.target)}`);
}
