import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { collectDefaultMetrics, Registry as IndexRegistry } from "prom-client";
import { AgentMetrics } from "../../agent/src/node/reporters/metrics";

const REPO = join(__dirname, "..", "..");

describe("what the node agent loads and exports (its memory budget, docs/bench.md)", () => {
  it("a standalone agent loads no Redis client, no JWT library, no OpenTelemetry, no cloud SDK", () => {
    // A fresh process, as the image starts one: main's module graph before any setting is read.
    const script = `require(${JSON.stringify(join(REPO, "agent/src/main.ts"))}); const heavy = Object.keys(require.cache).filter((k) => /node_modules\\/(@opentelemetry|ioredis|jose|@aws-sdk|kafkajs)\\//.test(k)); process.stdout.write(JSON.stringify(heavy));`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "-e", script], { cwd: REPO, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual([]);
  });

  it("keeps every process series of prom-client's default metrics, under the same names", async () => {
    const ours = new AgentMetrics("n1", "az-a").registry;
    const theirs = new IndexRegistry();
    collectDefaultMetrics({ register: theirs, prefix: "llmha_process_" });
    const names = (r: { getMetricsAsJSON(): Promise<{ name: string }[]> }) => r.getMetricsAsJSON().then((m) => m.map((x) => x.name));
    const mine = new Set(await names(ours));
    const missing = (await names(theirs)).filter((n) => !mine.has(n));
    expect(missing).toEqual([]);
    const text = await ours.metrics();
    expect(text).toMatch(/llmha_process_process_cpu_seconds_total\{[^}]*\} \d/);
    expect(text).toMatch(/llmha_process_process_resident_memory_bytes\{[^}]*\} \d+/);
  });
});
