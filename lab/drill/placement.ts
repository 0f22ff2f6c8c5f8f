/**
 * Placement as AWS has it: every Redis member, Kafka broker and L1 proxy belongs to
 * an AZ, so an AZ fault can take its share of each; and every node reaches Redis over a path
 * of its own — a LossyLink on the node's own loopback address whose upstream leg leaves from
 * that address — so the drill can cut one node, an AZ or everyone from Redis (iptables on
 * `node address → endpoint`, inside its namespace) or make Redis 300 ms away, and can place the
 * leader on the node it wants.
 */
import { Redis } from "ioredis";
import { sleep } from "../../agent/src/util/net";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { parseLeaseValue } from "../../agent/src/fleet/redis/lease";
import { LossyLink } from "../engines/lossy-link";
import type { SimNode } from "../sim/sim-node";
import type { DrillStack } from "./stack";

/** Where each shared member lives; the AZ proxies live in their own AZ, the nodes in theirs. */
export interface DrillPlacement {
  /** AZ of each Redis data server, in `redis.servers` order (first primary, first replica): Multi-AZ, primary and replica apart. */
  redisServers: readonly [string, string];
  /** AZ of each of the three sentinels: one per AZ, as a quorum that survives one AZ. */
  sentinels: readonly string[];
  /** AZ of each broker of the L4 queue's Kafka cluster (by index, round-robin over the AZs). */
  brokers: readonly string[];
}

/** The drill's placement: primary in the first AZ, replica in the second, a sentinel and a broker per AZ. */
export function placeMembers(azNames: readonly string[], brokers = 3): DrillPlacement {
  const at = (i: number): string => azNames[i % azNames.length];
  return { redisServers: [at(0), at(1)], sentinels: [0, 1, 2].map(at), brokers: Array.from({ length: brokers }, (_, i) => at(i)) };
}

/** The Redis data server placed in `az` (by index in `redis.servers`), or null. */
export function redisServerIn(p: DrillPlacement, az: string): number | null {
  const i = p.redisServers.indexOf(az);
  return i < 0 ? null : i;
}

/** An HAProxy configuration whose server connections and checks leave from `address` (`source` in `defaults`). */
export function connectFrom(config: string, address: string): string {
  if (!/^defaults$/m.test(config)) throw new PlacementError("HAProxy configuration without a defaults section");
  return config.replace(/^defaults$/m, `defaults\n  source ${address}`);
}

/**
 * Each node's path to the Redis endpoint: listens on the node's address (the same port for
 * every node), leaves from it. Started before the node so its agent is given the path's URL.
 */
export class RedisPaths {
  private readonly links = new Map<string, LossyLink>();
  constructor(
    private readonly endpointPort: number,
    readonly port: number,
  ) {}

  async open(address: string): Promise<LossyLink> {
    const existing = this.links.get(address);
    if (existing) return existing;
    const link = await LossyLink.start({ listen: { host: address, port: this.port }, target: { host: "127.0.0.1", port: this.endpointPort }, localAddress: address });
    this.links.set(address, link);
    return link;
  }

  /** The node's path (by its address). */
  of(address: string): LossyLink {
    const l = this.links.get(address);
    if (!l) throw new Error(`no Redis path for ${address}`);
    return l;
  }

  all(): LossyLink[] {
    return [...this.links.values()];
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.all().map((l) => l.close()));
  }
}

/** The node holding the lease now (read through the endpoint as the lab admin), or null. */
export async function leaseHolder(stack: DrillStack): Promise<string | null> {
  const r = new Redis(stack.redis.url, { maxRetriesPerRequest: 0, connectTimeout: 500, commandTimeout: 500, retryStrategy: () => null, lazyConnect: true });
  r.on("error", () => undefined);
  try {
    await r.connect();
    const raw = await r.get(new RedisKeys(stack.cluster).leader);
    if (!raw) return null;
    const holder = parseLeaseValue(raw)?.holder ?? raw;
    // The holder id starts with the node id (the longest match wins: gpu-a1 before gpu-a10).
    const matches = stack.nodes.filter((n) => holder === n.id || holder.startsWith(`${n.id}/`) || holder.startsWith(n.id));
    return matches.sort((a, b) => b.id.length - a.id.length)[0]?.id ?? holder;
  } catch {
    return null;
  } finally {
    r.disconnect();
  }
}

export class PlacementError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PlacementError";
  }
}

/**
 * Puts the lease on `node`: every other node's Redis path made `headStartMs` slower, the lease
 * key dropped (as an expiry would: the holder learns it at its next renew, and the fence
 * refuses whatever it still writes), and the contenders left to race — the unslowed one wins.
 * Paths back to no delay after. A setup step, before a scenario's injection.
 */
export async function placeLeader(stack: DrillStack, paths: RedisPaths, node: SimNode, o: { limitMs?: number; headStartMs?: number } = {}): Promise<number> {
  const limit = o.limitMs ?? 20_000;
  const t0 = Date.now();
  if ((await leaseHolder(stack)) === node.id) return 0;
  const others = stack.running().filter((n) => n.id !== node.id);
  try {
    for (let attempt = 0; Date.now() - t0 < limit; attempt++) {
      for (const n of others) paths.of(n.address).setDelay(o.headStartMs ?? 400);
      const r = new Redis(stack.redis.url, { maxRetriesPerRequest: 0, connectTimeout: 500, commandTimeout: 1000, retryStrategy: () => null, lazyConnect: true });
      r.on("error", () => undefined);
      try {
        await r.connect();
        await r.del(new RedisKeys(stack.cluster).leader);
      } catch {
        // the endpoint may be moving: try again
      } finally {
        r.disconnect();
      }
      const end = Date.now() + 3000;
      while (Date.now() < end) {
        if ((await leaseHolder(stack)) === node.id) return Date.now() - t0;
        await sleep(100);
      }
    }
  } finally {
    for (const n of others) paths.of(n.address).setDelay(0);
  }
  throw new PlacementError(`could not place the leader on ${node.id} within ${limit} ms (holder: ${(await leaseHolder(stack)) ?? "none"})`);
}
