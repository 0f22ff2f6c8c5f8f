import { describe, expect, it } from "vitest";
import { runEdgeBench } from "../../lab/bench/edge";
import { goalLines, runContinuationBench, type ContinuationGoal } from "../../lab/bench/continuation";

// The bench's figures are the docs' (docs/bench.md); here only that it measures what it says:
// both proxies answer every request with 200 (the edge with the bench's key), and each side
// has its latency and its requests per CPU second of the proxy.
describe("npm run bench -- --only edge", () => {
  it("drives plain and edge proxies to 200s and reports latency at one in flight and throughput per proxy CPU", async () => {
    const r = (await runEdgeBench({ rounds: 1, secondsPerRound: 1, concurrency: 4, log: () => undefined })) as {
      latency: Record<"plain" | "edge", { n: number; errors: number; p50Ms: number }>;
      throughput: Record<"plain" | "edge", { n: number; errors: number; perProxyCpuS: number | null }> & { perProxyCpuRatio: number | null };
      addedP50Ms: number | null;
    };
    for (const side of ["plain", "edge"] as const) {
      expect(r.latency[side].errors).toBe(0);
      expect(r.throughput[side].errors).toBe(0);
      expect(r.latency[side].n).toBeGreaterThan(50);
      expect(r.throughput[side].n).toBeGreaterThan(50);
      expect(r.latency[side].p50Ms).toBeGreaterThan(0);
    }
    expect(typeof r.addedP50Ms).toBe("number");
    expect(r.throughput.perProxyCpuRatio).toBeGreaterThan(0);
  }, 60_000);
});

// HAProxy sends with MSG_MORE unless told `option http-no-delay`, and the kernel then holds each
// small chunk up to 200 ms: a token stream through L1 arrived 206 ms late per chunk and per
// first token, 412 ms through the continuation relay (two passes through HAProxy).
describe("npm run bench -- --only continuation", () => {
  it("streams chunk by chunk through HAProxy and through the relay: no 200 ms hold per chunk", async () => {
    const r = (await runContinuationBench({ streams: 5, chunks: 10, chunkMs: 100, rounds: 2, nbthread: 1, log: () => undefined })) as {
      perChunkMs: { plainP50: number; relayedP50: number };
      goals: ContinuationGoal[];
      nbthread: number;
    };
    expect(r.perChunkMs.plainP50).toBeLessThan(50);
    expect(r.perChunkMs.relayedP50).toBeLessThan(50);
    // Every figure beside its goal and the direct path's of the same run.
    expect(r.goals.map((g) => g.figure)).toEqual(["per request p50, one in flight", "per request p50, 5 streams (cold)", "per chunk p50, one in flight", "per chunk p99, one in flight", "per chunk p99, 5 streams (cold)"]);
    for (const g of r.goals) {
      expect(g.addedMs).toBeCloseTo(g.relayedMs - g.directMs, 2);
      expect(g.met).toBe(g.addedMs <= g.goalAddedMs);
    }
    // Under load each round's own figure too (the spread a single figure near its goal hides); at one in flight, none.
    expect(r.goals.map((g) => g.roundsAddedMs?.length ?? 0)).toEqual([0, 2, 0, 0, 2]);
    expect(goalLines("continuation", r.goals)[4]).toMatch(/^continuation: per chunk p99, 5 streams \(cold\): [+-]?[\d.]+ ms added \(goal ≤ 5 ms; direct [\d.]+ ms, relayed [\d.]+ ms; rounds [+-][\d.]+, [+-][\d.]+ ms\) met: (true|false)$/);
    expect(goalLines("continuation", r.goals)[0]).toMatch(/^continuation: per request p50, one in flight: [+-]?[\d.]+ ms added \(goal ≤ 1 ms; direct [\d.]+ ms, relayed [\d.]+ ms\) met: (true|false)$/);
    expect(r.nbthread).toBe(1);
  }, 180_000);
});
