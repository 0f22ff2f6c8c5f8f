/**
 * A simulated node's processes: each started with its output appended to the node's log,
 * stopped by its own id, and the log's last lines for a start-up error.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import { stopChild } from "../engines/child";

export interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
}

export function start(cmd: string, args: string[], env: NodeJS.ProcessEnv, log: WriteStream): Proc {
  const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return { child, exited };
}

/** A node log's last lines, for a start-up error (the test may remove the folder before anyone reads it). */
export function logTail(dir: string, id: string, lines = 15): string {
  try {
    const tail = readFileSync(join(dir, `${id}.log`), "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    return tail ? `; last lines of ${id}.log:\n${tail}` : `; ${id}.log is empty`;
  } catch {
    return "";
  }
}

export async function end(p: Proc | null, signal: NodeJS.Signals = "SIGTERM", graceMs = 5000): Promise<void> {
  if (p) await stopChild(p.child, { signal, graceMs });
}
