/**
 * The drill's ElastiCache-like Redis (lab/engines/redis-ha.ts) on real engines: primary +
 * replica, three Redis Sentinels, and an HAProxy TCP endpoint following `role:master`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { startRedisHa, within, type RedisHaHandle } from "../../lab/engines/redis-ha";
import { sleep } from "../../agent/src/util/net";
import { labRedisAcl } from "../../lab/engines/redis-acl";

let ha: RedisHaHandle | null = null;
afterEach(async () => {
  await ha?.stop();
  ha = null;
});

function client(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 1000, commandTimeout: 1000, retryStrategy: () => 100 });
  r.on("error", () => undefined);
  return r;
}

const roleOf = async (r: Redis): Promise<string> => String(((await r.call("ROLE")) as unknown[])[0]);

describe("Redis primary + replica + sentinels + endpoint", () => {
  it("a sentinel failover with the replica caught up: the endpoint follows, no write is lost, the old primary turns replica", async () => {
    ha = await startRedisHa();
    const c = client(ha.url);
    try {
      await within(5000, async () => (await c.set("k", "before")) === "OK");
      await sleep(200); // replicated
      const t0 = Date.now();
      await ha.failover();
      const [first, second] = ha.servers;
      expect(await within(15_000, async () => (await ha!.sentinelPrimaryPort()) === second.port)).toBe(true);
      // The endpoint cut the old primary's sessions: the client is on the new one.
      expect(await within(10_000, async () => (await c.set("k2", "after")) === "OK" && (await c.get("k")) === "before")).toBe(true);
      const ms = Date.now() - t0;
      expect(ms).toBeLessThan(20_000);
      const old = client(`redis://127.0.0.1:${first.port}`);
      try {
        expect(await within(10_000, async () => (await roleOf(old)) === "slave")).toBe(true);
        await expect(old.set("x", "1")).rejects.toThrow(/READONLY/);
        expect((await ha.primary())?.port).toBe(second.port);
      } finally {
        old.disconnect();
      }
    } finally {
      c.disconnect();
    }
  }, 60_000);

  it("failovers back and forth: each one moves the primary, keeps the writes and leaves sentinels that settle", async () => {
    // Three in a row, as `--scenario redis-failover --runs 5` runs them: the third used to find the
    // sentinels naming the first server at its own port, not its link's, took that for the move,
    // demoted the primary before the promotion, and left two replicas of each other.
    ha = await startRedisHa();
    const c = client(ha.url);
    const [first, second] = ha.servers;
    try {
      for (const [i, to] of [second, first, second].entries()) {
        await within(5000, async () => (await c.set(`k${i}`, "v")) === "OK");
        // Caught up (a failover promises the writes the replica has; on a loaded machine 200 ms was not always enough).
        expect(await within(5000, async () => Number(await c.call("WAIT", "1", "1000")) >= 1)).toBe(true);
        await ha.failover();
        // It returns once the sentinels name the new primary (then it demotes the old one).
        expect(await ha.sentinelPrimaryPort(), `failover ${i + 1}: sentinels name ${to.port}`).toBe(to.port);
        expect(await within(15_000, async () => (await ha!.primary()) === to), `failover ${i + 1}: primary on ${to.port}`).toBe(true);
        expect(await within(10_000, async () => (await c.set(`after${i}`, "v")) === "OK")).toBe(true);
        for (let j = 0; j <= i; j++) expect(await c.get(`k${j}`), `failover ${i + 1}: k${j}`).toBe("v");
        await ha.settle();
      }
    } finally {
      c.disconnect();
    }
  }, 120_000);

  it("primary lost, back as a replica, first made primary again — four times: each loss failed over, each settle complete", async () => {
    // az-power-interruption's cycle. The endpoint follows a promoted replica before every sentinel
    // has switched to it; a RESET then aborted the switch and the next loss was never failed over.
    ha = await startRedisHa({ acl: labRedisAcl("ha-cycle") });
    const [first, second] = ha.servers;
    for (let i = 1; i <= 4; i++) {
      if ((await ha.primary()) !== first) await ha.restoreFirstPrimary();
      first.kill("SIGKILL");
      expect(await within(30_000, async () => (await ha!.primary()) === second, 100), `cycle ${i}: promoted`).toBe(true);
      await first.restart(["--replicaof", "127.0.0.1", String(second.port)]);
      await ha.settle();
    }
  }, 180_000);

  it("the first primary cut off from its replica and the sentinels: writes it takes meanwhile are lost by the promotion", async () => {
    // With the roles' ACL file, as the drill runs it (default user off; the lab admin replicates).
    ha = await startRedisHa({ acl: labRedisAcl("ha-test") });
    const c = client(ha.url);
    const [first, second] = ha.servers;
    try {
      await within(5000, async () => (await c.set("k", "replicated")) === "OK");
      await sleep(200);
      ha.partitionFirstPrimary();
      // Still the primary behind the endpoint: it takes this write, which never reaches the replica.
      expect(await c.set("k", "lost")).toBe("OK");
      expect(await within(15_000, async () => (await ha!.sentinelPrimaryPort()) === second.port)).toBe(true);
      first.kill("SIGKILL");
      expect(await within(10_000, async () => (await c.get("k")) === "replicated")).toBe(true);
      // It comes back as a replica of the new primary, as ElastiCache brings a failed primary back.
      await first.restart(["--replicaof", "127.0.0.1", String(second.port)]);
      expect((await ha.primary())?.port).toBe(second.port);
      // Any later scenario can stage the partition again: the first server is made primary, nothing lost.
      expect(await within(5000, async () => (await c.set("k3", "kept")) === "OK"), "k3 written on the new primary").toBe(true);
      await ha.restoreFirstPrimary();
      expect(await ha.partitionable()).toBe(true);
      const back = await within(10_000, async () => (await c.get("k3")) === "kept" && (await c.set("k4", "on first")) === "OK");
      if (!back) {
        // What each server holds and says it is: which of the copy, the promotion or the client's way back failed.
        const seen = await Promise.all(ha.servers.map(async (s) => {
          const d = new Redis(ha!.url.replace(`:${ha!.port}`, `:${s.port}`), { lazyConnect: true, maxRetriesPerRequest: 0 });
          d.on("error", () => undefined);
          try {
            await d.connect();
            return `${s.port}: ${await roleOf(d)} k3=${await d.get("k3")}`;
          } catch (err) {
            return `${s.port}: ${(err as Error).message}`;
          } finally {
            d.disconnect();
          }
        }));
        const viaEndpoint = await c.get("k3").then((v) => `k3=${v}`, (err: Error) => err.message);
        expect.fail(`k3 not back through the endpoint in 10 s (endpoint: ${viaEndpoint}; ${seen.join("; ")}; first=${first.port})`);
      }
      expect((await ha.primary())?.port).toBe(first.port);
    } finally {
      c.disconnect();
    }
  }, 90_000);
});
