/**
 * What every engine and simulated process shares: stopping a child (SIGTERM, then
 * SIGKILL after a grace period, waiting for the exit) and the error for a missing binary.
 */
import type { ChildProcess } from "node:child_process";

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
