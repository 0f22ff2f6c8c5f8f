/**
 * Runs `llm-ha <args>` from the checkout (lab/cli.ts under tsx) as its own process, as a user
 * would, and resolves its exit code with everything it printed: the whole-drill suites (the
 * quick drill, a chaos minute, the local game day) drive the CLI this way.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";

const CLI = join(__dirname, "..", "..", "lab", "cli.ts");

export async function runCli(args: readonly string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
  return { code, out, err };
}
