/**
 * The public edge on a real HAProxy, with keys from a real Redis copied by the real sync:
 * every refusal is HAProxy's own answer (0 requests reach a server), the tenant comes only
 * from the proxy, limits answer 429 with Retry-After, and key changes apply without a reload.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent, request } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { createLogger } from "../../agent/src/util/log";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { KeyStore } from "../../agent/src/edge/keys/keys";
import { EdgeSync } from "../../agent/src/edge/keys/sync";
import { startEdgeSink, type EdgeSink } from "../../agent/src/edge/keys/sink";
import { fakeServer, staticServer, type FakeServer } from "../l1/fixtures";
import { rawPaced } from "../../lab/drill/raw-flood";

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  ms: number;
}

function call(url: string, o: { method?: string; path?: string; headers?: Record<string, string | string[]>; body?: string; agent?: Agent } = {}): Promise<Reply> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request(`${url}${o.path ?? "/v1/completions"}`, { method: o.method ?? "POST", agent: o.agent ?? false, headers: { "content-type": "application/json", ...o.headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, ms: performance.now() - t0 }));
    });
    req.on("error", () => resolve({ status: 0, headers: {}, body: "", ms: performance.now() - t0 }));
    req.end(o.body ?? (o.method === "GET" ? undefined : '{"model":"m","prompt":"hi","max_tokens":1}'));
  });
}

const bearer = (k: string): Record<string, string> => ({ authorization: `Bearer ${k}` });

describe("the public edge (HAProxy + client keys)", () => {
  let redis: RedisServerHandle;
  let client: Redis;
  let hp: HaproxyHandle;
  let srv: FakeServer;
  let sync: EdgeSync;
  let store: KeyStore;
  let url: string;
  let dir: string;
  let sink: EdgeSink;
  const seen: { tenant: unknown; auth: unknown }[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    client = new Redis(redis.url);
    const keys = new RedisKeys(`edge-${process.pid}`);
    store = new KeyStore(client, keys);
    dir = mkdtempSync(join(tmpdir(), "llmha-edge-test-"));
    const mapPath = join(dir, "keys.map");
    writeFileSync(mapPath, "");
    srv = await fakeServer("s1", (req, res) => {
      seen.push({ tenant: req.headers["x-llmha-tenant"], auth: req.headers.authorization });
      const slow = req.headers["x-test-delay"] ? Number(req.headers["x-test-delay"]) : 0;
      setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end('{"choices":[{"text":"ok"}]}'), slow);
    });
    sink = await startEdgeSink({ host: "127.0.0.1", port: 0, maxBodyBytes: 64 * 1024 });
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    hp = await startHaproxy(
      {
        proxies: [
          {
            name: "l1",
            bind: `127.0.0.1:${port}`,
            health: "agent",
            forwardAzHealth: true,
            azHealthBind: `127.0.0.1:${await freePort()}`,
            servers: { kind: "static", local: [staticServer(srv, await freePort())], backup: [] },
            edge: { keysMap: mapPath, maxBodyBytes: 64 * 1024, upstreamKeyEnv: "LLMHA_TEST_UPSTREAM_KEY", sinkAddress: `127.0.0.1:${sink.port}` },
          },
        ],
      },
      { env: { LLMHA_TEST_UPSTREAM_KEY: "server-key-123" } },
    );
    sync = new EdgeSync({ redis: client, keys, sockets: [hp.statsSocket], mapPath, log: createLogger({ level: "silent" }), periodMs: 100 });
    sync.start();
    await waitFor("server UP", async () => (await hp.stats()).some((r) => r.server === "s1" && r.status.startsWith("UP")), { timeoutMs: 10_000, everyMs: 50 });
  });

  afterAll(async () => {
    sync?.stop();
    await hp?.stop();
    await srv?.close();
    await sink?.close();
    client?.disconnect();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const hitsNow = (): number => srv.hits.length;
  const applied = (): Promise<unknown> => waitFor("keys applied", async () => sync.state.revision === (await store.revision()), { timeoutMs: 5000, everyMs: 20 });

  it("refuses a missing, bad or malformed key with a 401 of its own, in milliseconds, and never reaches a server", async () => {
    const { key } = await store.add("alpha");
    await applied();
    const before = hitsNow();
    const bad = [
      {},
      bearer("sk-llmha-0000000000-wrongwrongwrongwrongwrongwrongwrongwrongwro"),
      { authorization: "Basic dXNlcjpwYXNz" },
      { authorization: "Bearer" },
      { authorization: `Bearer  ${key}` },
      { authorization: `bearer ${key}x` },
      { authorization: `Bearer ${key};<script>` },
      { authorization: [`Bearer ${key}`, `Bearer ${key}`] },
      { authorization: `Bearer ${"a".repeat(100_000)}` },
    ];
    for (const h of bad) {
      const r = await call(url, { headers: h });
      expect(r.status, JSON.stringify(h).slice(0, 80)).toBe(401);
      expect(JSON.parse(r.body).error.code).toBe("invalid_api_key");
      expect(r.headers["www-authenticate"]).toBe("Bearer");
      expect(r.ms).toBeLessThan(500);
    }
    expect(hitsNow()).toBe(before);
    // The proxy kept serving.
    expect((await call(url, { headers: bearer(key) })).status).toBe(200);
  });

  it("answers the drill's pipelined flood (lab/drill/raw-flood.ts) request by request: 401 without a key, 200 with one", async () => {
    const { key } = await store.add("foxtrot", { rps: 100_000, concurrency: 1000 });
    await applied();
    const before = hitsNow();
    const t0 = performance.now();
    const anon = rawPaced([url], {}, 400, () => performance.now() - t0);
    const good = rawPaced([url], bearer(key), 100, () => performance.now() - t0);
    await sleep(1000);
    await Promise.all([anon.stop(), good.stop()]);
    // Every request sent got its own answer, in order: the counts match what was asked for a second.
    expect(anon.records.length).toBeGreaterThanOrEqual(300);
    expect(anon.records.filter((r) => r.status !== 401)).toEqual([]);
    expect(good.records.length).toBeGreaterThanOrEqual(70);
    expect(good.records.filter((r) => r.status !== 200)).toEqual([]);
    expect(hitsNow() - before).toBe(good.records.length);
  });

  it("sets the tenant header itself, drops the client's, and sends the servers their own key instead of the client's", async () => {
    const { key } = await store.add("bravo");
    await applied();
    seen.length = 0;
    const r = await call(url, { headers: { ...bearer(key), "x-llmha-tenant": "someone-else" } });
    expect(r.status).toBe(200);
    expect(seen).toEqual([{ tenant: "bravo", auth: "Bearer server-key-123" }]);
  });

  it("answers unknown routes 404, wrong methods 405 and oversized bodies 413 itself", async () => {
    const { key } = await store.add("charlie");
    await applied();
    const before = hitsNow();
    expect((await call(url, { path: "/admin", headers: bearer(key) })).status).toBe(404);
    expect((await call(url, { path: "/v1/embeddings", headers: bearer(key) })).status).toBe(404);
    expect((await call(url, { path: "/az/health", method: "GET" })).status).toBe(404);
    expect((await call(url, { path: "/metrics", method: "GET", headers: bearer(key) })).status).toBe(404);
    expect((await call(url, { path: "/v1/completions", method: "GET", headers: bearer(key) })).status).toBe(405);
    expect((await call(url, { path: "/v1/models", method: "DELETE", headers: bearer(key) })).status).toBe(405);
    const big = await call(url, { headers: bearer(key), body: "x".repeat(100 * 1024) });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body).error.code).toBe("request_too_large");
    expect(hitsNow()).toBe(before);
    expect((await call(url, { path: "/v1/models", method: "GET", headers: bearer(key) })).status).toBe(200);
  });

  it("gives a 10 MB upload its 413 complete, to a plain node:http client that streams the body", async () => {
    const { key } = await store.add("hotel");
    await applied();
    const before = hitsNow();
    for (let i = 0; i < 3; i++) {
      const r = await new Promise<{ status: number; body: string; err: string | null }>((resolve) => {
        const body = Buffer.alloc(10 * 1024 * 1024, 0x61);
        const req = request(`${url}/v1/completions`, { method: "POST", agent: false, headers: { ...bearer(key), "content-type": "application/json", "content-length": body.length } }, (res) => {
          let b = "";
          res.setEncoding("utf8").on("data", (d: string) => (b += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: b, err: null }));
        });
        req.on("error", (e) => resolve({ status: 0, body: "", err: (e as NodeJS.ErrnoException).code ?? e.message }));
        req.end(body);
      });
      expect(r.err).toBeNull();
      expect(r.status).toBe(413);
      expect(JSON.parse(r.body).error.code).toBe("request_too_large");
    }
    expect(hitsNow()).toBe(before);
    expect(sink.answered).toBeGreaterThanOrEqual(3);
  });

  it("limits requests per second per key: 429 with Retry-After past it", async () => {
    const { key } = await store.add("delta", { rps: 5, concurrency: 50 });
    await applied();
    const replies = await Promise.all(Array.from({ length: 12 }, () => call(url, { headers: bearer(key) })));
    const limited = replies.filter((r) => r.status === 429);
    // 5 a second: a burst of 12 gets 5 through (a little more if it straddles a tick on a busy machine).
    expect(replies.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(5);
    expect(limited.length).toBeGreaterThanOrEqual(5);
    expect(limited[0].headers["retry-after"]).toBe("1");
    expect(JSON.parse(limited[0].body).error.type).toBe("rate_limit_error");
  });

  it("limits requests in flight per key", async () => {
    const { key } = await store.add("echo", { rps: 1000, concurrency: 2 });
    await applied();
    const replies = await Promise.all(Array.from({ length: 5 }, () => call(url, { headers: { ...bearer(key), "x-test-delay": "400" } })));
    expect(replies.filter((r) => r.status === 200).length).toBe(2);
    expect(replies.filter((r) => r.status === 429).length).toBe(3);
    // Once they are done, the key may send again.
    expect((await call(url, { headers: bearer(key) })).status).toBe(200);
  });

  it("applies a new key and a revocation without a reload, on a connection that stays open", async () => {
    const pid = hp.pid;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const { key, record } = await store.add("foxtrot");
    await applied();
    expect((await call(url, { headers: bearer(key), agent })).status).toBe(200);
    const t0 = Date.now();
    await store.revoke(record.id);
    let status = 200;
    while (status === 200 && Date.now() - t0 < 5000) {
      status = (await call(url, { headers: bearer(key), agent })).status;
      if (status === 200) await sleep(20);
    }
    expect(status).toBe(401);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(hp.pid).toBe(pid);
    agent.destroy();
  });

  it("rotates a key under traffic with 0 failed requests", async () => {
    const { record } = await store.add("golf", { rps: 1000, concurrency: 50 });
    let current = (await store.rotate(record.id)).key; // the key in use: a rotated one, to start from a known key
    await applied();
    let failed = 0;
    let sent = 0;
    let on = true;
    const worker = (async () => {
      while (on) {
        const r = await call(url, { headers: bearer(current) });
        sent++;
        if (r.status !== 200) failed++;
      }
    })();
    // Each phase lasts until the worker has sent 8 more requests (a time would be too few on a loaded machine).
    const more = async (n: number): Promise<void> => {
      const target = sent + n;
      await waitFor(`${target} requests sent`, () => sent >= target, { timeoutMs: 20_000, everyMs: 20 });
    };
    await more(8);
    const oldId = (await store.list()).filter((k) => k.tenant === "golf").at(-1)!.id;
    const next = await store.rotate(oldId);
    await applied();
    current = next.key;
    await more(8);
    await store.revoke(oldId);
    await applied();
    await more(8);
    on = false;
    await worker;
    expect(sent).toBeGreaterThanOrEqual(24);
    expect(failed).toBe(0);
  });

  it("keeps the last map when the key store is gone from Redis (a restart without persistence), and applies keys stored again", async () => {
    const { key } = await store.add("hotel");
    await applied();
    // Redis lost its data: no revision, no keys.
    const k = new RedisKeys(`edge-${process.pid}`);
    await client.del(k.edgeKeysRev, k.edgeKeys);
    await waitFor("the sync to notice", async () => (sync.state.lastError ?? "").includes("gone from Redis"), { timeoutMs: 5000, everyMs: 20 });
    await sleep(300);
    expect((await call(url, { headers: bearer(key) })).status).toBe(200);
    // The operator stores keys again: that set applies, the old one goes.
    const { key: fresh } = await store.add("hotel");
    await applied();
    expect((await call(url, { headers: bearer(fresh) })).status).toBe(200);
    expect((await call(url, { headers: bearer(key) })).status).toBe(401);
  });
});
