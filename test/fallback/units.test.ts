/** The pieces of `llm-ha fallback`: request normalization, the Redis LRU cache's bounds and TTL, the circuit breaker, providers and settings. */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../agent/src/cli";
import { VerifiedCache } from "../../agent/src/edge/fallback/cache";
import { FallbackConfigError, loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { BadRequestError, normalizeRequest, requestKey } from "../../agent/src/edge/fallback/normalize";
import { CircuitBreaker, loadProviders, ProviderConfigError } from "../../agent/src/edge/fallback/providers";
import { kafkaClientConfig, mskIamToken, QueueUnavailableError } from "../../agent/src/edge/fallback/queue";
import { captureLogger } from "./helpers";
import { groupRejoinError, RateLimiter } from "../../agent/src/edge/fallback/replay";
import { KafkaJSNonRetriableError, KafkaJSProtocolError } from "kafkajs";
import { TierReader } from "../../agent/src/edge/fallback/tier";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";

let redis: RedisServerHandle;
let r: Redis;
beforeAll(async () => {
  redis = await startRedisServer();
  r = new Redis(redis.url);
});
afterAll(async () => {
  r?.disconnect();
  await redis?.stop();
});

const chat = (content: string, extra: Record<string, unknown> = {}) => normalizeRequest("chat", { model: "m", messages: [{ role: "user", content }], ...extra });

describe("replay consumer group errors", () => {
  it("finds the rebalance inside kafkajs's retrier wrapping, so eachMessage rethrows it bare and the runner rejoins instead of crashing", () => {
    const bare = new KafkaJSProtocolError({ type: "REBALANCE_IN_PROGRESS", code: 27, retriable: false, message: "The group is rebalancing, so a rejoin is needed" } as unknown as Error);
    // What runner.commitOffsets's retrier throws for it (retry/index.js): `type` no longer on the outside.
    const wrapped = new (KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error)(bare, { cause: bare });
    expect((wrapped as unknown as { type?: string }).type).toBeUndefined();
    expect(groupRejoinError(wrapped)).toBe(bare);
    expect(groupRejoinError(bare)).toBe(bare);
    const other = new KafkaJSNonRetriableError(new Error("broker gone") as never);
    expect(groupRejoinError(other)).toBeNull();
    expect(groupRejoinError(undefined)).toBeNull();
  });
});

describe("normalize", () => {
  it("ignores whitespace, key order and parameters that do not change the output", () => {
    const a = requestKey(normalizeRequest("chat", { model: "m", temperature: 0, messages: [{ role: "user", content: "Hello   world\n" }], stream: true, user: "u1" }));
    const b = requestKey(normalizeRequest("chat", { messages: [{ content: " Hello world", role: "user" }], temperature: 0, model: "m", stream_options: { include_usage: true } }));
    const parts = requestKey(normalizeRequest("chat", { model: "m", temperature: 0, messages: [{ role: "user", content: [{ type: "text", text: "Hello" }, { type: "text", text: "world" }] }] }));
    expect(a).toBe(b);
    expect(parts).toBe(a);
    expect(requestKey(chat("Hello world", { max_completion_tokens: 5 }))).toBe(requestKey(chat("Hello world", { max_tokens: 5 })));
    expect(requestKey(chat("Hello world", { n: 1 }))).toBe(requestKey(chat("Hello world")));
  });

  it("keeps what changes the output apart: model, text, sampling, role, kind", () => {
    const keys = [
      chat("Hello world"), chat("hello world"), chat("Hello world", { temperature: 0.5 }), chat("Hello world", { seed: 1 }),
      normalizeRequest("chat", { model: "m2", messages: [{ role: "user", content: "Hello world" }] }),
      normalizeRequest("chat", { model: "m", messages: [{ role: "system", content: "Hello world" }] }),
      normalizeRequest("completions", { model: "m", prompt: "Hello world" }),
    ].map((n) => requestKey(n));
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("refuses what is not a request", () => {
    expect(() => normalizeRequest("chat", [])).toThrow(BadRequestError);
    expect(() => normalizeRequest("chat", { model: "m" })).toThrow(/messages/);
    expect(() => normalizeRequest("chat", { model: "m", messages: [{ content: "x" }] })).toThrow(/role/);
    expect(() => normalizeRequest("completions", { model: "m", prompt: 3 })).toThrow(/prompt/);
    expect(() => normalizeRequest("chat", { messages: [{ role: "user", content: "x" }] })).toThrow(/model/);
  });
});

describe("verified-answer cache in Redis", () => {
  it("evicts the least recently used past max entries; a hit refreshes an entry", async () => {
    const c = new VerifiedCache(r, "lru", { maxEntries: 3, maxBytes: 1_000_000, defaultTtlS: 60 });
    for (const p of ["a", "b", "c"]) await c.put(chat(p), `answer ${p}`, { source: "import" });
    expect((await c.get(chat("a")))?.answer).toBe("answer a"); // a is now the most recent
    const { evicted } = await c.put(chat("d"), "answer d", { source: "import" });
    expect(evicted).toBe(1);
    expect(await c.get(chat("b"))).toBeNull();
    expect((await c.get(chat("a")))?.answer).toBe("answer a");
    expect((await c.stats()).entries).toBe(3);
  });

  it("bounds the bytes held", async () => {
    const c = new VerifiedCache(r, "bytes", { maxEntries: 1000, maxBytes: 4000, defaultTtlS: 60 });
    for (let i = 0; i < 10; i++) await c.put(chat(`q${i}`), "x".repeat(900), { source: "import" });
    const s = await c.stats();
    expect(s.bytes).toBeLessThanOrEqual(4000);
    expect(s.entries).toBeLessThan(10);
    expect((await c.get(chat("q9")))?.answer).toHaveLength(900);
    expect(await c.get(chat("q0"))).toBeNull();
    // Re-writing an entry does not double count it.
    await c.put(chat("q9"), "y".repeat(900), { source: "import" });
    expect((await c.stats()).bytes).toBe(s.bytes);
  });

  it("expires an entry at its TTL and drops its bookkeeping", async () => {
    const c = new VerifiedCache(r, "ttl", { maxEntries: 10, maxBytes: 1_000_000, defaultTtlS: 60 });
    await c.put(chat("short"), "soon gone", { source: "import", ttlS: 0.3 });
    await c.put(chat("long"), "stays", { source: "import" });
    expect((await c.get(chat("short")))?.answer).toBe("soon gone");
    await new Promise((res) => setTimeout(res, 450));
    expect(await c.get(chat("short"))).toBeNull();
    expect(await c.stats()).toMatchObject({ entries: 1 });
    expect((await c.list()).map((e) => e.answer)).toEqual(["stays"]);
  });

  it("rm takes a full key or a unique prefix; an ambiguous or short prefix removes nothing", async () => {
    const c = new VerifiedCache(r, "rm", { maxEntries: 10, maxBytes: 1_000_000, defaultTtlS: 60 });
    const { key } = await c.put(chat("x"), "x", { source: "import" });
    expect(await c.rm([key.slice(0, 4)])).toEqual([]);
    expect(await c.rm([key.slice(0, 10)])).toEqual([key]);
    expect(await c.get(chat("x"))).toBeNull();
    expect(await c.stats()).toEqual({ entries: 0, bytes: 0 });
  });
});

describe("circuit breaker", () => {
  it("opens after N consecutive failures, lets one trial through after openMs, closes on success", () => {
    let now = 0;
    const b = new CircuitBreaker(2, 1000, () => now);
    b.failure();
    expect(b.tryAcquire()).toBe(true);
    b.failure();
    expect(b.state).toBe("open");
    expect(b.tryAcquire()).toBe(false);
    now = 1000;
    expect(b.tryAcquire()).toBe(true); // the trial
    expect(b.tryAcquire()).toBe(false); // only one at a time
    b.failure();
    expect(b.state).toBe("open");
    now = 2000;
    expect(b.tryAcquire()).toBe(true);
    b.success();
    expect(b.state).toBe("closed");
  });
});

describe("providers and settings", () => {
  it("sorts by priority, needs the key it names, and never shows it", () => {
    const ps = loadProviders(JSON.stringify([
      { name: "b", url: "https://b.example/v1", priority: 2, models: { m: "mb" }, keyEnv: "K" },
      { name: "a", url: "https://a.example/v1/", priority: 1, models: { "*": "*" } },
    ]), { K: "sk-secret" });
    expect(ps.map((p) => p.name)).toEqual(["a", "b"]);
    expect(ps[0].upstreamModel("anything")).toBe("anything");
    expect(ps[1].upstreamModel("other")).toBeNull();
    expect(JSON.stringify(ps)).not.toContain("sk-secret");
    expect(ps[1].headers().authorization).toBe("Bearer sk-secret");
    expect(() => loadProviders(JSON.stringify([{ name: "b", url: "https://b/v1", models: { m: "m" }, keyEnv: "MISSING" }]), {})).toThrow(/MISSING/);
    expect(() => loadProviders(JSON.stringify([{ name: "b", url: "https://user:sk@b/v1", models: { m: "m" } }]), {})).toThrow(ProviderConfigError);
    expect(() => loadProviders(JSON.stringify([{ name: "b", url: "https://b/v1", models: {} }]), {})).toThrow(/models/);
    expect(() => loadProviders("{", {})).toThrow(/not JSON/);
  });

  it("reads flags over the environment and names the variable of a bad value", () => {
    const cfg = loadFallbackConfig(["--port=9999", "--kafka-brokers", "a:9092,b:9092"], { LLMHA_CLUSTER: "prod", LLMHA_FALLBACK_MODELS: "m1, m2" });
    expect(cfg).toMatchObject({ port: 9999, cluster: "prod", models: ["m1", "m2"], kafkaBrokers: ["a:9092", "b:9092"], upstreamWhen: "l4", kafkaAuth: "none" });
    expect(() => loadFallbackConfig([], { LLMHA_FALLBACK_PORT: "x" })).toThrow(/LLMHA_FALLBACK_PORT/);
    expect(() => loadFallbackConfig([], { LLMHA_KAFKA_AUTH: "msk-iam" })).toThrow(/LLMHA_KAFKA_REGION/);
    expect(() => loadFallbackConfig(["--nope", "1"], {})).toThrow(FallbackConfigError);
    expect(() => loadFallbackConfig([], { LLMHA_KAFKA_BROKERS: "no-port" })).toThrow(/host:port/);
  });

  it("LLMHA_FALLBACK_METRICS_ADDR: default 0.0.0.0:9411, host:port or [v6]:port, off; bad values and a clash with the API port are named", () => {
    expect(loadFallbackConfig([], {}).metricsAddr).toEqual({ host: "0.0.0.0", port: 9411 });
    // The API (no authentication of its own) listens on loopback unless told otherwise; metrics stay on every address for Prometheus.
    expect(loadFallbackConfig([], {}).host).toBe("127.0.0.1");
    expect(loadFallbackConfig(["--metrics-addr", "127.0.0.1:0"], {}).metricsAddr).toEqual({ host: "127.0.0.1", port: 0 });
    expect(loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "[::]:9411" }).metricsAddr).toEqual({ host: "::", port: 9411 });
    expect(loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "off" }).metricsAddr).toBeNull();
    expect(loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "" }).metricsAddr).toBeNull();
    expect(() => loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "9411" })).toThrow(/^LLMHA_FALLBACK_METRICS_ADDR="9411" must be host:port/);
    expect(() => loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "0.0.0.0:70000" })).toThrow(/LLMHA_FALLBACK_METRICS_ADDR="0.0.0.0:70000" has a port over 65535/);
    expect(() => loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "http://x:1" })).toThrow(FallbackConfigError);
    // The API's own port: refused on the same host or a wildcard, allowed on another address.
    expect(() => loadFallbackConfig([], { LLMHA_FALLBACK_METRICS_ADDR: "0.0.0.0:9410" })).toThrow(/LLMHA_FALLBACK_METRICS_ADDR.*takes the API's port \(LLMHA_FALLBACK_PORT=9410\)/);
    expect(() => loadFallbackConfig(["--host", "127.0.0.1", "--port", "8000", "--metrics-addr", "127.0.0.1:8000"], {})).toThrow(/takes the API's port/);
    expect(loadFallbackConfig(["--host", "127.0.0.1", "--port", "8000", "--metrics-addr", "10.0.0.5:8000"], {}).metricsAddr).toEqual({ host: "10.0.0.5", port: 8000 });
  });

  it("MSK IAM: the kafkajs client config has SASL OAUTHBEARER, TLS on whatever LLMHA_KAFKA_TLS says, and nothing secret in it or the log", async () => {
    const SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY";
    const cap = captureLogger();
    const creds = async () => ({ accessKeyId: "AKIDEXAMPLE", secretAccessKey: SECRET, sessionToken: "SESSION-TOKEN-SECRET" });
    const cfg = kafkaClientConfig({ brokers: ["b-1.msk:9098"], auth: "msk-iam", ssl: false, region: "eu-west-1", clientId: "llmha-fallback-prod", credentials: creds }, cap.log);
    expect(cfg.ssl).toBe(true);
    expect(cfg.brokers).toEqual(["b-1.msk:9098"]);
    const sasl = cfg.sasl as { mechanism: string; oauthBearerProvider: () => Promise<{ value: string }> };
    expect(sasl.mechanism).toBe("oauthbearer");
    const token = (await sasl.oauthBearerProvider()).value;
    const url = new URL(Buffer.from(token, "base64url").toString("utf8"));
    expect(url.searchParams.get("Action")).toBe("kafka-cluster:Connect");
    expect(url.searchParams.get("X-Amz-Credential")).toMatch(/^AKIDEXAMPLE\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/);
    expect(url.searchParams.get("X-Amz-Security-Token")).toBe("SESSION-TOKEN-SECRET");
    expect(Buffer.from(token, "base64url").toString("utf8")).not.toContain(SECRET);
    // The config as any log or dump would show it holds no key and no token (the provider is a function).
    expect(JSON.stringify(cfg)).not.toContain(SECRET);
    expect(JSON.stringify(cfg)).not.toContain("SESSION-TOKEN-SECRET");
    // kafkajs' own log lines go through the fallback's logger: nothing of the credentials there either.
    const logLine = (cfg.logCreator as unknown as (l: number) => (e: { namespace: string; level: number; label: string; log: Record<string, unknown> }) => void)(0);
    logLine({ namespace: "Connection", level: 1, label: "ERROR", log: { message: "SASL OAUTHBEARER authentication failed", broker: "b-1.msk:9098", timestamp: "t", logger: "kafkajs" } });
    expect(cap.lines.join("")).toContain("SASL OAUTHBEARER authentication failed");
    expect(cap.lines.join("")).not.toContain(SECRET);
    expect(cap.lines.join("")).not.toContain(token);
    // Plain mode: no SASL, TLS only when asked.
    const plain = kafkaClientConfig({ brokers: ["127.0.0.1:9092"], auth: "none", ssl: false, clientId: "c" }, cap.log);
    expect(plain.sasl).toBeUndefined();
    expect(plain.ssl).toBe(false);
    expect(kafkaClientConfig({ brokers: ["x:9094"], auth: "none", ssl: true, clientId: "c" }, cap.log).ssl).toBe(true);
    expect(() => kafkaClientConfig({ brokers: ["x:9098"], auth: "msk-iam", ssl: true, clientId: "c" }, cap.log)).toThrow(QueueUnavailableError);
  });

  it("MSK IAM: the token is a base64url SigV4-presigned kafka-cluster:Connect URL", async () => {
    const t = await mskIamToken("eu-west-1", async () => ({ accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" }), new Date("2026-11-30T00:00:00Z"));
    const url = new URL(Buffer.from(t.value, "base64url").toString("utf8"));
    expect(url.host).toBe("kafka.eu-west-1.amazonaws.com");
    expect(url.searchParams.get("Action")).toBe("kafka-cluster:Connect");
    expect(url.searchParams.get("X-Amz-Algorithm")).toBe("AWS4-HMAC-SHA256");
    expect(url.searchParams.get("X-Amz-Credential")).toBe("AKIDEXAMPLE/20261130/eu-west-1/kafka-cluster/aws4_request");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("900");
    expect(url.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
    expect(t.value).not.toMatch(/[+/=]/);
  });
});

describe("llm-ha fallback / cache on the command line", () => {
  it("--help exits 0; a bad setting exits 2 naming the variable; cache needs a Redis URL", async () => {
    const out: string[] = [];
    const err: string[] = [];
    const ow = process.stdout.write.bind(process.stdout);
    const ew = process.stderr.write.bind(process.stderr);
    process.stdout.write = ((c: string) => (out.push(String(c)), true)) as typeof process.stdout.write;
    process.stderr.write = ((c: string) => (err.push(String(c)), true)) as typeof process.stderr.write;
    const saved = { port: process.env.LLMHA_FALLBACK_PORT, redis: process.env.LLMHA_REDIS_URL };
    try {
      expect(await main(["fallback", "--help"])).toBe(0);
      expect(out.join("")).toContain("LLMHA_KAFKA_BROKERS");
      process.env.LLMHA_FALLBACK_PORT = "eighty";
      expect(await main(["fallback"])).toBe(2);
      expect(err.join("")).toContain("LLMHA_FALLBACK_PORT");
      delete process.env.LLMHA_REDIS_URL;
      expect(await main(["cache", "list"])).toBe(2);
      expect(err.join("")).toContain("LLMHA_REDIS_URL");
      expect(await main(["help"])).toBe(0);
      expect(out.join("")).toContain("llm-ha fallback");
    } finally {
      process.stdout.write = ow;
      process.stderr.write = ew;
      if (saved.port === undefined) delete process.env.LLMHA_FALLBACK_PORT;
      else process.env.LLMHA_FALLBACK_PORT = saved.port;
      if (saved.redis !== undefined) process.env.LLMHA_REDIS_URL = saved.redis;
    }
  });
});

describe("tier and Retry-After", () => {
  it("reads the published tier; Retry-After counts down the standby's wake-up ETA, else the default", async () => {
    let now = 1_000_000;
    const t = new TierReader(r, "tier", { cacheMs: 0, retryAfterS: 30, wakeEtaS: 120, now: () => now });
    expect(await t.read()).toEqual({ level: null, readable: true, standbyWaking: false });
    expect(t.retryAfterS()).toBe(30);
    await r.hset("llmha:tier:tier", { level: "L4" });
    await r.hset("llmha:tier:standby:wake", { wake: "1" });
    expect(await t.read()).toMatchObject({ level: "L4", standbyWaking: true });
    expect(t.retryAfterS()).toBe(120);
    now += 100_000;
    await t.read();
    expect(t.retryAfterS()).toBe(20);
    now += 60_000; // past the ETA: never below 5 s
    expect(t.retryAfterS()).toBe(5);
    await r.hset("llmha:tier:standby:wake", { wake: "0" });
    await t.read();
    expect(t.retryAfterS()).toBe(30);
    const dead = new TierReader(null, "tier", { retryAfterS: 30, wakeEtaS: 120 });
    expect(await dead.read()).toEqual({ level: null, readable: false, standbyWaking: false });
  });
});

describe("replay rate limiter", () => {
  it("spaces requests at the configured rate", async () => {
    const l = new RateLimiter(20);
    const t0 = performance.now();
    for (let i = 0; i < 11; i++) await l.take();
    const ms = performance.now() - t0;
    expect(ms).toBeGreaterThanOrEqual(490);
    expect(ms).toBeLessThan(1500);
  });
});
