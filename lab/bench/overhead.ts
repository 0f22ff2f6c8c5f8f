/**
 * The agent's own cost on a GPU node: CPU (share of one core) and resident memory of the compiled
 * agent (what the image runs) at its default periods with 8 GPUs and every signal on (nvidia-smi,
 * PCI, XID log, drain file, engine metrics, model check, probe, deep check, canaries), and the CPU
 * of its nvidia-smi children, against the goal: ≤ 0.5 % of a core and ≤ 60 MiB.
 *
 * `npm run bench -- --only overhead` (5 minutes; `--quick`: 15 s). Set `LLMHA_BENCH_CPU_PROF` to a
 * folder to have the agent write a V8 CPU profile there (`node --cpu-prof`) when it stops.
 */
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import { BUILT_CLI, SimNode } from "../sim/sim-node";
import { end, start, type Proc } from "../sim/node-proc";
import { sleep, waitFor } from "../../agent/src/util/net";
import { liveChildrenCpu, procUsage } from "./proc";
import { builtCli } from "./built";

/** The goal the figure is held to (share of one core, MiB of peak resident memory). */
export const OVERHEAD_GOAL = { cpuPct: 0.5, rssMiB: 60 } as const;

export interface OverheadResult {
  seconds: number;
  runtime: string;
  /** The agent process itself, % of one core over the window. */
  cpuPct: number;
  /** Peak resident set (VmHWM) of the agent, MiB. */
  rssMiB: number;
  /** Resident set at the end of the window, MiB. */
  rssNowMiB: number;
  /** Its nvidia-smi children (those that ended and those still running), % of one core over the window. */
  childrenCpuPct: number;
  goal: typeof OVERHEAD_GOAL;
  met: boolean;
}

export interface OverheadOptions {
  seconds: number;
  /** Folder of the node's files (state file, logs). */
  dir: string;
  log: (line: string) => void;
  /** Extra agent settings (e.g. `LLMHA_GPU_QUERY: "per-tick"` for the figure before the stream). */
  env?: Record<string, string>;
  /** Another compiled CLI to measure (an older build, to compare in the same window); default the checkout's `dist/`. */
  cli?: string;
}

const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** Starts one simulated 8-GPU node, lets it settle, and measures the agent over `seconds`. */
export async function measureOverhead(o: OverheadOptions): Promise<OverheadResult> {
  const built = builtCli(o.log) !== null;
  const prof = process.env.LLMHA_BENCH_CPU_PROF;
  // The node's inference server and fakes; the agent is started here (node flags such as
  // --cpu-prof are refused in NODE_OPTIONS), with the environment the node gives it.
  const n = await SimNode.start({ id: "gpu-overhead", az: "az-a", dir: o.dir, gpuCount: 8, built, env: o.env, noAgent: true });
  let agent: Proc | null = null;
  try {
    const cli = o.cli ? [o.cli] : built ? [BUILT_CLI] : ["--import", "tsx", join(__dirname, "..", "..", "agent", "src", "cli.ts")];
    const log = createWriteStream(join(o.dir, "gpu-overhead-agent.log"));
    agent = start(process.execPath, [...(prof ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : []), ...cli, "agent"], n.agentEnv(), log);
    await waitFor("the agent's /livez", async () => (await fetch(`${n.agentUrl}/livez`, { signal: AbortSignal.timeout(500) }).catch(() => null))?.ok ?? false, { timeoutMs: 45_000, everyMs: 100 });
    // Past start-up and the deep check (dcgmi diag, smoke, the first canary round).
    await sleep(5000);
    const pid = agent.child.pid!;
    const sum = (m: Map<number, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
    const live0 = sum(liveChildrenCpu(pid));
    const t0 = procUsage(pid);
    const w0 = performance.now();
    await sleep(o.seconds * 1000);
    const t1 = procUsage(pid);
    const live1 = sum(liveChildrenCpu(pid));
    const wall = (performance.now() - w0) / 1000;
    const cpuPct = round(((t1.cpuS - t0.cpuS) / wall) * 100, 2);
    const rssMiB = round(t1.hwm / 2 ** 20, 1);
    const r: OverheadResult = {
      seconds: o.seconds,
      runtime: built ? "node dist (compiled)" : "node --import tsx (run npm run build for the compiled figure)",
      cpuPct,
      rssMiB,
      rssNowMiB: round(t1.rss / 2 ** 20, 1),
      // Children waited for in the window, plus what living ones (the stream) used in it.
      childrenCpuPct: round(((t1.childrenCpuS - t0.childrenCpuS + live1 - live0) / wall) * 100, 2),
      goal: OVERHEAD_GOAL,
      met: cpuPct <= OVERHEAD_GOAL.cpuPct && rssMiB <= OVERHEAD_GOAL.rssMiB,
    };
    o.log(
      `overhead (${o.seconds} s, 8 GPUs, every signal on): agent ${r.cpuPct}% of a core, peak RSS ${r.rssMiB} MiB (${r.runtime}); ` +
        `nvidia-smi children ${r.childrenCpuPct}%; goal ≤ ${OVERHEAD_GOAL.cpuPct}% and ≤ ${OVERHEAD_GOAL.rssMiB} MiB: ${r.met ? "met" : "NOT met"}`,
    );
    return r;
  } finally {
    await end(agent, "SIGTERM", 10_000);
    await n.stop();
  }
}
