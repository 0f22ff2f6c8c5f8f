/**
 * Randomized chaos over the lease and the fenced writes, in-process with fast settings.
 * Each contender reaches Redis through its own TCP proxy that can freeze both directions:
 * a "pause" — the holder's writes sit in the socket and reach Redis after it resumes, when a
 * newer leader may exist. Safety is judged from Redis's own log (every accepted write
 * appends to the events stream): accepted tokens never go down, and one token is never
 * accepted for two holders (no overlapping leaders).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { fencedHsetScript } from "../../agent/src/fleet/redis/scripts";
import { sleep } from "../../agent/src/util/net";
import { FreezableProxy, freshCluster, testLogger } from "./helpers";

const log = testLogger();
const S = { ttlMs: 250, renewMs: 70, contendMs: 50, marginMs: 60, replicaWaitMs: 50 };
const GROUPS = 4;
const TRIALS_PER_GROUP = 50;

interface Contender {
  id: string;
  proxy: FreezableProxy;
  client: RedisClient;
  lease: LeaderLease;
  token: number | null;
  closed: boolean;
  loop: Promise<void>;
}

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

describe("lease chaos", () => {
  it(`${GROUPS * TRIALS_PER_GROUP} randomized trials: no overlapping accepted actions, accepted tokens never go down`, async () => {
    const logs = new Map<string, string[][]>(); // group prefix -> accepted [token, holder] in Redis order
    let restarting: Promise<void> | null = null;
    let activePauses = 0;
    const counts: Record<string, number> = {};
    let acquisitions = 0;

    const archive = async (keys: RedisKeys, c: RedisClient): Promise<void> => {
      const ev = await c.redis.xrange(keys.events, "-", "+");
      const list = logs.get(keys.prefix) ?? [];
      for (const [, f] of ev) {
        const o: Record<string, string> = {};
        for (let i = 0; i + 1 < f.length; i += 2) o[f[i]] = f[i + 1];
        list.push([o.token, o.leader]);
      }
      logs.set(keys.prefix, list);
      await c.redis.del(keys.events);
    };

    const groups = Array.from({ length: GROUPS }, (_, g) => ({
      g,
      keys: new RedisKeys(freshCluster(`chaos${g}`)),
      observer: createRedisClient(redis.url, { name: `obs${g}`, log, maxBackoffMs: 100 }),
    }));
    const archiveAll = async (): Promise<void> => {
      for (const x of groups) {
        await x.observer.whenReady(3000);
        await archive(x.keys, x.observer);
      }
    };

    const runGroup = async ({ g, keys, observer }: (typeof groups)[number]): Promise<void> => {
      let n = 0;
      const make = async (): Promise<Contender> => {
        const id = `g${g}-c${n++}`;
        const proxy = await FreezableProxy.start(redis.port);
        const client = createRedisClient(`redis://127.0.0.1:${proxy.port}`, { name: id, log, commandTimeoutMs: 2000, maxBackoffMs: 100 });
        const lease = new LeaderLease({ redis: client.redis, keys, holderId: id, settings: S, log });
        const c: Contender = { id, proxy, client, lease, token: null, closed: false, loop: Promise.resolve() };
        lease.on("acquired", (t) => {
          c.token = t;
          acquisitions += 1;
        });
        lease.on("lost", () => {
          c.token = null;
        });
        c.loop = (async () => {
          let k = 0;
          while (!c.closed) {
            const t = c.token; // check-then-act on purpose: only Redis can refuse a stale write
            if (t !== null) {
              try {
                const r = await fencedHsetScript(client.redis, {
                  fenceLast: keys.fenceLast, target: `${keys.prefix}chaos`, events: keys.events, token: t, holder: id,
                  eventType: "action", eventsMaxLen: 1_000_000, fields: { k: k++ },
                });
                if (!r.accepted) {
                  lease.observeToken(r.highestToken);
                  lease.stepDown("fenced-out");
                }
              } catch {
                // timeouts and resets are part of the chaos
              }
            }
            await sleep(5);
          }
        })();
        await client.whenReady(2000);
        lease.start();
        return c;
      };
      const kill = async (c: Contender, graceful: boolean): Promise<void> => {
        c.closed = true;
        if (graceful) await c.lease.release();
        else c.lease.abandon();
        await c.loop;
        c.client.redis.disconnect(false);
        await c.proxy.close();
      };

      const cs: Contender[] = [await make(), await make(), await make()];
      await observer.whenReady(2000);
      try {
        for (let trial = 0; trial < TRIALS_PER_GROUP; trial++) {
          if (restarting) await restarting;
          const leader = cs.find((c) => c.token !== null) ?? cs[Math.floor(Math.random() * cs.length)];
          const r = Math.random();
          let kind: string;
          if (r < 0.25) {
            kind = "crash";
            await kill(leader, false);
            cs.splice(cs.indexOf(leader), 1, await make());
          } else if (r < 0.55) {
            kind = "pause-leader";
            activePauses++;
            leader.proxy.freeze();
            await sleep(S.ttlMs + 20 + Math.random() * 200);
            leader.proxy.thaw();
            activePauses--;
          } else if (r < 0.65) {
            kind = "pause-short"; // shorter than the TTL: the holder may keep the lease
            activePauses++;
            leader.proxy.freeze();
            await sleep(Math.random() * S.ttlMs * 0.8);
            leader.proxy.thaw();
            activePauses--;
          } else if (r < 0.85) {
            kind = "graceful";
            await kill(leader, true);
            cs.splice(cs.indexOf(leader), 1, await make());
          } else if (r < 0.93 && g === 0) {
            kind = "redis-restart";
            // archive every group's log first: the restart loses the streams
            restarting = (async () => {
              while (activePauses > 0) await sleep(5);
              await archiveAll();
              await redis.restart();
            })();
            await restarting;
            restarting = null;
          } else {
            kind = "redis-stall"; // a short SIGSTOP of Redis itself
            await redis.pause();
            await sleep(Math.random() * S.ttlMs);
            redis.resume();
          }
          counts[kind] = (counts[kind] ?? 0) + 1;
          // liveness: some leader again within a generous bound
          const deadline = Date.now() + 5000;
          while (!cs.some((c) => c.lease.isLeader) && Date.now() < deadline) await sleep(5);
          await sleep(Math.random() * 60);
        }
      } finally {
        for (const c of cs) await kill(c, true);
      }
    };

    const t0 = Date.now();
    await Promise.all(groups.map(async (x) => {
      await sleep(x.g * 20);
      await runGroup(x);
    }));
    await archiveAll();
    for (const x of groups) await x.observer.close();
    const elapsed = Date.now() - t0;

    let total = 0;
    for (const [prefix, list] of logs) {
      const holderOf = new Map<string, string>();
      let prev = 0;
      for (const [tok, holder] of list) {
        const t = Number(tok);
        expect(t, `${prefix}: accepted token went down`).toBeGreaterThanOrEqual(prev);
        prev = t;
        const h = holderOf.get(tok);
        if (h) expect(h, `${prefix}: token ${tok} accepted for two holders`).toBe(holder);
        holderOf.set(tok, holder);
      }
      total += list.length;
    }
    console.log(JSON.stringify({ trials: GROUPS * TRIALS_PER_GROUP, counts, acquisitions, acceptedWrites: total, elapsedMs: elapsed }));
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(GROUPS * TRIALS_PER_GROUP);
    expect(acquisitions).toBeGreaterThan(GROUPS * TRIALS_PER_GROUP * 0.4);
    expect(total).toBeGreaterThan(1000);
  }, 120_000);
});
