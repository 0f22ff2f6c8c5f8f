/**
 * One fallback per AZ proxy, one consumer group: requests queued through either are replayed
 * once by the group — also when the second member joins (a rebalance) while the first waits
 * out L4 inside a message. Real redis-server and the kcat broker; the L1 proxy is a fake.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { waitFor } from "../../agent/src/util/net";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

let redis: RedisServerHandle;
let kafka: KafkaMockHandle;
let r: Redis;
let l1: FakeHttp;
const fbs: RunningFallback[] = [];
const hits = new Map<string, number>();
const logs: string[][] = [];

const start = async (): Promise<RunningFallback> => {
  const cfg = loadFallbackConfig(["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "127.0.0.1:0", "--cluster", "g", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap, "--models", "m", "--l1-url", l1.url, "--replay-rps", "50"], {});
  const cap = captureLogger();
  logs.push(cap.lines);
  const fb = await runFallback(cfg, { log: cap.log });
  fbs.push(fb);
  return fb;
};
const queue = async (fb: RunningFallback, n: number, tag: string): Promise<string[]> =>
  Promise.all(Array.from({ length: n }, async (_, i) => {
    const res = await fetch(`http://127.0.0.1:${fb.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `${tag} ${i}` }] }) });
    expect(res.status).toBe(202);
    return ((await res.json()) as { id: string }).id;
  }));

beforeAll(async () => {
  [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
  r = new Redis(redis.url);
  l1 = await fakeHttp((req, body, res) => {
    const id = String(req.headers["x-llmha-replay"]);
    hits.set(id, (hits.get(id) ?? 0) + 1);
    json(res, 200, chatResponse(`answer to ${JSON.stringify(body.messages)}`));
  });
}, 30_000);
afterAll(async () => {
  await Promise.all(fbs.map((f) => f.close()));
  r?.disconnect();
  await l1?.close();
  await Promise.all([redis?.stop(), kafka?.stop()]);
});

describe("two fallbacks, one replay group", () => {
  it("replays every request queued through either exactly once, across a rebalance during L4", async () => {
    await r.hset("llmha:g:tier", { level: "L4" });
    const a = await start();
    const first = await queue(a, 10, "via a");
    await new Promise((res) => setTimeout(res, 4000)); // a's consumer joins and waits inside a message
    const b = await start();
    const second = await queue(b, 10, "via b");
    await new Promise((res) => setTimeout(res, 2000));
    expect(hits.size).toBe(0);
    const t0 = Date.now();
    await r.hset("llmha:g:tier", { level: "L0" });
    const all = [...first, ...second];
    await waitFor("all 20 done", async () => {
      const states = await Promise.all(all.map(async (id) => (await fetch(`http://127.0.0.1:${b.port}/v1/llmha/requests/${id}`)).status));
      return states.every((s) => s === 200);
    }, { timeoutMs: 45_000, everyMs: 250 });
    if (process.env.SHOW_LOGS) for (const l of logs) console.log(l.filter((x) => !x.includes("\"level\":20")).map((x) => x.slice(0, 300)).join(""));
    console.log(`2 members: 20 queued requests replayed ${Date.now() - t0} ms after L4 ended`);
    expect(all.map((id) => hits.get(id))).toEqual(all.map(() => 1));
    expect(hits.size).toBe(20);
  }, 90_000);
});
