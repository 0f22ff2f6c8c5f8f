/**
 * `llm-ha fallback` end to end: a real redis-server, a real Kafka-protocol broker (kcat's
 * mock cluster), the official `openai` client; the external providers and the L1 proxy the
 * replay goes through are local fake HTTP servers.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { Kafka, logLevel } from "kafkajs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cacheCommand, runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freePort, waitFor } from "../../agent/src/util/net";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

const SECRET = "sk-test-SECRET-never-logged-123";
const dir = mkdtempSync(join(tmpdir(), "llmha-fallback-"));
let redis: RedisServerHandle;
let kafka: KafkaMockHandle;
let r: Redis;
let primary: FakeHttp;
let secondary: FakeHttp;
let l1: FakeHttp;
let fb: RunningFallback;
let client: OpenAI;
let base: string;
const logs = captureLogger();
/** What the fake L1 answers per prompt during replay. */
let l1Mode: "serve" | "down" = "down";
const l1Hits = new Map<string, number>();

function sink(): { stream: Writable; text: () => string } {
  let t = "";
  return { stream: new Writable({ write(c: Buffer, _e, cb) { t += c.toString(); cb(); } }), text: () => t };
}

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const o = sink();
  const e = sink();
  const code = await cacheCommand([...args, "--redis-url", redis.url, "--cluster", "t"], o.stream, e.stream);
  return { code, out: o.text(), err: e.text() };
}

const setTier = (level: string): Promise<number> => r.hset("llmha:t:tier", { level, reason: "test" });

beforeAll(async () => {
  [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
  r = new Redis(redis.url);
  primary = await fakeHttp((_req, _b, res) => json(res, 500, { error: { message: "primary down" } }));
  secondary = await fakeHttp((req, body, res) => {
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: body.model, choices: [{ index: 0, delta: { role: "assistant", content: "from " }, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: body.model, choices: [{ index: 0, delta: { content: "secondary" }, finish_reason: "stop" }] })}\n\n`);
      res.end("data: [DONE]\n\n");
      return;
    }
    json(res, 200, chatResponse(`secondary says hi (auth ${req.headers.authorization === `Bearer ${SECRET}` ? "ok" : "missing"})`, String(body.model)));
  });
  l1 = await fakeHttp((req, body, res) => {
    const id = String(req.headers["x-llmha-replay"] ?? "");
    l1Hits.set(id, (l1Hits.get(id) ?? 0) + 1);
    const prompt = JSON.stringify(body.messages ?? body.prompt);
    if (l1Mode === "down") return json(res, 503, { error: { message: "no server" } });
    if (prompt.includes("query of death")) return json(res, 400, { error: { message: "prompt rejected by the model server" } });
    if (prompt.includes("always busy")) return json(res, 503, { error: { message: "busy" } });
    json(res, 200, chatResponse(`fleet answer to ${prompt}`, String(body.model)));
  });
  writeFileSync(join(dir, "key"), SECRET + "\n");
  writeFileSync(join(dir, "providers.json"), JSON.stringify([
    { name: "primary", url: `${primary.url}/v1`, priority: 1, timeoutMs: 1000, models: { "gpt-up": "upstream-model" }, keyFile: join(dir, "key"), failureThreshold: 2, openMs: 60_000 },
    { name: "secondary", url: `${secondary.url}/v1`, priority: 2, timeoutMs: 1000, models: { "gpt-up": "upstream-model-2" }, keyEnv: "TEST_SECONDARY_KEY" },
  ]));
  process.env.TEST_SECONDARY_KEY = SECRET;
  const cfg = loadFallbackConfig([
    "--port", "0", "--host", "127.0.0.1", "--metrics-addr", "127.0.0.1:0", "--cluster", "t", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap,
    "--models", "llama-local,gpt-up", "--providers-file", join(dir, "providers.json"), "--l1-url", l1.url,
    "--replay-rps", "20", "--replay-attempts", "3", "--max-body-bytes", "4096",
  ], {});
  fb = await runFallback(cfg, { log: logs.log });
  base = `http://127.0.0.1:${fb.port}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "client-key", maxRetries: 0 });
}, 30_000);

afterAll(async () => {
  await fb?.close();
  r?.disconnect();
  await Promise.all([primary?.close(), secondary?.close(), l1?.close()]);
  await Promise.all([redis?.stop(), kafka?.stop()]);
  rmSync(dir, { recursive: true, force: true });
  delete process.env.TEST_SECONDARY_KEY;
});

describe("verified-answer cache", () => {
  it("imports JSONL, answers a normalized exact match (whitespace, key order) with x-llmha-degraded: cache, as JSON and as a stream", async () => {
    const lines = [
      JSON.stringify({ request: { model: "llama-local", messages: [{ role: "user", content: "What is  the capital of France?" }], temperature: 0 }, answer: "Paris.", ttlSeconds: 3600 }),
      JSON.stringify({ kind: "completions", request: { prompt: "2+2=", model: "llama-local", max_tokens: 4 }, response: { choices: [{ text: "4", finish_reason: "length" }] } }),
    ];
    writeFileSync(join(dir, "verified.jsonl"), lines.join("\n") + "\n");
    const imp = await cli(["import", join(dir, "verified.jsonl")]);
    expect(imp).toMatchObject({ code: 0, err: "" });
    expect(imp.out).toContain("imported 2 entries");

    const { data, response } = await client.chat.completions
      .create({ temperature: 0, messages: [{ content: "  What is the capital\nof France? ", role: "user" }], model: "llama-local" })
      .withResponse();
    expect(response.headers.get("x-llmha-degraded")).toBe("cache");
    expect(data.choices[0].message.content).toBe("Paris.");

    const stream = await client.chat.completions.create({ model: "llama-local", messages: [{ role: "user", content: "What is the capital of France?" }], temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Paris.");

    const c = await client.completions.create({ model: "llama-local", prompt: "2+2=", max_tokens: 4 });
    expect(c.choices[0].text).toBe("4");
    expect(c.choices[0].finish_reason).toBe("length");

    // A parameter that changes the output is another request: no hit (and no provider serves this model → 503).
    await expect(client.chat.completions.create({ model: "llama-local", messages: [{ role: "user", content: "What is the capital of France?" }], temperature: 0.7 })).rejects.toMatchObject({ status: 503 });
  });

  it("lists and removes entries; a bad import line names the line and imports nothing", async () => {
    const list = await cli(["list", "--json"]);
    const doc = JSON.parse(list.out) as { version: number; entries: Array<{ key: string; answer: string; source: string; ttlLeftS: number }> };
    expect(doc.version).toBe(1);
    const entries = doc.entries;
    expect(entries.map((e) => e.answer).sort()).toEqual(["4", "Paris."]);
    expect(entries.find((e) => e.answer === "Paris.")?.ttlLeftS).toBeLessThanOrEqual(3600);
    writeFileSync(join(dir, "bad.jsonl"), JSON.stringify({ request: { model: "x", messages: [{ role: "user", content: "ok" }] }, answer: "ok" }) + "\n{not json\n");
    const bad = await cli(["import", join(dir, "bad.jsonl")]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("line 2");
    expect((JSON.parse((await cli(["list", "--json"])).out) as { entries: unknown[] }).entries).toHaveLength(2);
    const four = entries.find((e) => e.answer === "4")!;
    expect(await cli(["rm", four.key.slice(0, 12)])).toMatchObject({ code: 0, out: "removed 1 of 1\n" });
    await expect(client.completions.create({ model: "llama-local", prompt: "2+2=", max_tokens: 4 })).rejects.toMatchObject({ status: 503 });
  });
});

describe("provider failover", () => {
  it("is not used while the tier says the fleet can serve", async () => {
    await setTier("L2");
    await new Promise((res) => setTimeout(res, 600));
    const before = secondary.seen.length + primary.seen.length;
    await expect(client.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "hello" }] })).rejects.toMatchObject({ status: 503 });
    expect(secondary.seen.length + primary.seen.length).toBe(before);
  });

  it("at L4 goes by priority past a failing provider, maps the model, sends the key, and opens the failing one's breaker", async () => {
    await setTier("L4");
    await new Promise((res) => setTimeout(res, 600));
    for (let i = 0; i < 4; i++) {
      const { data, response } = await client.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: `hello ${i}` }] }).withResponse();
      expect(response.headers.get("x-llmha-degraded")).toBe("upstream:secondary");
      expect(data.choices[0].message.content).toBe("secondary says hi (auth ok)");
    }
    expect(primary.seen).toHaveLength(2); // failureThreshold 2: then the breaker is open
    expect(primary.seen[0].body.model).toBe("upstream-model");
    expect(primary.seen[0].headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(secondary.seen.at(-1)?.body.model).toBe("upstream-model-2");
    const stream = await client.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "stream" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("from secondary");
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/llmha_fallback_circuit_open\{provider="primary"\} 1/);
    expect(metrics).toMatch(/llmha_fallback_requests_total\{outcome="upstream"\} 5/);
  });

  it("never logs a key", () => {
    expect(logs.lines.length).toBeGreaterThan(0);
    expect(logs.lines.join("")).not.toContain(SECRET);
    expect(logs.lines.join("")).toContain("fallback listening");
  });
});

describe("queue and replay", () => {
  it("a plain request the fleet cannot take gets 503 with Retry-After, never a bare error", async () => {
    const res = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "llama-local", messages: [{ role: "user", content: "plain" }] }) });
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("fleet_unavailable");
  });

  it("queues an opted-in request (202 + Location after the broker's ack), replays it once the tier is below L4, exactly once; the answer is its requester's only (not cached)", async () => {
    await setTier("L4");
    const ids: string[] = [];
    for (const prompt of ["queued one", "queued two", "query of death", "always busy"]) {
      const { data, response } = await client.chat.completions
        .create({ model: "llama-local", messages: [{ role: "user", content: prompt }] }, { headers: { "x-llmha-queue": "allow" } })
        .withResponse();
      expect(response.status).toBe(202);
      const loc = response.headers.get("location") ?? "";
      expect(loc).toMatch(/^\/v1\/llmha\/requests\/req_[0-9a-f]{32}$/);
      expect((data as unknown as { id: string }).id).toBe(loc.split("/").pop());
      ids.push(loc.split("/").pop()!);
    }
    const pending = await fetch(`${base}/v1/llmha/requests/${ids[0]}`);
    expect(pending.status).toBe(202);
    // Still L4: nothing replayed.
    await new Promise((res) => setTimeout(res, 1500));
    expect(l1.seen).toHaveLength(0);

    const recoverAt = Date.now();
    l1Mode = "serve";
    await setTier("L1");
    const results = await waitFor("all four stored", async () => {
      const rs = await Promise.all(ids.map(async (id) => {
        const res = await fetch(`${base}/v1/llmha/requests/${id}`);
        return { status: res.status, body: (await res.json()) as { state: string; response?: { choices: Array<{ message: { content: string } }> }; error?: { message: string }; attempts?: number } };
      }));
      return rs.every((x) => x.status === 200) ? rs : null;
    }, { timeoutMs: 40_000, everyMs: 200 });
    const drainMs = Date.now() - recoverAt;
    expect(results[0].body.state).toBe("done");
    expect(results[0].body.response?.choices[0].message.content).toBe('fleet answer to [{"role":"user","content":"queued one"}]');
    // Stored apart: the record (what llm-ha status and operators may read) without the body; the body beside it, same TTL.
    const stored = JSON.parse((await r.get(`llmha:t:fallback:req:${ids[0]}`)) ?? "{}") as Record<string, unknown>;
    expect(stored).toMatchObject({ state: "done", status: 200 });
    expect(stored).not.toHaveProperty("response");
    expect(JSON.parse((await r.get(`llmha:t:fallback:body:${ids[0]}`)) ?? "null")).toEqual(results[0].body.response);
    expect(Math.abs((await r.ttl(`llmha:t:fallback:body:${ids[0]}`)) - (await r.ttl(`llmha:t:fallback:req:${ids[0]}`)))).toBeLessThanOrEqual(1);
    expect(results[1].body.state).toBe("done");
    expect(results[2].body).toMatchObject({ state: "failed", attempts: 1 });
    expect(results[2].body.error?.message).toContain("prompt rejected");
    expect(results[3].body).toMatchObject({ state: "failed", attempts: 3 });
    // Exactly once per request for the ones the fleet answered; the busy one only its bounded retries.
    expect([ids[0], ids[1], ids[2]].map((id) => l1Hits.get(id))).toEqual([1, 1, 1]);
    expect(l1Hits.get(ids[3])).toBe(3);
    for (const s of l1.seen) expect(s.body.stream).toBe(false);
    // The replayed answer is its requester's: not served from the cache to the next asker.
    await setTier("L4");
    await new Promise((res) => setTimeout(res, 600));
    await expect(client.chat.completions.create({ model: "llama-local", messages: [{ role: "user", content: "queued one" }] })).rejects.toMatchObject({ status: 503 });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/llmha_fallback_replayed_total\{result="done"\} 2/);
    expect(metrics).toMatch(/llmha_fallback_replayed_total\{result="failed"\} 2/);
    console.log(`replay: recovery to all 4 results stored in ${drainMs} ms (rps 20; one request needed 3 tries with backoff)`);
    // Offsets were committed after storing: the queue depth goes back to 0.
    await waitFor("queue depth 0", async () => /llmha_fallback_queue_depth 0\b/.test(await (await fetch(`${base}/metrics`)).text()), { timeoutMs: 10_000, everyMs: 250 });
    // …and published for `llm-ha status`.
    await waitFor("published depth 0", async () => (await r.hget("llmha:t:fallback:queue", "depth")) === "0", { timeoutMs: 5000, everyMs: 250 });
    expect(await r.hget("llmha:t:fallback:queue", "topic")).toBe("llmha.t.requests");
  }, 60_000);

  it("a redelivered message (at-least-once) is not replayed again: idempotent by request id", async () => {
    const ids = l1.seen.map((x) => String(x.headers["x-llmha-replay"]));
    const id = ids[0];
    const hitsBefore = l1Hits.get(id);
    const k = new Kafka({ clientId: "redeliver", brokers: kafka.brokers, logLevel: logLevel.NOTHING });
    const p = k.producer();
    await p.connect();
    await p.send({ topic: "llmha.t.requests", acks: -1, messages: [{ key: id, value: JSON.stringify({ id, kind: "chat", path: "/v1/chat/completions", body: { model: "llama-local", messages: [{ role: "user", content: "queued one" }] }, receivedAt: Date.now() }) }] });
    await p.disconnect();
    await waitFor("duplicate seen", async () => /llmha_fallback_replayed_total\{result="duplicate"\} 1/.test(await (await fetch(`${base}/metrics`)).text()), { timeoutMs: 15_000, everyMs: 200 });
    expect(l1Hits.get(id)).toBe(hitsBefore);
  }, 30_000);

  it("404 for an unknown request id, 400 for one with an encoded slash (a path that would resolve elsewhere)", async () => {
    expect((await fetch(`${base}/v1/llmha/requests/req_00000000000000000000000000000000`)).status).toBe(404);
    const encoded = await fetch(`${base}/v1/llmha/requests/..%2F..%2Fetc`);
    expect(encoded.status).toBe(400);
    expect(((await encoded.json()) as { error: { code: string } }).error.code).toBe("invalid_path");
  });
});

describe("bad input: 4xx and nothing enqueued", () => {
  it("malformed JSON 400, unknown model 404, body over the limit 413, missing messages 400", async () => {
    const counter = async (outcome: string): Promise<number> =>
      Number(new RegExp(`llmha_fallback_requests_total\\{outcome="${outcome}"\\} (\\d+)`).exec(await (await fetch(`${base}/metrics`)).text())?.[1]);
    const [rejected0, queued0] = [await counter("rejected"), await counter("queued")];
    const send = (body: string, model = "llama-local"): Promise<Response> =>
      fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: body.replace("MODEL", model) });
    const produced = l1.seen.length;
    expect((await send("{not json")).status).toBe(400);
    expect((await send(JSON.stringify({ model: "MODEL", messages: [] }))).status).toBe(400);
    const unknown = await send(JSON.stringify({ model: "MODEL", messages: [{ role: "user", content: "x" }] }), "nope");
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
    await expect(client.chat.completions.create({ model: "llama-local", messages: [{ role: "user", content: "x".repeat(5000) }] }, { headers: { "x-llmha-queue": "allow" } })).rejects.toMatchObject({ status: 413 });
    const big = await send(JSON.stringify({ model: "MODEL", messages: [{ role: "user", content: "y".repeat(200_000) }] }));
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe("body_too_large");
    expect(await counter("rejected")).toBe(rejected0 + 5);
    expect(await counter("queued")).toBe(queued0);
    expect(l1.seen.length).toBe(produced);
  });
});

describe("faults", () => {
  it("Kafka unreachable: 503 with a reason and Retry-After, never a 202", async () => {
    const dead = await freePort();
    const cfg = loadFallbackConfig(["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "t2", "--redis-url", redis.url, "--kafka-brokers", `127.0.0.1:${dead}`, "--models", "m"], {});
    const other = await runFallback(cfg, { log: captureLogger().log });
    try {
      const t0 = performance.now();
      const res = await fetch(`http://127.0.0.1:${other.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
      const ms = performance.now() - t0;
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("queue_unavailable");
      expect(body.error.message).toContain("queue is unavailable");
      expect(ms).toBeLessThan(6000);
      console.log(`Kafka unreachable: 503 in ${ms.toFixed(0)} ms`);
    } finally {
      await other.close();
    }
  }, 20_000);

  it("Redis unreachable: the cache is skipped and the queue still works", async () => {
    const dead = await freePort();
    const cfg = loadFallbackConfig(["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "t3", "--redis-url", `redis://127.0.0.1:${dead}`, "--kafka-brokers", kafka.bootstrap, "--models", "m", "--replay", "false"], {});
    const other = await runFallback(cfg, { log: captureLogger().log });
    try {
      const res = await fetch(`http://127.0.0.1:${other.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
      expect(res.status).toBe(202);
      const loc = res.headers.get("location")!;
      // This instance remembers what it queued: pending, not unknown.
      expect((await fetch(`http://127.0.0.1:${other.port}${loc}`)).status).toBe(202);
      const plain = await fetch(`http://127.0.0.1:${other.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
      expect(plain.status).toBe(503);
      expect(await (await fetch(`http://127.0.0.1:${other.port}/metrics`)).text()).toMatch(/llmha_fallback_cache_errors_total [1-9]/);
    } finally {
      await other.close();
    }
  }, 20_000);

  it("queue depth cap: 503 with Retry-After once the queue holds the cap", async () => {
    const cfg = loadFallbackConfig(["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "t4", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap, "--models", "m", "--replay", "false", "--max-queue-depth", "2"], {});
    const other = await runFallback(cfg, { log: captureLogger().log });
    try {
      await waitFor("depth sampled", async () => /llmha_fallback_queue_depth 0\b/.test(await (await fetch(`http://127.0.0.1:${other.port}/metrics`)).text()), { timeoutMs: 10_000, everyMs: 200 });
      const send = (): Promise<Response> => fetch(`http://127.0.0.1:${other.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
      expect((await send()).status).toBe(202);
      expect((await send()).status).toBe(202);
      const full = await send();
      expect(full.status).toBe(503);
      expect(full.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(((await full.json()) as { error: { code: string } }).error.code).toBe("queue_full");
    } finally {
      await other.close();
    }
  }, 20_000);
});
