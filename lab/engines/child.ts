/**
 * What every engine and simulated process shares: stopping a child (SIGTERM, then
 * SIGKILL after a grace period, waiting for the exit), pausing one (SIGSTOP, waiting until it
 * has stopped) and the error for a missing binary.
 */
import type { ChildProcess } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** A binary an engine needs is not installed; names the Debian packages to install. */
export class EngineMissingError extends Error {
  constructor(what: string, aptPackages: string) {
    super(`${what} not found: install it with \`apt-get install -y ${aptPackages}\``);
    this.name = "EngineMissingError";
  }
}

/** True while the child has neither exited nor been killed by a signal. */
export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * Stops a child: `signal` (SIGTERM by default), SIGKILL after `graceMs`, resolves once it
 * has exited. A stopped (SIGSTOP) child gets SIGCONT first, or it could not act on SIGTERM.
 */
export async function stopChild(child: ChildProcess, { signal = "SIGTERM", graceMs = 3000 }: { signal?: NodeJS.Signals; graceMs?: number } = {}): Promise<void> {
  if (!isRunning(child)) return;
  const gone = new Promise<void>((r) => child.once("exit", () => r()));
  if (signal !== "SIGKILL") child.kill("SIGCONT");
  child.kill(signal);
  const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await gone;
  clearTimeout(t);
}

/** The state letter of each thread of `pid` (the third field of each task's `stat` under `/proc/<pid>/task`); empty once it is gone. */
export function threadStates(pid: number): string[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const t of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8");
      out.push(stat[stat.lastIndexOf(")") + 2]);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * SIGSTOP `pid` and resolve once every one of its threads has stopped. `kill` returns when the
 * signal is queued, not when the process has stopped: one thread takes the signal and stops the
 * others, which run on until then. Measured beside the unit tier: librdkafka's mock cluster (8
 * threads) was not wholly stopped right after `kill` in 178 of 300 tries, for up to 5 ms — long
 * enough for a broker thread to acknowledge a produce sent after the pause.
 */
export async function pauseProcess(pid: number, timeoutMs = 5000): Promise<void> {
  process.kill(pid, "SIGSTOP");
  const until = Date.now() + timeoutMs;
  for (;;) {
    // T: stopped by a signal; t: stopped under a tracer; Z/X: a thread that has ended.
    if (threadStates(pid).every((s) => s === "T" || s === "t" || s === "Z" || s === "X")) return;
    if (Date.now() > until) throw new Error(`process ${pid} had not stopped ${timeoutMs} ms after SIGSTOP`);
    await new Promise((r) => setTimeout(r, 1));
  }
}
