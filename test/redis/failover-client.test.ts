/**
 * The Redis client and the lease through a failover's rough edges, on real
 * redis-server processes: a primary that goes silent without closing its connections while
 * the endpoint's name moves to a new primary; an acquire the client gave up on that Redis ran
 * later (CLIENT PAUSE WRITE); a frozen replica while the lease waits for it (`WAIT 1`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { Writable } from "node:stream";
import { CLUSTER_MODE_MESSAGE, createRedisClient } from "../../agent/src/fleet/redis/client";
import { createLogger } from "../../agent/src/util/log";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease, parseLeaseValue } from "../../agent/src/fleet/redis/lease";
import { acquireScript } from "../../agent/src/fleet/redis/scripts";
import { sleep, waitFor } from "../../agent/src/util/net";
import { FreezableProxy, freshCluster, testLogger } from "./helpers";

const log = testLogger();
let a: RedisServerHandle;
let b: RedisServerHandle;

beforeAll(async () => {
  [a, b] = await Promise.all([startRedisServer(), startRedisServer()]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

describe("a primary gone silent (the endpoint moved, the old connections left open)", () => {
  it("is left and the new primary used within 5 s, with commands going out as heartbeats do", async () => {
    const proxy = await FreezableProxy.start(a.port);
    const changes: [string, string][] = [];
    const c = createRedisClient(`redis://127.0.0.1:${proxy.port}`, { name: "silent-test", log, onServerChange: (from, to) => changes.push([from, to]) });
    try {
      expect(await c.whenReady(5000)).toBe(true);
      await Promise.all([c.redis.set("who", "old"), (async () => {
        const direct = createRedisClient(b.url, { name: "silent-test-b", log });
        await direct.whenReady(5000);
        await direct.redis.set("who", "new");
        await direct.close();
      })()]);
      expect(await c.redis.get("who")).toBe("old");
      // The old primary stops answering, its sockets stay open; the name now points at the new one.
      proxy.freeze();
      proxy.retarget(b.port);
      const t0 = Date.now();
      let seen = "";
      while (Date.now() - t0 < 20_000) {
        seen = (await c.redis.get("who").catch(() => "")) ?? "";
        if (seen === "new") break;
        await sleep(200);
      }
      const ms = Date.now() - t0;
      expect(seen).toBe("new");
      expect(ms).toBeLessThan(5000);
      // It knows it reached another server (what the fleet holds its verdicts for).
      const runIdOf = async (url: string): Promise<string> => {
        const d = createRedisClient(url, { name: "run-id", log });
        await d.whenReady(5000);
        const id = /run_id:(\w+)/.exec(await d.redis.info("server"))![1];
        await d.close();
        return id;
      };
      await waitFor("server change seen", () => changes.length > 0, { timeoutMs: 2000, everyMs: 20 });
      expect(changes).toEqual([[await runIdOf(a.url), await runIdOf(b.url)]]);
    } finally {
      await c.close();
      await proxy.close();
    }
  }, 30_000);
});

describe("the lease after Redis ran an acquire the client had given up on", () => {
  it("finds its own value in the key and takes it again with a fresh token at once, not one TTL later", async () => {
    const c = createRedisClient(a.url, { name: "orphan-test", log });
    const keys = new RedisKeys(freshCluster("orphan"));
    const S = { ttlMs: 10_000, renewMs: 3000, contendMs: 1000, marginMs: 1000 };
    try {
      await c.whenReady(5000);
      // What an acquire that timed out on the client and ran in Redis later leaves behind
      // (measured: CLIENT PAUSE 1500 WRITE, the acquire gave up at 1 s and ran at 1.5 s).
      const orphanToken = Date.now();
      await c.redis.set(keys.leader, `orphan-holder:${orphanToken}`, "PX", S.ttlMs);
      await c.redis.hset(keys.fenceLast, "token", orphanToken, "holder", "orphan-holder");
      const lease = new LeaderLease({ redis: c.redis, keys, holderId: "orphan-holder", settings: S, log });
      const t0 = Date.now();
      lease.start();
      try {
        await waitFor("leader again", () => lease.isLeader, { timeoutMs: 9000, everyMs: 20 });
        // Its first contend (at once, or one period later when its connection is still being made).
        expect(Date.now() - t0).toBeLessThan(S.contendMs + 1500);
        expect(lease.token!).toBeGreaterThan(orphanToken);
        expect(parseLeaseValue((await c.redis.get(keys.leader))!)).toEqual({ holder: "orphan-holder", token: lease.token });
        expect(Number(await c.redis.pttl(keys.leader))).toBeGreaterThan(S.ttlMs - 2000);
      } finally {
        await lease.release();
      }
    } finally {
      await c.close();
    }
  }, 20_000);

  it("another holder's value is still refused", async () => {
    const c = createRedisClient(a.url, { name: "orphan-test-2", log });
    const keys = new RedisKeys(freshCluster("orphan"));
    try {
      await c.whenReady(5000);
      await c.redis.set(keys.leader, "orphan-holder-2:7", "PX", 10_000);
      // A holder id that is a prefix of another's must not match it.
      expect(await acquireScript(c.redis, keys, "orphan-holder", 10_000, 0)).toEqual({ acquired: false, holder: "orphan-holder-2:7" });
    } finally {
      await c.close();
    }
  });
});

describe("the lease's WAIT for a replica", () => {
  it("runs on the lease's own connection: a frozen replica holds up no other command", async () => {
    const replica = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(b.port)] });
    const c = createRedisClient(b.url, { name: "wait-own-test", log });
    const lease = new LeaderLease({ redis: c.redis, keys: new RedisKeys(freshCluster("wait")), holderId: "w", settings: { ttlMs: 3000, renewMs: 1000, contendMs: 500, marginMs: 500, replicaWaitMs: 500 }, log });
    try {
      await waitFor("replica linked", async () => /connected_slaves:1/.test(await c.redis.info("replication")), { timeoutMs: 10_000 });
      await replica.pause();
      let worst = 0;
      let pinging = true;
      const pings = (async () => {
        while (pinging) {
          const t = performance.now();
          await c.redis.ping().catch(() => undefined);
          worst = Math.max(worst, performance.now() - t);
          await sleep(10);
        }
      })();
      lease.start();
      await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000, everyMs: 10 });
      pinging = false;
      await pings;
      // The WAIT did run (the replica is frozen: it timed out with 0 acknowledgements).
      expect(lease.unreplicated).toBe(1);
      // Before: every command behind the WAIT on the one connection waited its 500 ms.
      expect(worst).toBeLessThan(300);
    } finally {
      replica.resume();
      await lease.release();
      await c.close();
      await replica.stop();
    }
  }, 30_000);
});

describe("the Redis mode llm-ha supports is stated", () => {
  it("an endpoint in cluster mode is named in an error line and flagged; a standalone one is not", async () => {
    const cluster = await startRedisServer({ args: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"] });
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) });
    const clog = createLogger({ level: "info", destination: sink });
    const c = createRedisClient(cluster.url, { name: "cluster-mode-test", log: clog });
    const plain = createRedisClient(a.url, { name: "standalone-test", log: clog });
    try {
      await waitFor("cluster mode seen", () => c.clusterMode, { timeoutMs: 5000, everyMs: 20 });
      await plain.whenReady(5000);
      await sleep(200);
      expect(plain.clusterMode).toBe(false);
      const errors = lines.map((l) => JSON.parse(l) as { level: number; msg: string; client?: string }).filter((l) => l.level >= 50);
      expect(errors).toHaveLength(1);
      expect(errors[0].msg).toContain(CLUSTER_MODE_MESSAGE);
      expect(errors[0].client).toBe("cluster-mode-test");
    } finally {
      await Promise.all([c.close(), plain.close()]);
      await cluster.stop();
    }
  });
});
