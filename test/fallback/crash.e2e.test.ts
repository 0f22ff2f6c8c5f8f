/**
 * Replay after a crash: a fallback holding the replay group's partitions is killed
 * with SIGKILL (no LeaveGroup) while requests wait in the queue; the restarted fallback must be
 * replaying within 5 s, and every request is answered once (0 lost, 0 duplicates). Real
 * redis-server, the kcat broker, the fallback as its own process; the L1 proxy is a fake.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { waitFor } from "../../agent/src/util/net";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { startFallbackProcess, type FallbackProcess } from "../../lab/fallback-process";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

let redis: RedisServerHandle;
let kafka: KafkaMockHandle;
let r: Redis;
let l1: FakeHttp;
let first: FallbackProcess | null = null;
let second: RunningFallback | null = null;
const hits = new Map<string, number>();
let firstHitAt: number | null = null;

beforeAll(async () => {
  [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
  r = new Redis(redis.url);
  l1 = await fakeHttp((req, _body, res) => {
    firstHitAt ??= Date.now();
    const id = String(req.headers["x-llmha-replay"]);
    hits.set(id, (hits.get(id) ?? 0) + 1);
    json(res, 200, chatResponse(`answer ${id}`));
  });
}, 30_000);

const cap = captureLogger();
afterAll(async () => {
  if (process.env.SHOW_LOGS) console.log(cap.lines.filter((x) => !x.includes('"level":20')).map((x) => x.slice(0, 300)).join(""));
  await first?.stop().catch(() => undefined);
  await second?.close();
  r?.disconnect();
  await l1?.close();
  await Promise.all([redis?.stop(), kafka?.stop()]);
});

describe("replay after kill -9 of the fallback", () => {
  it("resumes within 5 s with every queued request answered once", async () => {
    const flags = ["--metrics-addr", "off", "--cluster", "c", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap, "--models", "m", "--l1-url", l1.url, "--replay-rps", "50", "--log-level", "warn"];
    await r.hset("llmha:c:tier", { level: "L4" });
    first = await startFallbackProcess(flags);
    const ids = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const res = await fetch(`http://127.0.0.1:${first!.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `crash ${i}` }] }) });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }));
    // The first fallback joins the group (about 3 s on the mock, which has no DescribeGroups) and
    // holds the partitions, waiting out L4 inside a message.
    await new Promise((res) => setTimeout(res, 6000));
    await first.crash();
    const killedAt = Date.now();
    await r.hset("llmha:c:tier", { level: "L0" });
    second = await runFallback(loadFallbackConfig([...flags, "--port", "0", "--host", "127.0.0.1"], {}), { log: cap.log });
    const startedMs = Date.now() - killedAt;
    await waitFor("the first replay", async () => firstHitAt !== null, { timeoutMs: 30_000, everyMs: 50 });
    const resumeMs = firstHitAt! - killedAt;
    await waitFor("20 results", async () => {
      const st = await Promise.all(ids.map(async (id) => (await fetch(`http://127.0.0.1:${second!.port}/v1/llmha/requests/${id}`)).status));
      return st.every((s) => s === 200);
    }, { timeoutMs: 30_000, everyMs: 250 });
    console.log(`kill -9 of the replaying fallback: the restarted one replayed its first request ${resumeMs} ms later (its start took ${startedMs} ms; session timeout 2.5 s; loaded machine)`);
    expect(ids.map((id) => hits.get(id))).toEqual(ids.map(() => 1));
    expect(hits.size).toBe(20);
    expect(resumeMs).toBeLessThan(5000);
  }, 90_000);
});

// Two members; the one killed held claimed requests (its answers slow): the survivor gives those
// up as interrupted once their lease — one group session — lapses, and replays the rest. With a
// 30 s lease the survivor waited out each claim at the head of a partition (26 s in the drill).
describe("kill -9 of one of two replaying fallbacks, mid-request", () => {
  it("the survivor finishes the queue within seconds: the dead member's claims given up, nothing run twice", async () => {
    const slowHits = new Map<string, number>();
    const slow = await fakeHttp((req, _body, res) => {
      const id = String(req.headers["x-llmha-replay"]);
      slowHits.set(id, (slowHits.get(id) ?? 0) + 1);
      setTimeout(() => json(res, 200, chatResponse(`answer ${id}`)), 1500);
    });
    const flags = ["--metrics-addr", "off", "--cluster", "d", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap, "--models", "m", "--l1-url", slow.url, "--replay-rps", "50", "--log-level", "warn"];
    let dying: FallbackProcess | null = null;
    let survivor: RunningFallback | null = null;
    try {
      await r.hset("llmha:d:tier", { level: "L4" });
      survivor = await runFallback(loadFallbackConfig([...flags, "--port", "0", "--host", "127.0.0.1"], {}), { log: cap.log });
      dying = await startFallbackProcess(flags);
      const ids = await Promise.all(Array.from({ length: 16 }, async (_, i) => {
        const res = await fetch(`http://127.0.0.1:${survivor!.port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `two ${i}` }] }) });
        expect(res.status).toBe(202);
        return ((await res.json()) as { id: string }).id;
      }));
      // Both join and share the partitions, waiting out L4.
      await new Promise((res) => setTimeout(res, 8000));
      await r.hset("llmha:d:tier", { level: "L0" });
      // Kill one while requests are in flight at the slow L1 (each takes 1.5 s).
      await waitFor("requests in flight", async () => slowHits.size >= 4, { timeoutMs: 20_000, everyMs: 20 });
      await dying.crash();
      const killedAt = Date.now();
      const state = async (id: string): Promise<string> => (JSON.parse((await r.get(`llmha:d:fallback:req:${id}`)) ?? "{}") as { state?: string }).state ?? "none";
      await waitFor("every request final", async () => (await Promise.all(ids.map(state))).every((s) => s === "done" || s === "failed"), { timeoutMs: 40_000, everyMs: 100 });
      const tookMs = Date.now() - killedAt;
      const states = await Promise.all(ids.map(state));
      console.log(`kill -9 of one of two members mid-request: every request final ${tookMs} ms later; ${states.filter((s) => s === "failed").length} given up as interrupted`);
      // At most once: nothing reached the fleet twice; every request not given up was answered.
      expect(ids.every((id) => (slowHits.get(id) ?? 0) <= 1)).toBe(true);
      expect(ids.filter((_, i) => states[i] === "done").every((id) => slowHits.get(id) === 1)).toBe(true);
      // 10–11.6 s on the 2-core machine in whole runs, once 16.6 s beside the drill's suites: the bound catches a hang.
      expect(tookMs).toBeLessThan(25_000);
    } finally {
      await dying?.stop().catch(() => undefined);
      await survivor?.close();
      await slow.close();
    }
  }, 120_000);
});
