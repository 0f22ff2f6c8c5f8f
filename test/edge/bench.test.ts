import { describe, expect, it } from "vitest";
import { runEdgeBench } from "../../lab/bench/edge";

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
