/**
 * `npm run bench`: every measured figure as one JSON document on stdout (progress on
 * stderr). `--quick` runs few trials; `--only l1|overhead|fleet|scale|edge|standby|continuation`; `--out FILE` also writes it.
 * Builds the agent first so the overhead figure is the compiled agent the image runs.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runL1Bench } from "./agent-l1";
import { didYouMean } from "../../contracts/did-you-mean";

const USAGE = `Usage: llm-ha bench [--quick] [--only l1|overhead|fleet|scale|edge|standby|continuation] [--out FILE]
                 [--sizes 500,1000,2000] [--leader-period MS] [--no-early] [--plot FILE.svg]
                 [--baseline-cli OLD/dist/agent/src/cli.js]   (also: npm run bench)

Every measured figure as one JSON document on stdout, progress on stderr (docs/bench.md).
Builds the agent first, so the overhead figure is the compiled agent the image runs.
--sizes: the fleet sizes of the scale section (default 500,1000,2000; --quick 500,1000).
--leader-period: the scale section's controller period (default 1000 ms, the controller's default).
--baseline-cli: the overhead section also measures that compiled CLI (an older build, with its node_modules
  beside it) in the same window, so the figure stands beside its baseline on the same machine and load.
--no-early: the scale section's leader without its early look (decisions wait for the period: the figure before it).
--plot: also draw the scale section's growth as an SVG (docs/bench-scale.svg).
`;
const FLAGS = ["--quick", "--only", "--out", "--sizes", "--plot", "--leader-period", "--no-early", "--baseline-cli", "--help"];
const VALUED = ["--only", "--out", "--sizes", "--plot", "--leader-period", "--baseline-cli"];

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(USAGE);
    return;
  }
  const unknown = argv.find((a, i) => a.startsWith("-") && !FLAGS.includes(a) && !VALUED.includes(argv[i - 1]));
  if (unknown) {
    process.stderr.write(`llm-ha bench: unknown flag ${unknown}${didYouMean(unknown, FLAGS)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const quick = argv.includes("--quick");
  const only = argv.includes("--only") ? argv[argv.indexOf("--only") + 1] : null;
  const outFile = argv.includes("--out") ? argv[argv.indexOf("--out") + 1] : null;
  const sizesArg = argv.includes("--sizes") ? argv[argv.indexOf("--sizes") + 1] : null;
  const sizes = sizesArg ? sizesArg.split(",").map(Number) : null;
  if (sizes && !sizes.every((n) => Number.isInteger(n) && n >= 3 && n <= 20_000)) {
    process.stderr.write(`llm-ha bench: --sizes takes node counts from 3 to 20000, comma separated; got ${JSON.stringify(sizesArg)}\n`);
    process.exitCode = 2;
    return;
  }
  const periodArg = argv.includes("--leader-period") ? Number(argv[argv.indexOf("--leader-period") + 1]) : undefined;
  if (periodArg !== undefined && !(Number.isInteger(periodArg) && periodArg >= 100 && periodArg <= 10_000)) {
    process.stderr.write("llm-ha bench: --leader-period takes milliseconds from 100 to 10000\n");
    process.exitCode = 2;
    return;
  }
  const plot = argv.includes("--plot") ? argv[argv.indexOf("--plot") + 1] : undefined;
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
    const baselineCli = argv.includes("--baseline-cli") ? argv[argv.indexOf("--baseline-cli") + 1] : null;
    const seconds = quick ? 15 : 300;
    try {
      const [now, before] = await Promise.all([
        measureOverhead({ seconds, dir, log }),
        baselineCli ? measureOverhead({ seconds, dir: mkdtempSync(join(dir, "baseline-")), cli: baselineCli, log: (l) => log(`baseline ${baselineCli}: ${l}`) }) : null,
      ]);
      result.overhead = before ? { ...now, baseline: { cli: baselineCli, ...before } } : now;
      if (before) log(`overhead: agent ${now.cpuPct}% of a core (baseline ${before.cpuPct}%, goal ≤ ${now.goal.cpuPct}%), peak RSS ${now.rssMiB} MiB (baseline ${before.rssMiB} MiB, goal ≤ ${now.goal.rssMiB} MiB): ${now.met ? "met" : "NOT met"}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if ((!only || only === "fleet") && existsSync(join(__dirname, "fleet.ts"))) {
    log("fleet: takeover times and registry scale");
    const { runFleetBench } = (await import("./fleet.js")) as { runFleetBench: (o: { quick?: boolean }) => Promise<Record<string, unknown>> };
    result.fleet = await runFleetBench({ quick });
  }
  if (!only || only === "scale") {
    log("scale: one leader over 500 to 2,000 simulated agents (--quick: 500 and 1,000), an AZ fault at each size");
    const { runScaleBench } = await import("./scale.js");
    result.scale = await runScaleBench({ sizes: sizes ?? (quick ? [500, 1000] : [500, 1000, 2000]), steadyS: quick ? 5 : 15, faults: quick ? 2 : 4, silentFault: !quick, log, svgOut: plot, leaderPeriodMs: periodArg, early: !argv.includes("--no-early") });
  }
  if (!only || only === "edge") {
    log("edge: what client authentication and limits add per request at the proxy");
    const { runEdgeBench } = await import("./edge.js");
    result.edge = await runEdgeBench(quick ? { rounds: 2, secondsPerRound: 2, concurrency: 8, log } : { rounds: 6, secondsPerRound: 4, concurrency: 8, log });
  }
  if (!only || only === "continuation") {
    log("continuation: what llm-ha continue adds to streams nobody cut, against HAProxy alone");
    const { runContinuationBench, goalLines } = await import("./continuation.js");
    // HAProxy at the L1 pod's threads (nbthread from its CPU limit, infra/workloads/l1-proxy.ts).
    const { l1Nbthread, l1RelayWorkers } = await import("../../infra/workloads/l1-proxy.js");
    const nbthread = l1Nbthread();
    // And the relay's processes as the pod runs them by default (`llm-ha:haproxy.relayWorkers`).
    const workers = l1RelayWorkers();
    const show = (name: string, r: Record<string, unknown>): void => {
      for (const l of goalLines(name, r.goals as Parameters<typeof goalLines>[1])) log(l);
    };
    // The goal is stated at 1,000 concurrent streams: 10 s streams arriving over 5 s (200 a second),
    // all open together for the second half. At 4 tokens/s each (4,000 chunks/s in all) the
    // 2-core machine that runs the client, HAProxy, the relay and the stub is not saturated; at 20
    // tokens/s each (20,000/s) HAProxy alone already delays a chunk by ~110 ms p50 there.
    result.continuation = await runContinuationBench(quick ? { streams: 50, chunks: 50, chunkMs: 20, rounds: 2, nbthread, workers, log } : { streams: 1000, chunks: 40, chunkMs: 250, rounds: 3, nbthread, workers, log });
    show("continuation", result.continuation as Record<string, unknown>);
    // The same 1,000 open at once under constant arrivals (a pod in service): idle connections reused.
    if (!quick) {
      result.continuationSteady = await runContinuationBench({ streams: 1000, chunks: 40, chunkMs: 250, rounds: 2, arrivals: "steady", nbthread, workers, log });
      show("continuationSteady", result.continuationSteady as Record<string, unknown>);
    }
    // The design not taken: the relay straight to the server, HAProxy's second pass skipped (its health checks,
    // agent weights, retries and per-server queue with it). Measured so the price of that pass is a figure.
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
