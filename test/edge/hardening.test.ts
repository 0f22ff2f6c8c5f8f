/**
 * The public edge against a client with a valid key and against idle connections, on a real
 * HAProxy with the generator's configuration: paths that a server behind would resolve into
 * another route, bodies without Content-Length, a Retry-After that holds, keyed clients behind
 * an address that floods without a key, and one address holding connections open.
 * Each test sends from loopback addresses of its own (127.0.0.x), as separate hosts would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freePort, sleep, socketExchange, waitFor } from "../../agent/src/util/net";
import { createLogger } from "../../agent/src/util/log";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { KeyStore } from "../../agent/src/edge/keys/keys";
import { EdgeSync } from "../../agent/src/edge/keys/sync";
import { startEdgeSink, type EdgeSink } from "../../agent/src/edge/keys/sink";
import { fakeServer, type FakeServer } from "../l1/fixtures";
import { AZ_HEALTH_CONNS_PER_SOURCE } from "../../contracts/haproxy-az-health";

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  ms: number;
}

interface CallOpts {
  method?: string;
  path?: string;
  key?: string;
  from?: string;
  /** A body sent without Content-Length (chunked), in pieces of 64 KiB. */
  chunked?: number;
  timeoutMs?: number;
}

function call(port: number, o: CallOpts = {}): Promise<Reply> {
  const t0 = performance.now();
  const method = o.method ?? (o.chunked !== undefined ? "POST" : "GET");
  return new Promise((resolve) => {
    const headers: Record<string, string> = {};
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.chunked !== undefined) headers["content-type"] = "application/json";
    // `path` is sent as it is: node:http does not resolve dot segments in it.
    const req = request({ host: "127.0.0.1", port, method, path: o.path ?? "/v1/models", localAddress: o.from, agent: false, headers, timeout: o.timeoutMs ?? 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, ms: performance.now() - t0 }));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve({ status: 0, headers: {}, body: "", ms: performance.now() - t0 }));
    if (o.chunked === undefined) {
      req.end();
      return;
    }
    let left = o.chunked;
    const piece = Buffer.alloc(64 * 1024, 0x61);
    const more = (): void => {
      while (left > 0) {
        const n = Math.min(left, piece.length);
        left -= n;
        if (!req.write(piece.subarray(0, n))) return void req.once("drain", more);
      }
      req.end();
    };
    more();
  });
}

/** Opens `n` connections from `from` and sends nothing; resolves once each is connected or refused. */
async function idle(port: number, from: string, n: number): Promise<{ socks: Socket[]; closedAt: number[] }> {
  const closedAt: number[] = [];
  const socks: Socket[] = [];
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = connect({ host: "127.0.0.1", port, localAddress: from });
          s.resume(); // read what comes (a 408), so that the close is seen
          socks.push(s);
          s.on("connect", () => resolve());
          s.on("error", () => resolve());
          s.on("close", () => {
            closedAt.push(Date.now());
            resolve();
          });
        }),
    ),
  );
  return { socks, closedAt };
}

describe("the public edge holds against a keyed client and against idle connections", () => {
  let redis: RedisServerHandle;
  let client: Redis;
  let hp: HaproxyHandle;
  let srv: FakeServer;
  let agent: FakeServer;
  let fallback: FakeServer;
  let sync: EdgeSync;
  let store: KeyStore;
  let port: number;
  let azPort: number;
  let dir: string;
  let sink: EdgeSink;
  const UNAUTH = 20;
  const FE_MAXCONN = 200;

  beforeAll(async () => {
    redis = await startRedisServer();
    client = new Redis(redis.url);
    const keys = new RedisKeys(`edgeh-${process.pid}`);
    store = new KeyStore(client, keys);
    dir = mkdtempSync(join(tmpdir(), "llmha-edge-hard-"));
    const mapPath = join(dir, "keys.map");
    writeFileSync(mapPath, "");
    const ok = (_req: unknown, res: import("node:http").ServerResponse): void => void res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    srv = await fakeServer("s1", ok);
    agent = await fakeServer("agent", ok);
    fallback = await fakeServer("fallback", ok);
    sink = await startEdgeSink({ host: "127.0.0.1", port: 0, maxBodyBytes: 8 * 1024 * 1024 });
    port = await freePort();
    azPort = await freePort();
    hp = await startHaproxy({
      proxies: [
        {
          name: "l1",
          bind: `127.0.0.1:${port}`,
          health: "agent",
          forwardAzHealth: true,
          azHealthBind: `127.0.0.1:${azPort}`,
          // A small frontend, so that one address holding its connections would fill it.
          tuning: { frontendMaxconn: FE_MAXCONN },
          servers: { kind: "static", local: [{ name: "s1", address: "127.0.0.1", port: srv.port, agentPort: await freePort(), httpPort: agent.port }], backup: [] },
          fallback: { address: `127.0.0.1:${fallback.port}` },
          edge: { keysMap: mapPath, unauthPer10s: UNAUTH, sinkAddress: `127.0.0.1:${sink.port}`, upstreamKeyEnv: "LLMHA_TEST_UPSTREAM_KEY" },
        },
      ],
    }, { env: { LLMHA_TEST_UPSTREAM_KEY: "server-key-hard-123" } });
    sync = new EdgeSync({ redis: client, keys, sockets: [hp.mapSocket], mapPath, log: createLogger({ level: "silent" }), periodMs: 100 });
    sync.start();
    await waitFor("server UP", async () => (await hp.stats()).some((r) => r.server === "s1" && r.status.startsWith("UP")), { timeoutMs: 10_000, everyMs: 50 });
  });

  afterAll(async () => {
    sync?.stop();
    await hp?.stop();
    for (const s of [srv, agent, fallback]) await s?.close();
    await sink?.close();
    client?.disconnect();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const applied = (): Promise<unknown> => waitFor("keys applied", async () => sync.state.revision === (await store.revision()), { timeoutMs: 5000, everyMs: 20 });

  it("keeps the map current through a socket that cannot show the proxy's environment (the servers' key)", async () => {
    const { key, record } = await store.add("socket");
    await applied();
    expect((await call(port, { path: "/v1/models", key, from: "127.0.0.10" })).status).toBe(200);
    const mapSock = (cmd: string): Promise<string> => socketExchange({ path: hp.mapSocket }, `${cmd}\n`, 2000, "map socket");
    expect(await mapSock("show env LLMHA_TEST_UPSTREAM_KEY")).toMatch(/permission denied/i);
    expect(await mapSock("show env")).not.toContain("server-key-hard-123");
    // The admin socket stays, for whoever needs it.
    expect(await hp.command("show env LLMHA_TEST_UPSTREAM_KEY")).toContain("server-key-hard-123");
    // A revocation goes through the map socket too.
    await store.revoke(record.id);
    await applied();
    expect((await call(port, { path: "/v1/models", key, from: "127.0.0.10" })).status).toBe(401);
  });

  it("drops a rotated-out key from the map once its overlap is over; the new key stays", async () => {
    const { key: oldKey, record } = await store.add("rotation");
    await applied();
    const t0 = Date.now();
    const { key: newKey, old } = await store.rotate(record.id, 1500);
    await applied();
    expect(old.expiresAt).toBeGreaterThanOrEqual(t0 + 1500);
    expect((await call(port, { key: oldKey, from: "127.0.0.15" })).status).toBe(200);
    expect((await call(port, { key: newKey, from: "127.0.0.15" })).status).toBe(200);
    expect((await store.find(record.id))?.expiresAt).toBe(old.expiresAt);
    // No change in Redis when it expires: the sync drops it on its own, within a period.
    await waitFor("the old key refused", async () => (await call(port, { key: oldKey, from: "127.0.0.15" })).status === 401, { timeoutMs: 5000, everyMs: 50 });
    const refusedAfter = Date.now() - (old.expiresAt ?? 0);
    expect(refusedAfter).toBeLessThan(1000);
    expect((await call(port, { key: newKey, from: "127.0.0.15" })).status).toBe(200);
    // The record stays, marked, for `llm-ha keys list`.
    expect((await store.list()).find((k) => k.id === record.id)?.expiresAt).toBe(old.expiresAt);
  });

  it("refuses dot segments, encoded dots and slashes before routing; the result route matches its id exactly", async () => {
    const { key } = await store.add("paths");
    await applied();
    const before = { srv: srv.hits.length, fb: fallback.hits.length };
    const attacks = [
      "/v1/llmha/requests/../../../metrics",
      "/v1/llmha/requests/%2e%2e/%2e%2e/%2e%2e/readyz",
      "/v1/llmha/requests/..%2F..%2F..%2Flivez",
      "/v1/llmha/requests/%2E%2E%2f%2E%2E%2fmetrics",
      "/v1/llmha/requests/./x",
      "/v1/llmha/requests//metrics",
      "/v1/llmha/requests/..",
      "/v1/llmha/requests/",
      "/v1/llmha/requests/a/b",
      "/v1/llmha/requests/a.b",
      "/v1/models/../llmha/requests/x",
      "/v1//models",
    ];
    for (const path of attacks) {
      for (const k of [key, undefined]) {
        const r = await call(port, { path, key: k, from: "127.0.0.11" });
        expect([400, 404], `${path} ${k ? "with" : "without"} a key: ${r.status}`).toContain(r.status);
        expect(JSON.parse(r.body).error.code).toMatch(/^(invalid_path|not_found)$/);
      }
    }
    expect((await call(port, { path: "/v1/llmha/requests/../../../metrics", key, from: "127.0.0.11" })).status).toBe(400);
    expect(srv.hits.length).toBe(before.srv);
    expect(fallback.hits.length).toBe(before.fb);
    // A real id still reaches the fallback, with its query string.
    expect((await call(port, { path: "/v1/llmha/requests/req_0123456789abcdef0123456789abcdef?x=1", key, from: "127.0.0.11" })).status).toBe(200);
    expect(fallback.hits.length).toBe(before.fb + 1);
  });

  it("gives a chunked upload past the limit its 413 and never sends it on; a small chunked body passes whole", async () => {
    const { key } = await store.add("chunks", { rps: 1000, concurrency: 50 });
    await applied();
    const before = srv.hits.length;
    for (const size of [9 * 1024 * 1024, 20 * 1024 * 1024, 70 * 1024]) {
      const r = await call(port, { path: "/v1/completions", key, chunked: size, from: "127.0.0.12", timeoutMs: 20_000 });
      expect(r.status, `${size} bytes chunked`).toBe(413);
      expect(JSON.parse(r.body).error.code).toBe("request_too_large");
    }
    expect(srv.hits.length).toBe(before);
    const small = await call(port, { path: "/v1/completions", key, chunked: 10_000, from: "127.0.0.12" });
    expect(small.status).toBe(200);
    expect(srv.hits.at(-1)?.bytes).toBe(10_000);
  });

  it("keeps its Retry-After: refused requests do not extend the window, and the key is admitted when it says", async () => {
    const { key } = await store.add("retry", { rps: 3, concurrency: 50 });
    await applied();
    const burst = await Promise.all(Array.from({ length: 8 }, () => call(port, { path: "/v1/completions", method: "POST", key, from: "127.0.0.13" })));
    const refused = burst.filter((r) => r.status === 429);
    expect(burst.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThan(0);
    const after = Number(refused[0].headers["retry-after"]);
    expect(after).toBe(1);
    const firstRefusal = Date.now();
    // The client keeps knocking, refused, until it is admitted: no later than the time it was
    // given, since the refused knocks do not count.
    let knocks = 0;
    let admittedAt = 0;
    while (Date.now() - firstRefusal < after * 1000 + 100) {
      const r = await call(port, { path: "/v1/completions", method: "POST", key, from: "127.0.0.13" });
      knocks++;
      if (r.status === 200) {
        admittedAt = Date.now() - firstRefusal;
        break;
      }
      expect(r.status).toBe(429);
      await sleep(20);
    }
    expect(knocks).toBeGreaterThan(1);
    expect(admittedAt, `admitted ${admittedAt} ms after the first refusal (Retry-After: ${after})`).toBeGreaterThan(0);
    expect(admittedAt).toBeLessThanOrEqual(after * 1000 + 100);
  });

  it("serves a keyed client behind an address that floods without a key; the flood's Retry-After holds too", async () => {
    const { key } = await store.add("nat", { rps: 1000, concurrency: 50 });
    await applied();
    const from = "127.0.0.14";
    const flood = [];
    for (let i = 0; i < UNAUTH + 10; i++) flood.push(await call(port, { path: "/v1/completions", method: "POST", from }));
    const limited = flood.filter((r) => r.status === 429);
    expect(flood.filter((r) => r.status === 401).length).toBeGreaterThan(0);
    expect(limited.length).toBeGreaterThan(0);
    expect(JSON.parse(limited[0].body).error.code).toBe("unauthenticated_rate");
    // The keyed client on the same address is judged by its key alone.
    for (let i = 0; i < 5; i++) expect((await call(port, { path: "/v1/completions", method: "POST", key, from })).status).toBe(200);
    const last = await call(port, { path: "/v1/completions", method: "POST", from });
    expect(last.status).toBe(429);
    const after = Number(last.headers["retry-after"]);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(10);
    await sleep(after * 1000 + 50);
    expect((await call(port, { path: "/v1/completions", method: "POST", from })).status).toBe(401);
  }, 20_000);

  it("lets no single address take /az/health or the API frontend with idle connections", async () => {
    const { key } = await store.add("idle", { rps: 1000, concurrency: 50 });
    await applied();
    const t0 = Date.now();
    const [az, api] = await Promise.all([idle(azPort, "127.0.0.20", 300), idle(port, "127.0.0.20", 300)]);
    // HAProxy closes what is past the address's share as it accepts it.
    await waitFor("refused connections closed", () => az.closedAt.length >= 300 - AZ_HEALTH_CONNS_PER_SOURCE && api.closedAt.length >= 300 - FE_MAXCONN / 4, { timeoutMs: 3000, everyMs: 20 }).catch((e: Error) => {
      throw new Error(`${e.message}: ${az.closedAt.length} of 300 closed on /az/health, ${api.closedAt.length} on the API`);
    });
    const heldAz = 300 - az.closedAt.length;
    const heldApi = 300 - api.closedAt.length;
    // A checker from another address gets its answer at once, and so does a keyed client.
    const check = await call(azPort, { path: "/az/health", from: "127.0.0.21", timeoutMs: 1000 });
    const keyed = await call(port, { path: "/v1/completions", method: "POST", key, from: "127.0.0.22", timeoutMs: 1000 });
    expect(check.status).toBe(200);
    expect(check.ms).toBeLessThan(1000);
    expect(keyed.status).toBe(200);
    expect(keyed.ms).toBeLessThan(1000);
    // The held ones lose their slot when they send no request in time.
    await waitFor("idle connections dropped", () => az.closedAt.length === 300 && api.closedAt.length === 300, { timeoutMs: 10_000, everyMs: 50 }).catch((e: Error) => {
      throw new Error(`${e.message}: ${az.closedAt.length} of 300 closed on /az/health, ${api.closedAt.length} on the API`);
    });
    const azGone = Math.max(...az.closedAt) - t0;
    const apiGone = Math.max(...api.closedAt) - t0;
    console.log(
      `idle flood from one address: /az/health held ${heldAz} of 300 (dropped after ${azGone} ms), API held ${heldApi} of 300 (dropped after ${apiGone} ms); ` +
        `checker 200 in ${check.ms.toFixed(1)} ms, keyed client 200 in ${keyed.ms.toFixed(1)} ms`,
    );
    expect(heldAz).toBeLessThanOrEqual(AZ_HEALTH_CONNS_PER_SOURCE);
    expect(heldApi).toBeLessThanOrEqual(FE_MAXCONN / 4);
    for (const s of [...az.socks, ...api.socks]) s.destroy();
  }, 20_000);
});
