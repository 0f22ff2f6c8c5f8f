/**
 * Engine-reported corruption as a canary trigger: vLLM's `vllm:corrupted_requests` counter read
 * with the engine's metrics (`_total` or bare, null when absent); a rise since the last canary
 * round forces one round at once — one per rise, a floor between forced rounds, never two rounds
 * at once — and a restarted engine's reset to 0 is no rise. Pure steps on a made-up clock, then
 * the runner's own loop against a fake vLLM server.
 */
import { Registry } from "prom-client";
import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { corruptedRead, corruptedRoundRan, INITIAL_CORRUPTED_WATCH, type CorruptedWatch } from "../../agent/src/node/canary/corrupted";
import { CanaryRunner } from "../../agent/src/node/canary/runner";
import { parseEngineMetrics } from "../../agent/src/node/sources/engine-metrics";
import { request } from "../../agent/src/node/sources/inference";
import { createLogger, type Logger } from "../../agent/src/util/log";
import { sleep, waitFor } from "../../agent/src/util/net";
import { setFakeInferenceMode, startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";

const fakes: FakeInference[] = [];
const runners: CanaryRunner[] = [];
afterAll(async () => {
  for (const r of runners) r.stop();
  await Promise.all(fakes.map((f) => f.close()));
});

const VLLM = (corrupted: string): string =>
  `# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0",model_name="m"} 0.0\nvllm:num_requests_running{engine="0",model_name="m"} 1.0\nvllm:generation_tokens_total{engine="0",model_name="m"} 40.0\n${corrupted}`;

describe("the engine's corrupted-requests counter", () => {
  it("reads vllm:corrupted_requests_total, or the bare name; null when absent, and for other families", () => {
    expect(parseEngineMetrics(VLLM(`# TYPE vllm:corrupted_requests_total counter\nvllm:corrupted_requests_total{engine="0",model_name="m"} 3.0\nvllm:corrupted_requests_created{engine="0",model_name="m"} 1.76e9\n`))?.corruptedRequests).toBe(3);
    expect(parseEngineMetrics(VLLM(`vllm:corrupted_requests{engine="0",model_name="m"} 2\nvllm:corrupted_requests{engine="1",model_name="m"} 5\n`))?.corruptedRequests).toBe(7);
    // An older vLLM: the rest reads as before, the signal is simply absent.
    const old = parseEngineMetrics(VLLM(""));
    expect(old).toMatchObject({ family: "vllm", waiting: 0, running: 1, tokensTotal: 40, corruptedRequests: null });
    const tgi = parseEngineMetrics("tgi_queue_size 1\ntgi_batch_current_size 2\ntgi_batch_inference_count 9\nvllm:corrupted_requests_total 4\n");
    expect(tgi).toMatchObject({ family: "tgi", corruptedRequests: null });
  });

  it("the fake vLLM exports it from its corruptedRequests setting (admin API), and not at all when null", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m" });
    fakes.push(f);
    const read = async (): Promise<number | null | undefined> => {
      const r = await request(`${f.url}/metrics`, 2000);
      return "text" in r ? parseEngineMetrics(r.text)?.corruptedRequests : undefined;
    };
    expect(await read()).toBe(0);
    await setFakeInferenceMode(f.adminUrl, { corruptedRequests: 4 });
    expect(await read()).toBe(4);
    await f.setMode({ corruptedRequests: null });
    expect(await read()).toBeNull();
    await expect(setFakeInferenceMode(f.adminUrl, { corruptedRequests: -1 })).rejects.toThrow(/corruptedRequests must be an integer >= 0/);
  });
});

describe("a rise forces one round (pure steps)", () => {
  const FLOOR = 3000;
  /** Reads in turn at `at`, a round run right after each forced one when `runs`; the forced rises. */
  function feed(values: (number | null)[], at: (i: number) => number, runs = true, w0: CorruptedWatch = INITIAL_CORRUPTED_WATCH): { forced: { i: number; rise: number; total: number }[]; w: CorruptedWatch } {
    let w = w0;
    const forced: { i: number; rise: number; total: number }[] = [];
    values.forEach((v, i) => {
      const r = corruptedRead(w, v, at(i), FLOOR);
      w = r.watch;
      if (r.force) forced.push({ i, ...r.force });
      if (r.force && runs) w = corruptedRoundRan(w);
    });
    return { forced, w };
  }
  const every = (ms: number) => (i: number) => 1_000_000 + i * ms;

  it("the count at start-up is the baseline; steady is nothing; a rise is one forced round, then its count is the baseline", () => {
    expect(feed([7, 7, 7], every(200)).forced).toEqual([]);
    expect(feed([7, 7, 9, 9, 9], every(200)).forced).toEqual([{ i: 2, rise: 2, total: 9 }]);
    // Rises while the forced round has not run yet ask for nothing more; once it ran, its count is checked.
    const waiting = feed([0, 2, 3, 5], every(5000), false);
    expect(waiting.forced).toEqual([{ i: 1, rise: 2, total: 2 }]);
    expect(feed([5, 5], every(5000), true, corruptedRoundRan(waiting.w)).forced).toEqual([]);
  });

  it("a restarted engine (the counter back to 0) is no rise; what it counts after is", () => {
    expect(feed([12, 0, 0, 0], every(5000)).forced).toEqual([]);
    expect(feed([12, 0, 1], every(5000)).forced).toEqual([{ i: 2, rise: 1, total: 1 }]);
    // A restart while a rise waits for its round: the rise stands, the baseline follows the counter.
    expect(feed([12, 15, 0], every(5000), false).forced).toEqual([{ i: 1, rise: 3, total: 15 }]);
  });

  it("absent (older vLLM, a failed read) is nothing, and the counter coming back unchanged is no rise", () => {
    expect(feed([null, null], every(200)).forced).toEqual([]);
    expect(feed([4, null, 4, null, 4], every(5000)).forced).toEqual([]);
    expect(feed([4, null, 6], every(5000)).forced).toEqual([{ i: 2, rise: 2, total: 6 }]);
  });

  it("a counter climbing on every read forces at most one round per floor", () => {
    // Reads every 200 ms for 10 s, one more corrupted request each time.
    const values = Array.from({ length: 51 }, (_, i) => i);
    const { forced } = feed(values, every(200));
    expect(forced.map((f) => f.i * 200)).toEqual([200, 3200, 6200, 9200]);
    // A rise inside the floor is not lost: it is checked once the floor is over.
    expect(forced.map((f) => f.rise)).toEqual([1, 15, 15, 15]);
  });
});

/** A logger whose lines the test reads back. */
function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ level: "info", destination }), lines };
}

async function rounds(reg: Registry): Promise<Record<string, number>> {
  const m = await reg.getSingleMetric("llmha_canary_rounds_total")!.get();
  return Object.fromEntries(m.values.map((v) => [String(v.labels.trigger), v.value]));
}

async function runnerOn(f: FakeInference, forcedFloorMs: number): Promise<{ runner: CanaryRunner; reg: Registry; lines: Record<string, unknown>[] }> {
  const reg = new Registry();
  const { log, lines } = capturingLogger();
  const runner = new CanaryRunner({
    kind: "vllm",
    baseUrl: f.url,
    nodeId: "n1",
    az: "az-a",
    // Far beyond the test: any round after the first is a forced one.
    intervalMs: 600_000,
    maxTokens: 12,
    timeoutMs: 3000,
    forcedFloorMs,
    tolerance: { prefixTokens: 8, logprobDelta: 0.1 },
    served: () => ({ id: "m", key: "m@r1" }),
    ready: () => true,
    serverStarts: () => 1,
    fleet: () => null,
    log,
    registry: reg,
    onChange: () => undefined,
  });
  runners.push(runner);
  runner.start();
  // The first round runs at start and ends with the answers self-checked (logprobs finite).
  await waitFor("the first round", () => runner.state.phase === "ok", { timeoutMs: 10_000 });
  return { runner, reg, lines };
}

describe("the runner's loop against a fake vLLM", () => {
  it("a rise makes one round at once, logged with why; the same count again, or a reset, makes none", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m", tokenMs: 1 });
    fakes.push(f);
    const { runner, reg, lines } = await runnerOn(f, 3000);
    runner.engineCorrupted(0);
    runner.engineCorrupted(2);
    await waitFor("the forced round", async () => (await rounds(reg))["engine-corrupted"] === 1, { timeoutMs: 5000 });
    for (let i = 0; i < 5; i++) runner.engineCorrupted(2);
    runner.engineCorrupted(0);
    await sleep(300);
    expect(await rounds(reg)).toEqual({ interval: 1, suspect: 0, "engine-corrupted": 1, "deep-check": 0 });
    expect(lines.find((l) => l.event === "canary-trigger")).toMatchObject({ trigger: "engine-corrupted", rise: 2, msg: expect.stringContaining("engine reported 2 corrupted requests") });
    expect(lines.find((l) => l.event === "canary" && l.trigger === "engine-corrupted")).toMatchObject({ outcome: "match", to: "ok" });
    // The rise alone changes nothing: the answers were right.
    expect(runner.state.phase).toBe("ok");
  }, 30_000);

  it("a counter climbing on every read: forced rounds at most one per floor", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m", tokenMs: 1 });
    fakes.push(f);
    const { runner, reg } = await runnerOn(f, 500);
    const t0 = Date.now();
    for (let n = 0; Date.now() - t0 < 1600; n++) {
      runner.engineCorrupted(n);
      await sleep(20);
    }
    await sleep(200);
    // Rises at about 0.02, 0.52, 1.02 and 1.52 s: four at most, however many reads climbed.
    const forced = (await rounds(reg))["engine-corrupted"];
    expect(forced).toBeGreaterThanOrEqual(2);
    expect(forced).toBeLessThanOrEqual(4);
  }, 30_000);

  it("a SUSPECT node's re-check runs right after its round, not a period later; a rise then asks for nothing more", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m", tokenMs: 1 });
    fakes.push(f);
    const { runner, reg } = await runnerOn(f, 3000);
    await f.setMode({ corruption: "nan" });
    runner.engineCorrupted(0);
    runner.engineCorrupted(1);
    await waitFor("mismatch", () => runner.state.phase === "mismatch", { timeoutMs: 5000 });
    expect(await rounds(reg)).toEqual({ interval: 1, suspect: 1, "engine-corrupted": 1, "deep-check": 0 });
  }, 30_000);
});
