/**
 * The image's `llm-ha` run as its own process from the sources, as an operator runs it: the
 * drill asks for a practice wake with it, tests drive `status` and `practice` with it. The
 * environment's `LLMHA_*` settings are left out unless given, so a setting of the caller never
 * leaks into the command.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";

/** The image's CLI in the sources. */
export const IMAGE_CLI = join(__dirname, "..", "agent", "src", "cli.ts");

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runLlmHa(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_") && k !== "NO_COLOR"));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", IMAGE_CLI, ...args], { env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Whether a process with this id still exists (signal 0: nothing is sent). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
