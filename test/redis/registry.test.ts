import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient, reconnectDelay } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { readSnapshot, NodeRegistry, type NodeReport } from "../../agent/src/fleet/redis/registry";
import { takesTraffic, type Decision } from "../../agent/src/types";
import { createLogger } from "../../agent/src/util/log";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "./helpers";

const log = testLogger();
let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

function decision(up: boolean, loadScore = 1): Decision {
  const now = Date.now();
  return up
    ? { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore }
    : { status: "UNHEALTHY", phase: "down", weight: 0, since: now, checkedAt: now, loadScore, pending: [], suppressed: [], reasons: [{ source: "gpu", code: "GPU_LOST", hard: true, effect: "unhealthy" }] };
}
const report = (nodeId: string, az: string, up = true, loadScore = 1): NodeReport => ({
  nodeId, az, decision: decision(up, loadScore), gpus: up ? 8 : 7, gpusExpected: 8, model: up ? "m" : null,
});

describe("registry heartbeat (heartbeat-7.lua)", () => {
  it("writes the node hash with its expiry, keeps the available set exact, and writes events only on a change", async () => {
    const c = createRedisClient(redis.url, { name: "t", log });
    const keys = new RedisKeys(freshCluster());
    const reg = new NodeRegistry({ client: c, keys, settings: { intervalMs: 1000 }, log });
    try {
      await waitFor("ready", () => c.connected);
      expect((await reg.heartbeat(report("n1", "a", true, 3))).changed).toBe(true);
      const h = await c.redis.hgetall(keys.node("n1"));
      expect(h).toMatchObject({ az: "a", status: "HEALTHY", weight: "100", loadScore: "3", gpus: "8", model: "m" });
      expect(Number(h.updatedAt)).toBeGreaterThan(0);
      const ttl = await c.redis.pttl(keys.node("n1"));
      expect(ttl).toBeGreaterThan(2500);
      expect(ttl).toBeLessThanOrEqual(3000);
      expect(await c.redis.zrange(keys.azAvailable("a"), "0", "-1", "WITHSCORES")).toEqual(["n1", "3"]);
      expect((await reg.heartbeat(report("n1", "a", true, 2))).changed).toBe(false);
      expect(await c.redis.zscore(keys.azAvailable("a"), "n1")).toBe("2");
      expect((await reg.heartbeat(report("n1", "a", false))).changed).toBe(true);
      expect(await c.redis.zcard(keys.azAvailable("a"))).toBe(0);
      expect(await c.redis.hget(keys.node("n1"), "model")).toBe("");
      // moving AZ leaves the old set
      await reg.heartbeat(report("n1", "a", true));
      await reg.heartbeat(report("n1", "b", true));
      expect(await c.redis.zcard(keys.azAvailable("a"))).toBe(0);
      expect(await c.redis.zrange(keys.azAvailable("b"), "0", "-1")).toEqual(["n1"]);
      const ev = await c.redis.xrange(keys.events, "-", "+");
      expect(ev.map(([, f]) => fields(f).status)).toEqual(["HEALTHY", "UNHEALTHY", "HEALTHY"]);
      expect(await reg.remove()).toBe(true);
      expect(await c.redis.exists(keys.node("n1"), keys.azAvailable("b"))).toBe(0);
      expect(await c.redis.hlen(keys.members)).toBe(0);
    } finally {
      await c.close();
    }
  });
});

describe("members: a joining node is not lost capacity", () => {
  it("marks a member served once it took traffic, keeps the mark while it is a member, and the snapshot carries it", async () => {
    const c = createRedisClient(redis.url, { name: "t", log });
    const keys = new RedisKeys(freshCluster());
    const reg = new NodeRegistry({ client: c, keys, settings: { intervalMs: 1000 }, log });
    try {
      await waitFor("ready", () => c.connected);
      const loading: NodeReport = { ...report("n1", "a", false), decision: { ...decision(false), status: "UNKNOWN", phase: "loading", reasons: [] } };
      await reg.heartbeat(loading);
      expect(await c.redis.hget(keys.members, "n1")).toBe("a|8|0");
      expect((await readSnapshot(c.redis, keys)).nodes[0]).toMatchObject({ nodeId: "n1", served: false, takesTraffic: false });
      await reg.heartbeat(report("n1", "a", true));
      expect(await c.redis.hget(keys.members, "n1")).toBe("a|8|1");
      await reg.heartbeat(report("n1", "a", false)); // crashed and restarting: lost capacity now
      expect(await c.redis.hget(keys.members, "n1")).toBe("a|8|1");
      expect((await readSnapshot(c.redis, keys)).nodes[0]).toMatchObject({ served: true, takesTraffic: false });
      // an entry from before the flag existed counts as served
      await c.redis.hset(keys.members, "old", "a|8");
      expect((await readSnapshot(c.redis, keys)).nodes.find((n) => n.nodeId === "old")).toMatchObject({ alive: false, az: "a", gpusExpected: 8, served: true });
    } finally {
      await reg.remove();
      await c.close();
    }
  });
});

/** One atomic read of every node hash and available set. */
async function invariantViolations(c: ReturnType<typeof createRedisClient>, keys: RedisKeys, azs: string[]): Promise<string[]> {
  const ids = Object.keys(await c.redis.hgetall(keys.members));
  const m = c.redis.multi();
  for (const id of ids) m.hgetall(keys.node(id));
  for (const az of azs) m.zrange(keys.azAvailable(az), "0", "-1");
  const r = (await m.exec()) ?? [];
  const out: string[] = [];
  const sets = new Map(azs.map((az, i) => [az, new Set(r[ids.length + i][1] as string[])]));
  ids.forEach((id, i) => {
    const h = r[i][1] as Record<string, string>;
    if (!h.status) return; // expired: the sweep takes it out (checked by the timing assertions)
    const takes = takesTraffic({ phase: h.phase as Decision["phase"], weight: Number(h.weight) });
    const inSet = sets.get(h.az)?.has(id) ?? false;
    if (takes !== inSet) out.push(`${id}: status ${h.status} but inSet=${inSet}`);
  });
  return out;
}

function fields(f: string[]): Record<string, string> {
  const o: Record<string, string> = {};
  for (let i = 0; i + 1 < f.length; i += 2) o[f[i]] = f[i + 1];
  return o;
}

const NODE_FIXTURE = join(__dirname, "fixtures", "node-agent.ts");
function spawnNode(cluster: string, id: string, az: string, intervalMs: number, mode: "healthy" | "flap"): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", NODE_FIXTURE, redis.url, cluster, id, az, String(intervalMs), mode], {
    stdio: ["ignore", "ignore", "inherit"],
  });
}

describe("registry under node faults (child processes + a leader sweeping)", () => {
  it("killed, paused and flapping nodes: the available set is always what the live nodes report", async () => {
    const cluster = freshCluster();
    const keys = new RedisKeys(cluster);
    const I = 200; // heartbeat period: hash TTL 600 ms
    const fleet = new Fleet({
      redisUrl: redis.url, cluster, nodeId: "leader", az: "a", intervalMs: I, log, metrics: new Registry(),
      lease: { ttlMs: 1500, renewMs: 500, contendMs: 300, marginMs: 300 },
    });
    fleet.start(() => report("leader", "a"));
    const kids = new Map<string, ChildProcess>([
      ["n1", spawnNode(cluster, "n1", "a", I, "healthy")],
      ["n2", spawnNode(cluster, "n2", "b", I, "healthy")],
      ["n3", spawnNode(cluster, "n3", "b", I, "healthy")],
      ["n4", spawnNode(cluster, "n4", "a", I, "flap")],
    ]);
    const c = createRedisClient(redis.url, { name: "observer", log });
    const violations: string[] = [];
    let sampling = true;
    const available = async (az: string): Promise<string[]> => (await c.redis.zrange(keys.azAvailable(az), "0", "-1")).sort();
    try {
      await waitFor("leader", () => fleet.isLeader, { timeoutMs: 15_000 });
      await waitFor("all nodes in", async () => (await available("b")).length === 2 && (await available("a")).includes("n1"), { timeoutMs: 20_000 });
      const sampler = (async () => {
        while (sampling) {
          violations.push(...(await invariantViolations(c, keys, ["a", "b"])));
          await sleep(30);
        }
      })();

      // killed: leaves within the hash TTL + one controller period (+ slack for this busy machine)
      const bound = 3 * I + I + 1500;
      let t = Date.now();
      kids.get("n2")!.kill("SIGKILL");
      await waitFor("n2 out", async () => !(await available("b")).includes("n2"), { timeoutMs: 10_000, everyMs: 20 });
      expect(Date.now() - t).toBeLessThanOrEqual(bound);

      // paused: leaves the same way, and comes back after SIGCONT
      t = Date.now();
      kids.get("n3")!.kill("SIGSTOP");
      await waitFor("n3 out", async () => !(await available("b")).includes("n3"), { timeoutMs: 10_000, everyMs: 20 });
      expect(Date.now() - t).toBeLessThanOrEqual(bound);
      kids.get("n3")!.kill("SIGCONT");
      await waitFor("n3 back", async () => (await available("b")).includes("n3"), { timeoutMs: 5000, everyMs: 20 });

      await sleep(1000);
      sampling = false;
      await sampler;
      expect(violations).toEqual([]);

      const ev = await c.redis.xrange(keys.events, "-", "+");
      const kinds = ev.map(([, f]) => fields(f)).map((o) => `${o.node}:${o.status}`);
      expect(kinds).toContain("n2:EXPIRED");
      expect(kinds).toContain("n3:EXPIRED");
      expect(kinds.filter((k) => k.startsWith("n4:")).length).toBeGreaterThan(5); // every flap is a transition
      // n2 is dead but still a member: its capacity counts toward AZ b's total
      const st = await c.redis.hgetall(keys.azState("b"));
      expect(st).toMatchObject({ healthyCapacity: "8", totalCapacity: "16", state: "DEGRADED" });
    } finally {
      sampling = false;
      for (const k of kids.values()) {
        k.kill("SIGCONT");
        k.kill("SIGKILL");
      }
      await fleet.stop();
      await c.close();
    }
  });
});

describe("Redis unreachable", () => {
  it("keeps the local report, counts errors, retries, and re-registers when Redis returns", async () => {
    const own = await startRedisServer();
    const c = createRedisClient(own.url, { name: "n1", log, maxBackoffMs: 300 });
    const keys = new RedisKeys(freshCluster());
    const reg = new NodeRegistry({ client: c, keys, settings: { intervalMs: 200, maxBackoffMs: 800 }, log });
    try {
      reg.start(() => report("n1", "a"));
      await waitFor("registered", () => reg.connected, { timeoutMs: 5000 });
      // The first registration is not a return: /az/health's `rejoining` starts only after failures.
      expect(reg.resumedAt).toBeNull();
      own.kill("SIGKILL");
      await waitFor("disconnected", () => !reg.connected && reg.errors > 0, { timeoutMs: 5000 });
      expect(reg.failing).toBe(true);
      expect(reg.lastReport?.decision.status).toBe("HEALTHY");
      await sleep(1000);
      const errs = reg.errors;
      expect(errs).toBeGreaterThan(0);
      // Taken before the restart: the registry may reconnect and register again while restart()
      // is still waiting for the server to answer, before a time taken after it.
      const t = Date.now();
      await own.restart(); // same port, every key lost
      await waitFor("re-registered", () => reg.connected, { timeoutMs: 5000 });
      expect(Date.now() - t).toBeLessThan(2000);
      expect(reg.resumedAt).toBeGreaterThanOrEqual(t);
      expect(reg.failing).toBe(false);
      const probe = createRedisClient(own.url, { name: "probe", log });
      await waitFor("probe", () => probe.connected);
      expect(await probe.redis.zrange(keys.azAvailable("a"), "0", "-1")).toEqual(["n1"]);
      expect(await probe.redis.hget(keys.node("n1"), "status")).toBe("HEALTHY");
      await probe.close();
    } finally {
      reg.stopLoop();
      await c.close();
      await own.stop();
    }
  });

  it("reconnects with capped exponential backoff, jittered between half and all of it", () => {
    expect([1, 2, 3, 4, 5, 10].map((n) => reconnectDelay(n, 100, 2000, 0.999999))).toEqual([100, 200, 400, 800, 1600, 2000]);
    expect([1, 2, 3, 4, 5, 10].map((n) => reconnectDelay(n, 100, 2000, 0))).toEqual([50, 100, 200, 400, 800, 1000]);
    expect(reconnectDelay(10, 100, 500, 0.5)).toBe(375);
  });
});

describe("auth and TLS", () => {
  it("auth in the URL or apart, TLS with rediss://, and the password never in a log line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmha-tls-"));
    const tlsPort = await freePort();
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore", timeout: 20_000 });
    const secret = "s3cret-token-xyz";
    const srv = await startRedisServer({
      password: secret,
      args: [
        "--requirepass", secret, "--tls-port", String(tlsPort), "--tls-cert-file", join(dir, "cert.pem"),
        "--tls-key-file", join(dir, "key.pem"), "--tls-ca-cert-file", join(dir, "cert.pem"), "--tls-auth-clients", "no",
      ],
    });
    let logged = "";
    const captured = createLogger({
      level: "debug",
      destination: new Writable({ write(chunk, _e, cb) { logged += String(chunk); cb(); } }),
    });
    const clients = [
      createRedisClient(`redis://:${secret}@127.0.0.1:${srv.port}`, { name: "url-auth", log: captured }),
      createRedisClient(`redis://127.0.0.1:${srv.port}`, { name: "apart", log: captured, password: secret }),
      createRedisClient(`rediss://:${secret}@127.0.0.1:${tlsPort}`, {
        name: "tls", log: captured, tls: { ca: execFileSync("cat", [join(dir, "cert.pem")]) },
      }),
    ];
    const wrong = createRedisClient(`redis://:nope@127.0.0.1:${srv.port}`, { name: "wrong", log: captured });
    try {
      for (const cl of clients) {
        await waitFor(`ready ${cl.safeUrl}`, () => cl.connected, { timeoutMs: 5000 });
        expect(await cl.redis.ping()).toBe("PONG");
      }
      await sleep(300);
      expect(wrong.connected).toBe(false);
      expect(clients[2].safeUrl).toContain("rediss://:redacted@127.0.0.1");
      expect(logged).toContain("redis connected");
      expect(logged).not.toContain(secret);
    } finally {
      for (const cl of [...clients, wrong]) await cl.close();
      await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
