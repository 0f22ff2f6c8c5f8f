/**
 * `npm run bench`: every measured figure as one JSON document on stdout (progress on
 * stderr). `--quick` runs few trials; `--only l1|overhead|fleet|edge|standby|continuation`; `--out FILE` also writes it.
 * Builds the agent first so the overhead figure is the compiled agent the image runs.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runL1Bench } from "./agent-l1";
import { didYouMean } from "../../contracts/did-you-mean";

const USAGE = `Usage: llm-ha bench [--quick] [--only l1|overhead|fleet|edge|standby|continuation] [--out FILE]   (also: npm run bench)

Every measured figure as one JSON document on stdout, progress on stderr (docs/bench.md).
Builds the agent first, so the overhead figure is the compiled agent the image runs.
`;
const FLAGS = ["--quick", "--only", "--out", "--help"];

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(USAGE);
    return;
  }
  const unknown = argv.find((a, i) => a.startsWith("-") && !FLAGS.includes(a) && !["--only", "--out"].includes(argv[i - 1]));
  if (unknown) {
    process.stderr.write(`llm-ha bench: unknown flag ${unknown}${didYouMean(unknown, FLAGS)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const quick = argv.includes("--quick");
  const only = argv.includes("--only") ? argv[argv.indexOf("--only") + 1] : null;
  const outFile = argv.includes("--out") ? argv[argv.indexOf("--out") + 1] : null;
  const log = (l: string): void => void process.stderr.write(`[bench] ${l}\n`);
  log("building the agent (npm run build)");
  execFileSync("npm", ["run", "-s", "build"], { cwd: join(__dirname, "..", ".."), stdio: "inherit" });
  const result: Record<string, unknown> = { startedAt: new Date().toISOString(), quick, machine: { cpus: (await import("node:os")).cpus().length, node: process.version } };
  if (!only || only === "l1") {
    log("L1: fault → /readyz and HAProxy, against httpchk baselines");
    result.l1 = await runL1Bench(quick ? { trials: 3, overheadSeconds: 15, log } : { trials: 20, overheadSeconds: 300, log });
  }
  if (only === "overhead") {
    // The agent's overhead alone (the same figure as l1's): 5 minutes, 15 s with --quick.
    log("overhead: the agent's CPU and memory with 8 GPUs, every signal on, against its goal");
    const { measureOverhead } = await import("./overhead.js");
    const dir = mkdtempSync(join(tmpdir(), "llmha-bench-overhead-"));
    try {
      result.overhead = await measureOverhead({ seconds: quick ? 15 : 300, dir, log });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if ((!only || only === "fleet") && existsSync(join(__dirname, "fleet.ts"))) {
    log("fleet: takeover times and registry scale");
    const { runFleetBench } = (await import("./fleet.js")) as { runFleetBench: (o: { quick?: boolean }) => Promise<Record<string, unknown>> };
    result.fleet = await runFleetBench({ quick });
  }
  if (!only || only === "edge") {
    log("edge: what client authentication and limits add per request at the proxy");
    const { runEdgeBench } = await import("./edge.js");
    result.edge = await runEdgeBench(quick ? { rounds: 2, secondsPerRound: 2, concurrency: 8, log } : { rounds: 6, secondsPerRound: 4, concurrency: 8, log });
  }
  if (!only || only === "continuation") {
    log("continuation: what llm-ha continue adds to streams nobody cut, against HAProxy alone");
    const { runContinuationBench } = await import("./continuation.js");
    // The goal is stated at 1,000 concurrent streams: 10 s streams arriving over 5 s (200 a second),
    // all open together for the second half. At 4 tokens/s each (4,000 chunks/s in all) the
    // 2-core machine that runs the client, HAProxy, the relay and the stub is not saturated; at 20
    // tokens/s each (20,000/s) HAProxy alone already delays a chunk by ~110 ms p50 there.
    result.continuation = await runContinuationBench(quick ? { streams: 50, chunks: 50, chunkMs: 20, rounds: 2, log } : { streams: 1000, chunks: 40, chunkMs: 250, rounds: 3, log });
    // The same 1,000 open at once under constant arrivals (a pod in service): idle connections reused.
    if (!quick) result.continuationSteady = await runContinuationBench({ streams: 1000, chunks: 40, chunkMs: 250, rounds: 2, arrivals: "steady", log });
    // The design not taken: the relay straight to the server, HAProxy's second pass skipped (its health checks,
    // agent weights, retries and per-server queue with it). Measured so the price of that pass is a figure.
    if (!quick) result.continuationToServer = await runContinuationBench({ streams: 1000, chunks: 40, chunkMs: 250, rounds: 2, relayTo: "server", log });
  }
  if (!only || only === "standby") {
    log("standby: wake-up of the standby AZ on the drill's real pieces");
    const { runStandbyBench } = await import("./standby.js");
    result.standby = await runStandbyBench({ runs: quick ? 2 : 5, log });
  }
  result.finishedAt = new Date().toISOString();
  const text = JSON.stringify(result, null, 2) + "\n";
  if (outFile) writeFileSync(outFile, text);
  process.stdout.write(text);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
