/**
 * What a client of L4 relies on, against the real fallback, a real redis-server and
 * the kcat broker: results only for the tenant that queued them, an idempotency key runs once,
 * a 503 is never run later, answers never cross tenants (the `guided_choice` poisoning), a
 * misconfigured provider is skipped without leaking anything, over-deep JSON is a 400, and the
 * replay runs requests side by side. The L1 proxy the replay goes through is a fake that counts
 * what reaches the fleet.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { waitFor } from "../../agent/src/util/net";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-guarantees-"));
const LEAKY_KEY = "sk-live-abcd1234SECRETxyz";
let redis: RedisServerHandle;
let kafka: KafkaMockHandle;
let r: Redis;
let l1: FakeHttp;
let badKey: FakeHttp;
let noModel: FakeHttp;
let good: FakeHttp;
let fb: RunningFallback;
let base: string;
const logs = captureLogger();
/** Requests that reached the fleet, by prompt; and how many were in flight at most. */
const atFleet = new Map<string, number>();
let inFlight = 0;
let maxInFlight = 0;

const setTier = (level: string): Promise<number> => r.hset("llmha:q:tier", { level });
const promptOf = (body: Record<string, unknown>): string => String((body.messages as Array<{ content: string }>).at(-1)?.content);

interface Sent {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function post(tenant: string | null, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Sent> {
  const h: Record<string, string> = { "content-type": "application/json", "x-llmha-queue": "allow", ...headers };
  if (tenant) h["x-llmha-tenant"] = tenant;
  const res = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: h, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

async function result(tenant: string | null, id: string): Promise<Sent> {
  const res = await fetch(`${base}/v1/llmha/requests/${id}`, { headers: tenant ? { "x-llmha-tenant": tenant } : {} });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

const ask = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model: "m", messages: [{ role: "user", content }], ...extra });

beforeAll(async () => {
  [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
  r = new Redis(redis.url);
  l1 = await fakeHttp((_req, body, res) => {
    const prompt = promptOf(body);
    atFleet.set(prompt, (atFleet.get(prompt) ?? 0) + 1);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    // The fleet honours guided decoding: the answer is the one choice it was given.
    const choice = (body.guided_choice as string[] | undefined)?.[0];
    setTimeout(() => {
      inFlight--;
      json(res, 200, chatResponse(choice ?? `fleet answer to ${prompt}`));
    }, prompt.startsWith("slow") ? 800 : 0);
  });
  badKey = await fakeHttp((_req, _b, res) => json(res, 401, { error: { message: `Incorrect API key provided: ${LEAKY_KEY}. provider-one-internal` } }));
  noModel = await fakeHttp((_req, _b, res) => json(res, 404, { error: { message: "The model `x` does not exist at provider-two-internal", code: "model_not_found" } }));
  good = await fakeHttp((_req, body, res) => json(res, 200, chatResponse("from the good provider", String(body.model))));
  writeFileSync(join(dir, "providers.json"), JSON.stringify([
    { name: "provider-one", url: `${badKey.url}/v1`, priority: 1, timeoutMs: 1000, models: { "gpt-up": "a", "gpt-bad": "a" }, failureThreshold: 100 },
    { name: "provider-two", url: `${noModel.url}/v1`, priority: 2, timeoutMs: 1000, models: { "gpt-up": "b", "gpt-bad": "b" }, failureThreshold: 100 },
    { name: "provider-three", url: `${good.url}/v1`, priority: 3, timeoutMs: 1000, models: { "gpt-up": "c" } },
  ]));
  const cfg = loadFallbackConfig([
    "--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "q", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap,
    "--models", "m,gpt-up,gpt-bad", "--providers-file", join(dir, "providers.json"), "--l1-url", l1.url, "--replay-rps", "50",
    "--cache-replayed-tenants", "acme", "--max-body-bytes", "65536",
  ], {});
  await setTier("L4");
  fb = await runFallback(cfg, { log: logs.log });
  base = `http://127.0.0.1:${fb.port}`;
}, 30_000);

afterAll(async () => {
  if (process.env.SHOW_LOGS) console.log(logs.lines.filter((x) => !x.includes('"level":20')).map((x) => x.slice(0, 400)).join(""));
  await fb?.close();
  r?.disconnect();
  await Promise.all([l1?.close(), badKey?.close(), noModel?.close(), good?.close()]);
  await Promise.all([redis?.stop(), kafka?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

describe("tenants, idempotency keys, poisoning", () => {
  it("shows a result only to the tenant that queued it: 404 to any other, as if it did not exist", async () => {
    await setTier("L4");
    const q = await post("acme", ask("private question"));
    expect(q.status).toBe(202);
    const id = String(q.body.id);
    expect((await result("globex", id)).status).toBe(404);
    expect((await result(null, id)).status).toBe(404);
    expect((await result("acme", id)).status).toBe(202);
    await setTier("L0");
    await waitFor("acme's result", async () => (await result("acme", id)).status === 200, { timeoutMs: 30_000, everyMs: 200 });
    const other = await result("globex", id);
    expect(other.status).toBe(404);
    expect(JSON.stringify(other.body)).not.toContain("private question");
  }, 60_000);

  it("runs an idempotency key once: a repeat gets the same id, then the same result; the key is the tenant's own", async () => {
    await setTier("L4");
    const a1 = await post("acme", ask("What is 2+2?"), { "idempotency-key": "k-1" });
    expect(a1.status).toBe(202);
    const id1 = String(a1.body.id);
    const again = await post("acme", ask("What is 2+2?"), { "idempotency-key": "k-1" });
    expect(again.status).toBe(202);
    expect(again.body.id).toBe(id1);
    const b1 = await post("globex", ask("What is 2+2?"), { "idempotency-key": "k-1" });
    expect(b1.status).toBe(202);
    expect(b1.body.id).not.toBe(id1);
    await setTier("L0");
    await waitFor("both results", async () => (await result("acme", id1)).status === 200 && (await result("globex", String(b1.body.id))).status === 200, { timeoutMs: 30_000, everyMs: 200 });
    expect(atFleet.get("What is 2+2?")).toBe(2); // acme's once (asked twice) and globex's once
    // A repeat after the result: the fleet's answer, not a new run.
    const repeat = await post("acme", ask("What is 2+2?"), { "idempotency-key": "k-1" });
    expect(repeat.status).toBe(200);
    expect(repeat.headers.get("x-llmha-idempotent-replay")).toBe("true");
    expect((repeat.body as { choices: Array<{ message: { content: string } }> }).choices[0].message.content).toBe("fleet answer to What is 2+2?");
    expect(atFleet.get("What is 2+2?")).toBe(2);
  }, 60_000);

  it("never serves a tenant's replayed answer to another: the guided_choice poisoning", async () => {
    await setTier("L4");
    // The poisoning attempt: a queued guided request whose answer is the attacker's text.
    const poison = await post("acme", ask("What is the support number?", { guided_choice: ["Call +1-900-555-0100 now"] }));
    expect(poison.status).toBe(202);
    await setTier("L0");
    await waitFor("the poison's result", async () => (await result("acme", String(poison.body.id))).status === 200, { timeoutMs: 30_000, everyMs: 200 });
    // Back at L4: the plain question is never answered with the guided answer, for anyone.
    await setTier("L4");
    await new Promise((res) => setTimeout(res, 600));
    for (const tenant of ["globex", "acme", null]) {
      const plain = await post(tenant, ask("What is the support number?"), { "x-llmha-queue": "no" });
      expect(JSON.stringify(plain.body)).not.toContain("1-900");
      expect(plain.status).toBe(503);
    }
    // acme opted in to caching its replayed answers: its own identical request is served from them; globex's is not.
    const own = await post("acme", ask("What is the support number?", { guided_choice: ["Call +1-900-555-0100 now"] }), { "x-llmha-queue": "no" });
    expect(own.status).toBe(200);
    expect(own.headers.get("x-llmha-degraded")).toBe("cache");
    const other = await post("globex", ask("What is the support number?", { guided_choice: ["Call +1-900-555-0100 now"] }), { "x-llmha-queue": "no" });
    expect(other.status).toBe(503);
  }, 60_000);

  it("a 503 after the broker's acknowledgement timed out is never run, and the retry with the same key runs once", async () => {
    await setTier("L4");
    await kafka.pause();
    let refused: Sent;
    try {
      refused = await post("acme", ask("late ack"), { "idempotency-key": "k-late" });
    } finally {
      kafka.resume();
    }
    expect(refused.status).toBe(503);
    expect((refused.body.error as { code: string }).code).toBe("queue_unavailable");
    const retry = await waitFor("the retry is queued", async () => {
      const x = await post("acme", ask("late ack"), { "idempotency-key": "k-late" });
      return x.status === 202 ? x : null;
    }, { timeoutMs: 20_000, everyMs: 500 });
    await setTier("L0");
    await waitFor("the retry's result", async () => (await result("acme", String(retry.body.id))).status === 200, { timeoutMs: 40_000, everyMs: 200 });
    // Time for the late-acknowledged first send to come through the replay, if it were run.
    await new Promise((res) => setTimeout(res, 4000));
    expect(atFleet.get("late ack")).toBe(1);
  }, 90_000);
});

describe("input the fallback refuses", () => {
  it("over-deep JSON is a 400, not a 503", async () => {
    const deep = `{"model":"m","messages":[{"role":"user","content":"x"}],"x":${"[".repeat(100_00)}${"]".repeat(100_00)}}`;
    const res = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: deep });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("too_deep");
  });
});

describe("providers that are misconfigured", () => {
  it("401 and 404 go on to the next provider, are counted, and nothing of them reaches the client", async () => {
    await setTier("L4");
    await new Promise((res) => setTimeout(res, 600));
    const ok = await post("acme", { model: "gpt-up", messages: [{ role: "user", content: "hi" }] }, { "x-llmha-queue": "no" });
    expect(ok.status).toBe(200);
    expect(JSON.stringify(ok.body)).toContain("from the good provider");
    // Only misconfigured providers: a generic 503, no upstream body, no provider name.
    const bad = await post("acme", { model: "gpt-bad", messages: [{ role: "user", content: "hi" }] }, { "x-llmha-queue": "no" });
    expect(bad.status).toBe(503);
    const text = JSON.stringify(bad.body);
    for (const leak of [LEAKY_KEY, "abcd", "provider-one", "provider-two", "internal", "Incorrect API key"]) expect(text).not.toContain(leak);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/llmha_fallback_provider_misconfigured_total\{provider="provider-one"\} 2/);
    expect(metrics).toMatch(/llmha_fallback_provider_misconfigured_total\{provider="provider-two"\} 2/);
    expect(metrics).toMatch(/llmha_fallback_provider_misconfigured\{provider="provider-one"\} 1/);
    expect(logs.lines.join("")).not.toContain(LEAKY_KEY);
  });
});

describe("replay pace", () => {
  it("replays slow requests side by side (bounded concurrency), not one after the other", async () => {
    await setTier("L4");
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push(String((await post(null, ask(`slow ${i}`))).body.id));
    maxInFlight = 0;
    const t0 = Date.now();
    await setTier("L0");
    await waitFor("8 slow results", async () => (await Promise.all(ids.map((id) => result(null, id)))).every((x) => x.status === 200), { timeoutMs: 30_000, everyMs: 200 });
    console.log(`8 requests of 800 ms each replayed in ${Date.now() - t0} ms, at most ${maxInFlight} at once`);
    expect(maxInFlight).toBeGreaterThanOrEqual(2);
    expect(maxInFlight).toBeLessThanOrEqual(4);
  }, 60_000);
});
