/**
 * `llm-ha fallback` as a process of its own, from the sources, as the L1 pod runs it: the test
 * and the drill kill it with SIGKILL (a crash, no leave-group) and measure how soon another
 * member takes the replay over.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { freePort, sleep } from "../agent/src/util/net";
import { IMAGE_CLI } from "./cli-process";

export class FallbackProcessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FallbackProcessError";
  }
}

export interface FallbackProcess {
  port: number;
  pid: number;
  /** Its output so far (the JSON log), for a failure message. */
  output(): string;
  /** `kill -9`: no shutdown, no LeaveGroup. */
  crash(): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", () => r()));
}

/** Starts it with `args` (flags; `--port` and `--host` are set here) and waits until `/livez` answers. */
export async function startFallbackProcess(args: readonly string[], timeoutMs = 30_000): Promise<FallbackProcess> {
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_")));
  const child = spawn(process.execPath, ["--import", "tsx", IMAGE_CLI, "fallback", ...args, "--host", "127.0.0.1", "--port", String(port)], { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const keep = (d: Buffer): void => {
    out = (out + d.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new FallbackProcessError(`llm-ha fallback exited (${child.exitCode}) before listening: ${out.slice(-1000)}`);
    const ok = await fetch(`http://127.0.0.1:${port}/livez`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new FallbackProcessError(`llm-ha fallback not listening on ${port} within ${timeoutMs} ms: ${out.slice(-1000)}`);
    }
    await sleep(100);
  }
  return {
    port,
    pid: child.pid ?? -1,
    output: () => out,
    async crash() {
      child.kill("SIGKILL");
      await exited(child);
    },
    async stop() {
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited(child);
      clearTimeout(t);
    },
  };
}
