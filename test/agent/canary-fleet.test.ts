/**
 * Correctness canaries against real engines: three canary runners (the agent's) on
 * three fake vLLM servers share their answers through a real redis-server; a leader's fenced step
 * learns the expectation from their majority; then one fake answers wrongly — garbage, drift,
 * NaN logprobs — and its runner goes SUSPECT, re-checks with the second set at once, and ends at
 * MISMATCH, while nondeterminism within tolerance never does; an operator's record wins over the fleet's.
 */
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CanaryTolerance } from "../../agent/src/node/canary/answers";
import { CanaryRunner } from "../../agent/src/node/canary/runner";
import { publishExpectations, readExpectation, readNodeAnswers, recordExpectation } from "../../agent/src/node/canary/store";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";
import { main } from "../../agent/src/cli";
import { runInProcess } from "../support/in-process";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { freshCluster, testLogger } from "../redis/helpers";

const log = testLogger();
const TOL: CanaryTolerance = { prefixTokens: 8, logprobDelta: 0.1 };
const SETTINGS = { ttlMs: 60_000, renewMs: 30_000, contendMs: 50, marginMs: 1_000, replicaWaitMs: 0 };

let server: RedisServerHandle;
let client: RedisClient;
const fakes: FakeInference[] = [];
beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient(server.url, { name: "canary-test", log });
  await client.whenReady(5000);
});
afterAll(async () => {
  await Promise.all(fakes.map((f) => f.close()));
  await client?.close();
  await server?.stop();
});

async function fleetOf(n: number, key = "m@r1"): Promise<{ keys: RedisKeys; writer: FencedWriter; runners: CanaryRunner[]; servers: FakeInference[]; starts: number[] }> {
  const keys = new RedisKeys(freshCluster("canary"));
  const lease = new LeaderLease({ redis: client.redis, keys, holderId: "leader/1", settings: SETTINGS, log });
  lease.start();
  await waitFor("leader", () => lease.token, { timeoutMs: 5000 });
  const writer = new FencedWriter(client.redis, keys, lease);
  const servers = await Promise.all(Array.from({ length: n }, () => startFakeInference({ kind: "vllm", model: "m", tokenMs: 1 })));
  fakes.push(...servers);
  const starts = servers.map(() => 1);
  const runners = servers.map(
    (f, i) =>
      new CanaryRunner({
        kind: "vllm",
        baseUrl: f.url,
        nodeId: `n${i + 1}`,
        az: `az-${i % 2}`,
        intervalMs: 60_000,
        maxTokens: 12,
        timeoutMs: 3000,
        tolerance: TOL,
        served: () => ({ id: "m", key }),
        ready: () => true,
        serverStarts: () => starts[i],
        fleet: () => ({ redis: client.redis, keys }),
        log,
        registry: new Registry(),
        onChange: () => undefined,
      }),
  );
  return { keys, writer, runners, servers, starts };
}

describe("canaries through a real redis-server", () => {
  it("the leader learns the majority's answers, fenced; a node answering garbage, drift or NaN goes SUSPECT, then MISMATCH after the second set", async () => {
    const f = await fleetOf(3);
    // Both sets, in turn (logprobs self-checked: no expectation yet).
    for (const r of f.runners) for (let i = 0; i < 2; i++) expect((await r.runOnce()).phase).toBe("ok");
    const learned = await publishExpectations(client.redis, f.keys, f.writer, TOL, Date.now(), 60_000);
    expect(learned.accepted).toBe(true);
    const e = await readExpectation(client.redis, f.keys, "m@r1");
    expect(e).toMatchObject({ source: "fleet", nodes: 3, agreeing: 3, capped: false });
    expect(Object.keys(e!.answers).sort()).toEqual(["a1", "a2", "a3", "b1", "b2", "b3"]);
    for (const mode of ["garbage", "drift", "nan"] as const) {
      await f.servers[2].setMode({ corruption: mode, driftEvery: 3 });
      const suspect = await f.runners[2].runOnce();
      expect([mode, suspect.phase]).toEqual([mode, "suspect"]);
      const out = await f.runners[2].runOnce();
      expect([mode, out.phase]).toEqual([mode, "mismatch"]);
      // The fault gone without a restart: still out. After a restart, both sets matching bring it back.
      await f.servers[2].setMode({ corruption: "none" });
      await publishExpectations(client.redis, f.keys, f.writer, TOL, Date.now(), 60_000);
      expect((await f.runners[2].runOnce()).phase).toBe("mismatch");
      f.starts[2] += 1;
      expect((await f.runners[2].runOnce()).phase).toBe("mismatch");
      expect((await f.runners[2].runOnce()).phase).toBe("ok");
      expect(mode).toBeTruthy();
    }
    // The healthy nodes were never suspect.
    for (const r of f.runners.slice(0, 2)) expect((await r.runOnce()).phase).toBe("ok");
  }, 60_000);

  it("nondeterminism within tolerance (logprob jitter, a late token) never makes a node suspect", async () => {
    const f = await fleetOf(3, "m@noise");
    for (const r of f.runners) for (let i = 0; i < 2; i++) await r.runOnce();
    await publishExpectations(client.redis, f.keys, f.writer, TOL, Date.now(), 60_000);
    for (const s of f.servers) await s.setMode({ noise: 1 });
    for (let i = 0; i < 20; i++) for (const r of f.runners) expect((await r.runOnce()).phase).toBe("ok");
  }, 60_000);

  it("answers older than the window have no vote; an operator's record wins, and most nodes disagreeing caps it", async () => {
    const f = await fleetOf(3, "m@op");
    for (const r of f.runners) await r.runOnce();
    expect(await readNodeAnswers(client.redis, f.keys, Date.now() + 120_000, 60_000)).toEqual([]);
    await recordExpectation(client.redis, f.keys, "m@op", { a1: { text: " wrong", tokens: [" wrong"], logprobs: [-0.1] } }, Date.now());
    const r = await publishExpectations(client.redis, f.keys, f.writer, TOL, Date.now(), 60_000);
    expect(r.expectations["m@op"]).toMatchObject({ source: "operator", capped: true, agreeing: 0 });
    // The next round runs the second set (nothing recorded for it), the one after the first: capped, not drained.
    await f.runners[0].runOnce();
    expect((await f.runners[0].runOnce()).phase).toBe("capped");
  }, 60_000);

  it("llm-ha canary record takes the fleet's majority (or one node's answers) as the expectation; show lists it", async () => {
    const f = await fleetOf(2, "m@cli");
    for (const r of f.runners) await r.runOnce();
    const flags = ["--redis-url", server.url, "--cluster", f.keys.cluster];
    const rec = await runInProcess(main, ["canary", "record", ...flags], { cleanLlmha: true });
    expect([rec.code, rec.stdout]).toEqual([0, expect.stringContaining("recorded 3 canary answers for m@cli from the majority of 2 nodes")]);
    expect(await client.redis.hexists(f.keys.canaryRecorded, "m:m@cli")).toBe(1);
    const bad = await runInProcess(main, ["canary", "record", "--node", "nope", ...flags], { cleanLlmha: true });
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("node nope has no recent canary answers")]);
    await publishExpectations(client.redis, f.keys, f.writer, TOL, Date.now(), 60_000);
    const show = await runInProcess(main, ["canary", "show", ...flags], { cleanLlmha: true });
    expect(show.stdout).toContain("m@cli: operator since");
    // Three CLI processes: on a loaded machine each takes seconds to start.
  }, 180_000);
});
