/**
 * Runs one of the node's tools (nvidia-smi, dcgmi) the way the agent must: no shell, the minimal
 * child environment (`childEnv`: none of the agent's settings or secrets), output capped, and
 * SIGKILLed after a time limit. The answer always comes, whatever the child does.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { childEnv } from "./child-env";

export interface ToolRun {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** The child could not be started (`ENOENT`: no such file). */
  spawnError?: NodeJS.ErrnoException;
}

export interface ToolRunOptions {
  /** Read standard error (else it goes nowhere). */
  stderr?: boolean;
  /** Called with the child killed at the time limit (one in D state may outlive the kill). */
  onTimeout?: (child: ChildProcess) => void;
}

const STDOUT_CAP = 1_000_000;
const STDERR_CAP = 100_000;

export function runTool(path: string, args: readonly string[], timeoutMs: number, o: ToolRunOptions = {}): Promise<ToolRun> {
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn(path, [...args], { stdio: ["ignore", "pipe", o.stderr ? "pipe" : "ignore"], env: childEnv() });
    } catch (e) {
      resolve({ code: null, stdout: "", stderr: "", timedOut: false, spawnError: e as NodeJS.ErrnoException });
      return;
    }
    let stdout = "";
    let stderr = "";
    let done = false;
    const finish = (r: ToolRun): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const timer = setTimeout(() => {
      o.onTimeout?.(child);
      child.kill("SIGKILL");
      finish({ code: null, stdout, stderr, timedOut: true });
    }, timeoutMs);
    timer.unref?.();
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      if (stdout.length < STDOUT_CAP) stdout += d;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < STDERR_CAP) stderr += d;
    });
    child.on("error", (e: NodeJS.ErrnoException) => finish({ code: null, stdout, stderr, timedOut: false, spawnError: e }));
    child.on("close", (code) => finish({ code, stdout, stderr, timedOut: false }));
  });
}
