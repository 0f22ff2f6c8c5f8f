/**
 * The fallback's metrics listener (`LLMHA_FALLBACK_METRICS_ADDR`) against a real redis-server
 * and a real Kafka-protocol broker (kcat's mock cluster): read-only (GET /metrics and /healthz,
 * nothing else), outcomes by kind, queue depth and its cap, and the replay group's consumer lag
 * rising while requests are queued at L4 and falling to 0 once the replay has drained them.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request as httpRequest } from "node:http";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { sleep, waitFor } from "../../agent/src/util/net";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

const CLUSTER = `m${randomBytes(3).toString("hex")}`;
let redis: RedisServerHandle;
let kafka: KafkaMockHandle;
let r: Redis;
let l1: FakeHttp;
let fb: RunningFallback;
let api: string;
let metricsUrl: string;
let l1Serves = false;

const setTier = (level: string): Promise<number> => r.hset(`llmha:${CLUSTER}:tier`, { level, reason: "test" });

async function scrape(): Promise<string> {
  const res = await fetch(`${metricsUrl}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The value of one sample (`name` or `name{labels}`), NaN when absent. */
function value(text: string, series: string): number {
  const esc = series.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const m = new RegExp(`^${esc} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}

async function queueOne(i: number): Promise<Response> {
  return fetch(`${api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-llmha-queue": "allow" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `queued ${i}` }] }),
  });
}

beforeAll(async () => {
  [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
  r = new Redis(redis.url);
  l1 = await fakeHttp((_req, body, res) => {
    if (!l1Serves) return json(res, 503, { error: { message: "no server" } });
    json(res, 200, chatResponse(`fleet answer to ${JSON.stringify(body.messages)}`, String(body.model)));
  });
  await setTier("L4");
  const cfg = loadFallbackConfig([
    "--host", "127.0.0.1", "--port", "0", "--metrics-addr", "127.0.0.1:0", "--cluster", CLUSTER, "--redis-url", redis.url,
    "--kafka-brokers", kafka.bootstrap, "--models", "m", "--l1-url", l1.url, "--replay-rps", "50", "--max-queue-depth", "50",
  ], {});
  fb = await runFallback(cfg, { log: captureLogger().log });
  api = `http://127.0.0.1:${fb.port}`;
  metricsUrl = `http://127.0.0.1:${fb.metricsPort}`;
}, 30_000);

afterAll(async () => {
  await fb?.close();
  r?.disconnect();
  await l1?.close();
  await Promise.all([redis?.stop(), kafka?.stop()]);
});

describe("metrics listener", () => {
  it("is its own port, serves GET/HEAD /metrics and /healthz only, reads no body and serves none of the API", async () => {
    expect(fb.metricsPort).toEqual(expect.any(Number));
    expect(fb.metricsPort).not.toBe(fb.port);
    expect((await fetch(`${metricsUrl}/healthz`)).status).toBe(200);
    const head = await fetch(`${metricsUrl}/metrics`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toMatch(/^text\/plain/);
    const post = await fetch(`${metricsUrl}/metrics`, { method: "POST", body: "x".repeat(10_000) });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    for (const path of ["/v1/models", "/v1/chat/completions", "/v1/llmha/requests/req_1", "/readyz", "/"]) {
      const res = await fetch(`${metricsUrl}${path}`);
      expect(res.status, path).toBe(404);
    }
    const chat = await fetch(`${metricsUrl}/v1/chat/completions`, { method: "POST", headers: { "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
    expect(chat.status).toBe(404);
    // The API listener is where the requests go (and it still answers /metrics for whoever is inside the pod).
    expect((await fetch(`${api}/v1/models`)).status).toBe(200);
    // ...but not to a result-route path that URL parsing would resolve onto them (fetch would
    // resolve it itself: sent raw).
    const raw = (path: string): Promise<number> =>
      new Promise((resolve) => {
        const u = new URL(api);
        const req = httpRequest({ host: u.hostname, port: u.port, path, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", () => resolve(0));
        req.end();
      });
    for (const path of ["/v1/llmha/requests/../../../metrics", "/v1/llmha/requests/%2e%2e/%2e%2e/%2e%2e/readyz", "/v1/llmha/requests/..%2F..%2F..%2Flivez"]) expect(await raw(path), path).toBe(400);
    const text = await scrape();
    for (const o of ["cache_hit", "upstream", "queued", "unavailable", "rejected"]) expect(value(text, `llmha_fallback_requests_total{outcome="${o}"}`), o).toBeGreaterThanOrEqual(0);
    expect(value(text, "llmha_fallback_queue_depth_cap")).toBe(50);
  });

  it("counts outcomes by kind: a 503 without opt-in, a 4xx for an unknown model", async () => {
    const before = await scrape();
    const plain = await fetch(`${api}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "plain" }] }) });
    expect(plain.status).toBe(503);
    const unknown = await fetch(`${api}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "nope", messages: [{ role: "user", content: "x" }] }) });
    expect(unknown.status).toBe(404);
    const after = await scrape();
    for (const o of ["unavailable", "rejected"]) {
      expect(value(after, `llmha_fallback_requests_total{outcome="${o}"}`) - value(before, `llmha_fallback_requests_total{outcome="${o}"}`), o).toBe(1);
    }
  });

  it("consumer lag rises while requests are queued at L4, holds while the tier stays L4, and falls to 0 after the replay", async () => {
    // The first sample of a fresh topic: 0 (or -1 until the topic exists).
    await waitFor("lag sampled", async () => value(await scrape(), "llmha_fallback_consumer_lag") === 0, { timeoutMs: 15_000, everyMs: 250 });
    expect(value(await scrape(), "llmha_fallback_tier_l4")).toBe(1);
    const N = 6;
    for (let i = 0; i < N; i++) expect((await queueOne(i)).status).toBe(202);
    // The depth counts what this fallback produced at once; the lag comes from Kafka's offsets.
    expect(value(await scrape(), "llmha_fallback_queue_depth")).toBeGreaterThanOrEqual(N);
    await waitFor(`lag ${N}`, async () => value(await scrape(), "llmha_fallback_consumer_lag") === N, { timeoutMs: 15_000, everyMs: 250 });
    let text = await scrape();
    expect(value(text, "llmha_fallback_consumer_lag_partitions")).toBeGreaterThanOrEqual(1);
    expect(value(text, "llmha_fallback_consumer_lag_sampled_timestamp_seconds")).toBeGreaterThan(Date.now() / 1000 - 10);
    expect(value(text, 'llmha_fallback_requests_total{outcome="queued"}')).toBe(N);
    // Still L4: the replay waits, nothing is committed, the lag holds (a sample every 2 s).
    await sleep(4500);
    text = await scrape();
    expect(value(text, "llmha_fallback_consumer_lag")).toBe(N);
    expect(value(text, "llmha_fallback_replay_seconds_count")).toBe(0);

    // Recovery: the tier goes below L4 and the fleet answers; the replay drains the queue.
    l1Serves = true;
    await setTier("L1");
    const t0 = performance.now();
    await waitFor("lag 0 after the replay", async () => value(await scrape(), "llmha_fallback_consumer_lag") === 0, { timeoutMs: 30_000, everyMs: 250 });
    console.log(`lag ${N} → 0 in ${((performance.now() - t0) / 1000).toFixed(1)} s after the tier left L4`);
    text = await scrape();
    expect(value(text, 'llmha_fallback_replayed_total{result="done"}')).toBe(N);
    expect(value(text, "llmha_fallback_replay_seconds_count")).toBe(N);
    expect(value(text, 'llmha_fallback_replay_attempt_seconds_count{result="ok"}')).toBe(N);
    expect(value(text, "llmha_fallback_queue_depth")).toBe(0);
    expect(value(text, "llmha_fallback_tier_l4")).toBe(0);
  }, 60_000);

  it("the lag reads -1 (unknown, below any alert threshold) while Kafka does not answer, and counts the failed samples", async () => {
    const errors0 = value(await scrape(), "llmha_fallback_consumer_lag_errors_total");
    await kafka.pause();
    try {
      await waitFor("lag unknown", async () => value(await scrape(), "llmha_fallback_consumer_lag") === -1, { timeoutMs: 20_000, everyMs: 250 });
      expect(value(await scrape(), "llmha_fallback_consumer_lag_errors_total")).toBeGreaterThan(errors0);
    } finally {
      kafka.resume();
    }
    await waitFor("lag read again", async () => value(await scrape(), "llmha_fallback_consumer_lag") === 0, { timeoutMs: 30_000, everyMs: 250 });
  }, 60_000);
});

describe("llm-ha fallback with an address already in use", () => {
  const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");

  /** The CLI as the pod runs it, with `args`; resolves with its exit code and everything it printed. */
  function run(args: string[]): Promise<{ code: number | null; out: string }> {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_")));
    const child = spawn(process.execPath, ["--import", "tsx", CLI, "fallback", "--models", "m", "--host", "127.0.0.1", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const kill = setTimeout(() => child.kill("SIGKILL"), 30_000);
    return new Promise((resolve) => child.once("close", (code) => (clearTimeout(kill), resolve({ code, out }))));
  }

  it("exits 1 with one line naming the setting, the API's port or the metrics', and no stack trace", async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", () => r()));
    const port = (taken.address() as AddressInfo).port;
    try {
      const api = await run(["--metrics-addr", "off", "--port", String(port)]);
      expect(api.code).toBe(1);
      expect(api.out).toContain(`llm-ha fallback: LLMHA_FALLBACK_PORT: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`);
      expect(api.out).not.toMatch(/\n\s+at /);
      const metrics = await run(["--metrics-addr", `127.0.0.1:${port}`, "--port", "0"]);
      expect(metrics.code).toBe(1);
      expect(metrics.out).toContain(`llm-ha fallback: LLMHA_FALLBACK_METRICS_ADDR: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`);
      expect(metrics.out).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise<void>((r) => taken.close(() => r()));
    }
  }, 90_000);
});
