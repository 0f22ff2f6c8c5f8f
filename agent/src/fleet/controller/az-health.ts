/**
 * What `GET /az/health` answers on every agent: the leader's published state of this node's
 * AZ. Route53 (or PowerDNS `ifurlup`) pulls the zone from DNS on 503, so this fails OPEN:
 * Redis unreachable, nothing published yet, or a state no leader refreshed lately all answer
 * 200 with `stale: true` — losing Redis must never take a healthy zone out of DNS. So does a
 * DOWN read by an agent whose own heartbeats reach Redis again only since moments ago
 * (`rejoining`): the leader published it while this AZ could not write (a partition, a cut
 * path) and has not seen the AZ back yet; right after the heal the AZ that served all along
 * would otherwise leave DNS for the seconds until the leader's next evaluation (the drill's
 * az-partition: 503 for 3.4 s after the heal, and one DNS change).
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../redis/keys";
import { AZ_STATES, type AzState } from "./state";
import type { AzHealthBody, AzHealthResponse } from "../../../../contracts/controller";

export type { AzHealthBody, AzHealthResponse };

class AzHealthTimeoutError extends Error {
  constructor(ms: number) {
    super(`az health read timed out after ${ms} ms`);
    this.name = "AzHealthTimeoutError";
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_r, reject) => {
      t = setTimeout(() => reject(new AzHealthTimeoutError(ms)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

export interface AzHealthOptions {
  /** Skip Redis and fail open at once (the client knows it is disconnected). */
  connected?: boolean;
  /** Read timeout. Default 300 ms (a health checker must get an answer). */
  timeoutMs?: number;
  /** A publication older than this (on Redis's clock) is stale. Default 30000 ms. */
  staleAfterMs?: number;
  /** Judge the age by this local time against the leader's `updatedAt` instead (tests). */
  now?: number;
  /** This node's heartbeats reach Redis again only since moments ago: a DOWN is not answered 503. */
  rejoining?: boolean;
}

export async function readAzHealth(redis: Redis, keys: RedisKeys, az: string, o: AzHealthOptions = {}): Promise<AzHealthResponse> {
  const open = (staleReason: AzHealthBody["staleReason"]): AzHealthResponse => ({
    code: 200,
    body: { az, state: "UNKNOWN", healthyCapacity: null, totalCapacity: null, leader: null, fencingToken: null, stale: true, staleReason },
  });
  if (o.connected === false) return open("redis-unreachable");
  let h: Record<string, string>;
  let redisNow: number | null;
  try {
    // The publication's age on Redis's clock (its `at` against TIME, one round trip): two
    // hosts' wall clocks are never compared, so a reader whose clock is off cannot fail a
    // zone (a reader 60 s behind answered 503 for a DOWN a dead leader published 80 s earlier).
    const res = await withTimeout(redis.multi().hgetall(keys.azState(az)).time().exec(), o.timeoutMs ?? 300);
    if (!res || res.some(([err]) => err)) throw new Error("az health read failed");
    h = res[0][1] as Record<string, string>;
    const [sec, usec] = res[1][1] as [string, string];
    redisNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  } catch {
    return open("redis-unreachable");
  }
  if (!h.state || !(AZ_STATES as readonly string[]).includes(h.state)) return open("not-published");
  const body: AzHealthBody = {
    az,
    state: h.state as AzState,
    healthyCapacity: Number(h.healthyCapacity),
    totalCapacity: Number(h.totalCapacity),
    leader: h.leader ?? null,
    fencingToken: h.token ? Number(h.token) : null,
    updatedAt: Number(h.updatedAt),
  };
  // `at` (Redis time of the write) where the leader's script stamped it; else its own clock.
  const at = Number(h.at);
  const age = Number.isFinite(at) && at > 0 && o.now === undefined ? redisNow - at : (o.now ?? Date.now()) - body.updatedAt!;
  if (!(age <= (o.staleAfterMs ?? 30_000))) {
    return { code: 200, body: { ...body, stale: true, staleReason: "too-old" } };
  }
  if (body.state === "DOWN" && o.rejoining) return { code: 200, body: { ...body, stale: true, staleReason: "rejoining" } };
  return { code: body.state === "DOWN" ? 503 : 200, body };
}
