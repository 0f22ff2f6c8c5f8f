/**
 * What `npm run image:check` needs to run things: its temp folders and children (cleaned up
 * on exit or interrupt), progress lines, named steps and commands run to completion.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeInference } from "../lab/sim/fake-inference";

export const READY_TIMEOUT_MS = 60_000;
export const STOP_TIMEOUT_MS = 30_000;
const OUTPUT_TAIL_CHARS = 12_000;

/** A failed step; `detail` is the output worth showing (tsc's errors, the agent's log). */
export class ImageCheckError extends Error {
  constructor(
    message: string,
    readonly detail = "",
  ) {
    super(message);
    this.name = "ImageCheckError";
  }
}

// ---- what to clean up ---------------------------------------------------------------------

const tempDirs: string[] = [];
/** Running children, and whether each leads its own process group. */
export const children = new Map<ChildProcess, boolean>();
let fake: FakeInference | null = null;

/** The fake inference server the check started (stopped by `cleanup`). */
export function setFake(f: FakeInference | null): void {
  fake = f;
}

let cleaning: Promise<void> | null = null;

/** Once the cleanup began (an interrupt, a failure), the check starts nothing more: what it made after the sweep would be left behind. */
export function refuseAfterCleanup(): void {
  if (cleaning) throw new ImageCheckError("stopped: the check was interrupted or failed");
}

/** Folders being made: the cleanup waits for them, so one made as it begins is removed too. */
const making = new Set<Promise<string>>();

export async function tempDir(label: string): Promise<string> {
  refuseAfterCleanup();
  const made = mkdtemp(join(tmpdir(), `llm-ha-image-${label}-`));
  making.add(made);
  try {
    const d = await made;
    tempDirs.push(d);
    refuseAfterCleanup();
    return d;
  } finally {
    making.delete(made);
  }
}

/**
 * Stops every process this check started (by pid; RUN commands by their own process group,
 * so npm's children go too), then removes the temp folders. One run shared by every caller:
 * on Ctrl-C both the signal handler and the failing step await it, and neither exits first.
 */
export function cleanup(): Promise<void> {
  cleaning ??= doCleanup();
  return cleaning;
}

async function doCleanup(): Promise<void> {
  const stopping: Promise<void>[] = [];
  for (const [c, group] of children) {
    if (c.pid === undefined || c.exitCode !== null || c.signalCode !== null) continue;
    stopping.push(new Promise<void>((r) => c.once("close", () => r())));
    try {
      process.kill(group ? -c.pid : c.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  children.clear();
  // Folders are removed once what wrote in them is gone (5 s at most): not under a dying `npm ci`.
  await Promise.race([Promise.all(stopping), new Promise((r) => setTimeout(r, 5_000).unref())]);
  if (fake) await fake.close().catch(() => undefined);
  fake = null;
  await Promise.allSettled([...making]);
  await Promise.all(tempDirs.splice(0).map((d) => rm(d, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined)));
}

// ---- output -------------------------------------------------------------------------------

export const t0 = Date.now();
let currentStep = "start";

/** The step running now, for a failure or an interrupt. */
export function stepNow(): string {
  return currentStep;
}

export function log(line: string): void {
  process.stdout.write(`[image-check ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${line}\n`);
}

export async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  currentStep = name;
  log(`── ${name}`);
  return fn();
}

export function tail(text: string): string {
  return text.length > OUTPUT_TAIL_CHARS ? `…${text.slice(-OUTPUT_TAIL_CHARS)}` : text;
}

// ---- running commands ---------------------------------------------------------------------

/**
 * The environment for RUN commands: this machine's (PATH, HOME and its npm configuration:
 * cache, proxy, CA), less what `npm run` adds for its own script and what would change the
 * build (NODE_ENV=production would make `npm ci` skip tsc), plus the stage's ARG and ENV.
 */
export function runEnv(stageEnv: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_lifecycle_|npm_package_)|^(npm_command|npm_execpath|npm_node_execpath|npm_config_local_prefix|INIT_CWD|NODE_ENV|NODE_OPTIONS)$/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...stageEnv };
}

/** Runs a command to completion, capturing its output; rejects with the output when it fails. */
export function runCommand(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // Thrown in the executor: the promise rejects, nothing is started.
    refuseAfterCleanup();
    // Its own process group, so that cleanup can stop npm and whatever npm started.
    const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    children.set(child, true);
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out = tail(out + d)));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (out = tail(out + d)));
    child.once("error", (err) => {
      children.delete(child);
      reject(new ImageCheckError(`${what}: cannot start ${argv[0]}: ${err.message}`));
    });
    child.once("close", (code, signal) => {
      children.delete(child);
      if (code === 0) resolve(out);
      else reject(new ImageCheckError(`${what} failed (${signal ? `signal ${signal}` : `exit ${code}`})`, out));
    });
  });
}
