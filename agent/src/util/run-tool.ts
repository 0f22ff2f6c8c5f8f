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

/** A long-lived tool child (`nvidia-smi … -lms N`) whose standard output is read line by line. */
export interface ToolStream {
  readonly child: ChildProcess;
  /** Ends it (SIGKILL by default); its `onExit` still comes. */
  kill(signal?: NodeJS.Signals): void;
}

export interface ToolStreamHandlers {
  /** Each whole line of standard output, without its line end; a line over the cap arrives cut, with `cut` set. */
  onLine: (line: string, cut: boolean) => void;
  /** After the lines of one read of standard output (they arrived together): a caller can act once a read, not once a line. */
  onRead?: () => void;
  /** Standard error as it comes (the caller keeps what it needs). */
  onStderr?: (text: string) => void;
  /** The child ended (or never started: `spawnError`); called once. */
  onExit: (code: number | null, signal: NodeJS.Signals | null, spawnError?: NodeJS.ErrnoException) => void;
}

/** Longest stdout line kept whole: a garbage stream with no line end must not grow the agent. */
const LINE_CAP = 64 * 1024;

/**
 * Starts a long-lived tool child the way `runTool` starts one (no shell, the minimal child
 * environment) and hands its standard output over line by line as it comes. The caller owns
 * the child's life: it kills it on a hang and on stop (`kill`).
 */
export function streamTool(path: string, args: readonly string[], h: ToolStreamHandlers): ToolStream | null {
  let child: ChildProcess;
  try {
    child = spawn(path, [...args], { stdio: ["ignore", "pipe", h.onStderr ? "pipe" : "ignore"], env: childEnv() });
  } catch (e) {
    h.onExit(null, null, e as NodeJS.ErrnoException);
    return null;
  }
  let partial = "";
  let ended = false;
  const end = (code: number | null, signal: NodeJS.Signals | null, err?: NodeJS.ErrnoException): void => {
    if (ended) return;
    ended = true;
    h.onExit(code, signal, err);
  };
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    let from = 0;
    for (let nl = d.indexOf("\n"); nl >= 0; nl = d.indexOf("\n", from)) {
      const line = partial + d.slice(from, nl);
      partial = "";
      from = nl + 1;
      h.onLine(line.endsWith("\r") ? line.slice(0, -1) : line, false);
    }
    partial += d.slice(from);
    if (partial.length > LINE_CAP) {
      h.onLine(partial.slice(0, LINE_CAP), true);
      partial = "";
    }
    h.onRead?.();
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => h.onStderr?.(d));
  child.on("error", (e: NodeJS.ErrnoException) => end(null, null, e));
  child.on("close", (code, signal) => end(code, signal));
  return {
    child,
    kill: (signal: NodeJS.Signals = "SIGKILL") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}
