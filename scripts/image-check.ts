/**
 * `npm run image:check`: proves agent/Dockerfile without a Docker daemon. It reads the
 * Dockerfile and .dockerignore (scripts/dockerfile.ts), so the files, commands and entrypoint
 * it uses are the image's own, never a second list that could drift; then, for each stage the
 * final one needs, it copies that stage's context files into a fresh temporary folder that
 * stands for the stage's file system and runs its RUN commands there (a compile error in
 * agent/src, such as an import of ../../infra, fails here with tsc's message). It assembles
 * the final stage from the others, prints the size of what the image adds to the node base
 * image, checks the compiled CLI and the Lua scripts in that layout alone, and starts the
 * entrypoint against a fake nvidia-smi and a fake inference server until `/readyz` answers
 * 200, then stops it with SIGTERM and expects exit 0.
 *
 * What it cannot prove: the base image itself (it runs the local node and npm, whose major
 * version it compares with NODE_VERSION) and USER (it runs as the current user, and only
 * checks that the final stage names a non-root one).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { appendFile, copyFile, cp, lstat, mkdir, mkdtemp, readlink, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { builtinModules } from "node:module";
import { dirname, join, posix } from "node:path";
import { freePort, sleep } from "../agent/src/util/net";
import { FAKE_NVIDIA_SMI_PATH, writeNvsmiState } from "../lab/sim/nvsmi-state";
import { startFakeInference, type FakeInference } from "../lab/sim/fake-inference";
import {
  DOCKERFILE_PATH,
  DockerfileError,
  REPO,
  dockerignorePath,
  jsonForm,
  localRunCommand,
  neededStages,
  parseAssignments,
  parseCopy,
  parseDockerfile,
  parseDockerignore,
  resolveCopy,
  substitute,
  type Dockerfile,
  type IgnorePattern,
  type Stage,
} from "./dockerfile";

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
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
const children = new Map<ChildProcess, boolean>();
let fake: FakeInference | null = null;

async function tempDir(label: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), `llm-ha-image-${label}-`));
  tempDirs.push(d);
  return d;
}

let cleaning: Promise<void> | null = null;

/**
 * Stops every process this check started (by pid; RUN commands by their own process group,
 * so npm's children go too), then removes the temp folders. One run shared by every caller:
 * on Ctrl-C both the signal handler and the failing step await it, and neither exits first.
 */
function cleanup(): Promise<void> {
  cleaning ??= doCleanup();
  return cleaning;
}

async function doCleanup(): Promise<void> {
  for (const [c, group] of children) {
    if (c.pid === undefined || c.exitCode !== null || c.signalCode !== null) continue;
    try {
      process.kill(group ? -c.pid : c.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  children.clear();
  if (fake) await fake.close().catch(() => undefined);
  fake = null;
  await Promise.all(tempDirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

// ---- output -------------------------------------------------------------------------------

const t0 = Date.now();
let currentStep = "start";

function log(line: string): void {
  process.stdout.write(`[image-check ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${line}\n`);
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  currentStep = name;
  log(`── ${name}`);
  return fn();
}

function tail(text: string): string {
  return text.length > OUTPUT_TAIL_CHARS ? `…${text.slice(-OUTPUT_TAIL_CHARS)}` : text;
}

// ---- running commands ---------------------------------------------------------------------

/**
 * The environment for RUN commands: this machine's (PATH, HOME and its npm configuration:
 * cache, proxy, CA), less what `npm run` adds for its own script and what would change the
 * build (NODE_ENV=production would make `npm ci` skip tsc), plus the stage's ARG and ENV.
 */
function runEnv(stageEnv: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_lifecycle_|npm_package_)|^(npm_command|npm_execpath|npm_node_execpath|npm_config_local_prefix|INIT_CWD|NODE_ENV|NODE_OPTIONS)$/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...stageEnv };
}

/** Runs a command to completion, capturing its output; rejects with the output when it fails. */
function runCommand(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
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

// ---- building the stages ------------------------------------------------------------------

interface BuiltStage {
  readonly stage: Stage;
  /** Temp folder standing for the stage's `/`. */
  readonly root: string;
  /** WORKDIR at the end of the stage (a path inside the image). */
  workdir: string;
  env: Record<string, string>;
  user: string | null;
  entrypoint: string[] | null;
  cmd: string[] | null;
  /** Seconds spent on it. */
  seconds: number;
}

function stageLabel(s: Stage): string {
  return s.name ?? `stage-${s.index}`;
}

/** Where an image path lands in the stage's temp folder. */
function hostPath(root: string, imagePath: string): string {
  return join(root, ...posix.resolve("/", imagePath).split("/").filter(Boolean));
}

async function copyEntry(from: string, to: string): Promise<void> {
  await mkdir(dirname(to), { recursive: true });
  const st = await lstat(from);
  if (st.isSymbolicLink()) await symlink(await readlink(from), to);
  else await copyFile(from, to); // copyFile keeps the mode: bin/llm-ha stays executable.
}

/** `COPY --from=<stage> <src>… <dest>`: sources are paths in that stage's file system. */
async function copyFromStage(src: BuiltStage, sources: readonly string[], dest: string, into: BuiltStage, line: number): Promise<void> {
  const destIsDir = dest.endsWith("/") || sources.length > 1;
  const destPath = hostPath(into.root, posix.resolve(into.workdir, dest));
  for (const s of sources) {
    const from = hostPath(src.root, posix.resolve("/", s));
    let st;
    try {
      st = await lstat(from);
    } catch {
      throw new ImageCheckError(`line ${line}: COPY --from=${stageLabel(src.stage)} ${s}: not found in that stage`);
    }
    // A folder's contents go into the destination, as in Docker; verbatimSymlinks keeps node_modules/.bin links relative.
    if (st.isDirectory()) await cp(from, destPath, { recursive: true, verbatimSymlinks: true, force: true });
    else await copyEntry(from, destIsDir ? join(destPath, posix.basename(s)) : destPath);
  }
}

async function buildStage(df: Dockerfile, stage: Stage, built: ReadonlyMap<number, BuiltStage>, patterns: readonly IgnorePattern[]): Promise<BuiltStage> {
  const started = Date.now();
  const b: BuiltStage = { stage, root: await tempDir(stageLabel(stage)), workdir: "/", env: {}, user: null, entrypoint: null, cmd: null, seconds: 0 };
  log(`stage ${stageLabel(stage)} (FROM ${stage.base}) in ${b.root}`);
  // ARG and ENV values, for substitution in later instructions and for RUN's environment.
  const args: Record<string, string> = {};
  const vars = (): Record<string, string> => ({ ...args, ...b.env });
  const byRef = (ref: string): BuiltStage | undefined => [...built.values()].find((x) => (/^\d+$/.test(ref) ? x.stage.index === Number(ref) : x.stage.name === ref));
  for (const ins of stage.instructions) {
    const where = `line ${ins.line}: ${ins.keyword} ${ins.args}`;
    switch (ins.keyword) {
      case "WORKDIR":
        b.workdir = posix.resolve(b.workdir, substitute(ins.args.trim(), vars()));
        await mkdir(hostPath(b.root, b.workdir), { recursive: true });
        break;
      case "ARG":
        for (const [k, v] of Object.entries(parseAssignments(ins.args, "ARG", ins.line))) args[k] = v || (df.globalArgs[k] ?? "");
        break;
      case "ENV":
        for (const [k, v] of Object.entries(parseAssignments(ins.args, "ENV", ins.line))) b.env[k] = substitute(v, vars());
        break;
      case "COPY": {
        const c = parseCopy(ins, vars());
        if (c.from !== null) {
          const src = byRef(c.from);
          if (!src) throw new DockerfileError(`line ${ins.line}: COPY --from=${c.from}: stage not built`);
          await copyFromStage(src, c.sources, c.dest, b, ins.line);
          log(`  ${where}`);
        } else {
          const files = resolveCopy(c, REPO, patterns, b.workdir);
          for (const f of files) await copyEntry(join(REPO, f.src), hostPath(b.root, f.dest));
          log(`  ${where}  (${files.length} file${files.length === 1 ? "" : "s"})`);
        }
        break;
      }
      case "RUN": {
        const json = jsonForm(ins.args, ins.line);
        const { command, skipped } = json ? { command: "", skipped: [] } : localRunCommand(ins.args);
        for (const s of skipped) log(`  (not run here: ${s}: it would empty this machine's npm cache; it only keeps the cache out of the layer)`);
        const argv = json ?? ["/bin/sh", "-c", command];
        const t = Date.now();
        log(`  line ${ins.line}: RUN ${json ? JSON.stringify(json) : command}`);
        await runCommand(argv, hostPath(b.root, b.workdir), runEnv(vars()), `stage ${stageLabel(stage)}, Dockerfile line ${ins.line}: RUN`);
        log(`    done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
        break;
      }
      case "USER":
        b.user = substitute(ins.args.trim(), vars());
        break;
      case "ENTRYPOINT":
      case "CMD": {
        const v = jsonForm(ins.args, ins.line) ?? ["/bin/sh", "-c", ins.args];
        if (ins.keyword === "ENTRYPOINT") {
          b.entrypoint = v;
          b.cmd = null; // Docker: a new ENTRYPOINT resets CMD inherited so far.
        } else {
          b.cmd = v;
        }
        break;
      }
      case "EXPOSE":
      case "LABEL":
      case "STOPSIGNAL":
        // Metadata only: nothing to build or run.
        break;
      default:
        throw new DockerfileError(`line ${ins.line}: ${ins.keyword} is not supported by scripts/image-check.ts`);
    }
  }
  b.seconds = (Date.now() - started) / 1000;
  log(`stage ${stageLabel(stage)} built in ${b.seconds.toFixed(1)} s`);
  return b;
}

// ---- checks on the final layout -----------------------------------------------------------

/**
 * The npm packages the compiled code names (`require("x")`, `import("x")`), node builtins
 * left out. The agent started below loads only part of the code (no Redis, no AWS), so a
 * package missing from the runtime node_modules would otherwise show only on a real node.
 */
export function requiredPackages(distDir: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const rel of readdirSync(distDir, { recursive: true, encoding: "utf8" })) {
    if (!rel.endsWith(".js")) continue;
    for (const m of readFileSync(join(distDir, rel), "utf8").matchAll(/\b(?:require|import)\(\s*["']([^"'./][^"']*)["']\s*\)/g)) {
      const spec = m[1];
      if (spec.startsWith("node:")) continue;
      const parts = spec.split("/");
      const pkg = spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
      if (!found.has(pkg)) found.set(pkg, rel);
    }
  }
  return found;
}

const BUILTINS = new Set(builtinModules);

async function duMiB(path: string): Promise<number> {
  const out = await runCommand(["du", "-sk", path], REPO, process.env, `du -sk ${path}`);
  return Number(out.trim().split(/\s+/)[0]) / 1024;
}

/** The biggest packages of a node_modules folder (scoped ones counted per package), for the report. */
async function biggestPackages(nodeModules: string, n: number): Promise<string> {
  const out = await runCommand(["/bin/sh", "-c", "du -sk ./[!@.]* ./@*/* 2>/dev/null | sort -rn | head -n " + n], nodeModules, process.env, "du node_modules");
  return out
    .trim()
    .split("\n")
    .map((l) => {
      const [kb, name] = l.split(/\s+/);
      return `${name.replace(/^\.\//, "")} ${(Number(kb) / 1024).toFixed(1)} MiB`;
    })
    .join(", ");
}

/** The environment of the container: the image's ENV and PATH (for `node` and the fake nvidia-smi's `#!/usr/bin/env node`), nothing of this shell's. */
function containerEnv(final: BuiltStage, extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", ...final.env, ...extra };
}

function isRoot(user: string | null): boolean {
  if (user === null) return true;
  const name = user.split(":")[0];
  return name === "root" || name === "0";
}

async function waitExit(child: ChildProcess, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | null> {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
  return Promise.race([
    new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once("exit", (code, signal) => r({ code, signal }))),
    sleep(ms).then(() => null),
  ]);
}

/** Starts the image's ENTRYPOINT + CMD in the final layout, waits for `/readyz` 200, stops it with SIGTERM and expects exit 0. Returns seconds to ready. */
async function runAgent(final: BuiltStage): Promise<number> {
  const argv = [...(final.entrypoint ?? []), ...(final.cmd ?? [])];
  if (argv.length === 0) throw new ImageCheckError("the final stage has neither ENTRYPOINT nor CMD");
  const state = await tempDir("state");
  const model = "llm-ha/image-check";
  const nvsmiState = join(state, "nvsmi.json");
  const xidLog = join(state, "kmsg");
  const gpuCount = 8;
  await writeNvsmiState(nvsmiState, { gpuCount });
  await appendFile(xidLog, "");
  fake = await startFakeInference({ kind: "vllm", model });
  log(`fake inference server (vllm, ${model}) on ${fake.url}; fake nvidia-smi ${FAKE_NVIDIA_SMI_PATH} with ${gpuCount} GPUs`);
  const [httpPort, agentCheckPort] = [await freePort(), await freePort()];
  // The settings lab/sim/sim-node.ts gives an agent, on loopback ports.
  const env = containerEnv(final, {
    FAKE_NVSMI_STATE: nvsmiState,
    LLMHA_NODE_ID: "image-check",
    LLMHA_AZ: "local-1a",
    LLMHA_NVIDIA_SMI: FAKE_NVIDIA_SMI_PATH,
    LLMHA_GPU_COUNT: String(gpuCount),
    LLMHA_INFERENCE_URL: fake.url,
    LLMHA_INFERENCE_KIND: "vllm",
    LLMHA_MODEL: model,
    LLMHA_HTTP_PORT: String(httpPort),
    LLMHA_AGENT_CHECK_PORT: String(agentCheckPort),
    LLMHA_BIND_ADDRESS: "127.0.0.1",
    LLMHA_XID_LOG: xidLog,
  });
  const cwd = hostPath(final.root, final.workdir);
  log(`starting ${argv.join(" ")} in ${cwd} (http 127.0.0.1:${httpPort})`);
  const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  children.set(child, false);
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (out = tail(out + d)));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (out = tail(out + d)));
  // A holder, not a `let`: TypeScript would keep a `let` narrowed to null across the awaits below.
  const spawn_: { error: Error | null } = { error: null };
  child.once("error", (e) => (spawn_.error = e));
  const started = Date.now();
  let lastProgress = started;
  let lastLogged = "";
  for (;;) {
    let lastStatus: string;
    if (spawn_.error) throw new ImageCheckError(`cannot start ${argv[0]}: ${spawn_.error.message}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new ImageCheckError(`the agent exited before /readyz answered 200 (${child.signalCode ?? `exit ${child.exitCode}`})`, out);
    }
    try {
      const r = await fetch(`http://127.0.0.1:${httpPort}/readyz`, { signal: AbortSignal.timeout(1000) });
      const body = await r.text();
      if (r.status === 200) break;
      lastStatus = `${r.status} ${body}`;
    } catch (e) {
      lastStatus = e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e);
    }
    if (Date.now() - started > READY_TIMEOUT_MS) throw new ImageCheckError(`/readyz did not answer 200 within ${READY_TIMEOUT_MS / 1000} s (last: ${lastStatus})`, out);
    // A line whenever the answer changes, and every 5 s while it does not.
    if (lastStatus !== lastLogged || Date.now() - lastProgress >= 5000) {
      log(`  waiting for /readyz: ${lastStatus.slice(0, 200)}`);
      lastLogged = lastStatus;
      lastProgress = Date.now();
    }
    await sleep(250);
  }
  const readySeconds = (Date.now() - started) / 1000;
  log(`/readyz 200 after ${readySeconds.toFixed(1)} s`);
  child.kill("SIGTERM");
  const exit = await waitExit(child, STOP_TIMEOUT_MS);
  children.delete(child);
  if (!exit) {
    child.kill("SIGKILL");
    throw new ImageCheckError(`the agent did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM`, out);
  }
  if (exit.code !== 0) throw new ImageCheckError(`the agent exited with ${exit.signal ?? `code ${exit.code}`} after SIGTERM, not 0`, out);
  log("SIGTERM: the agent drained and exited 0");
  return readySeconds;
}

// ---- main ---------------------------------------------------------------------------------

async function check(): Promise<void> {
  const { df, patterns, stages } = await step("read agent/Dockerfile and .dockerignore", async () => {
    const df = parseDockerfile(readFileSync(DOCKERFILE_PATH, "utf8"));
    const ignore = dockerignorePath(REPO, DOCKERFILE_PATH);
    const patterns = ignore ? parseDockerignore(readFileSync(ignore, "utf8")) : [];
    const stages = neededStages(df);
    log(`stages to build: ${stages.map(stageLabel).join(" → ")}; ${patterns.length} ignore patterns from ${ignore ?? "(no .dockerignore)"}`);
    const nodeVersion = df.globalArgs.NODE_VERSION;
    if (nodeVersion && process.versions.node.split(".")[0] !== nodeVersion.split(".")[0]) {
      log(`warning: the image uses node ${nodeVersion}, this check runs node ${process.versions.node}`);
    }
    return { df, patterns, stages };
  });
  const built = new Map<number, BuiltStage>();
  for (const s of stages) {
    built.set(s.index, await step(`stage ${stageLabel(s)}: COPY and RUN as the Dockerfile does`, () => buildStage(df, s, built, patterns)));
  }
  const final = built.get(stages[stages.length - 1].index)!;
  const app = hostPath(final.root, final.workdir);

  const sizes = await step("final layout: USER and size", async () => {
    if (isRoot(final.user)) throw new ImageCheckError(`the final stage runs as ${final.user ?? "root (no USER)"}: it must name a non-root USER`);
    const nodeModules = await duMiB(join(app, "node_modules"));
    const total = await duMiB(final.root);
    log(`runtime node_modules ${nodeModules.toFixed(1)} MiB; all the image adds to the node base image ${total.toFixed(1)} MiB; USER ${final.user}`);
    log(`biggest packages: ${await biggestPackages(join(app, "node_modules"), 6)}`);
    return { nodeModules, total };
  });

  await step("final layout: the compiled CLI and the Lua scripts work without the sources", async () => {
    const env = containerEnv(final, {});
    const help = await runCommand([process.execPath, "bin/llm-ha", "help"], app, env, "bin/llm-ha help");
    if (!help.includes("llm-ha agent")) throw new ImageCheckError("bin/llm-ha help did not print the agent's usage", help);
    // The agent started below runs without Redis, so it never loads the Lua scripts: load them here, from the compiled module, as a Redis client would.
    const probe =
      "const s = require('./dist/agent/src/redis/scripts.js'); const names = [];" +
      "s.defineScripts({ defineCommand: (n) => names.push(n) });" +
      "if (!s.SCRIPT_NAMES.every((n) => names.includes(n))) { console.error('missing', s.SCRIPT_NAMES, names); process.exit(1); }" +
      "console.log(names.length + ' scripts');";
    const lua = await runCommand([process.execPath, "-e", probe], app, env, "loading the Lua scripts from dist/agent/src/redis");
    log(`bin/llm-ha help ok; ${lua.trim()} loaded from dist/agent/src/redis`);
    const pkgs = [...requiredPackages(join(app, "dist"))].filter(([p]) => !BUILTINS.has(p));
    const missing = pkgs.filter(([p]) => !existsSync(join(app, "node_modules", p, "package.json")));
    if (missing.length) {
      throw new ImageCheckError(`the compiled code requires packages missing from the runtime node_modules: ${missing.map(([p, f]) => `${p} (dist/${f})`).join(", ")}`);
    }
    log(`all ${pkgs.length} packages the compiled code requires are in the runtime node_modules: ${pkgs.map(([p]) => p).join(", ")}`);
  });

  const readySeconds = await step("final layout: start the agent (ENTRYPOINT + CMD) until /readyz 200, then SIGTERM", () => runAgent(final));

  const stageTimes = [...built.values()].map((b) => `${stageLabel(b.stage)} ${b.seconds.toFixed(1)} s`).join(", ");
  log(
    `OK: runtime node_modules ${sizes.nodeModules.toFixed(1)} MiB, image adds ${sizes.total.toFixed(1)} MiB in all; ` +
      `stages ${stageTimes}; agent ready in ${readySeconds.toFixed(1)} s; total ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
}

async function main(): Promise<void> {
  let failed = false;
  let interruptedBy: NodeJS.Signals | null = null;
  const exitCode = (): number => (interruptedBy === "SIGINT" ? 130 : interruptedBy ? 143 : failed ? 1 : 0);
  const interrupted = (sig: NodeJS.Signals): void => {
    interruptedBy = sig;
    log(`interrupted by ${sig} during "${currentStep}": stopping what it started, removing its temp folders`);
    void cleanup().finally(() => process.exit(exitCode()));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    await check();
  } catch (err) {
    failed = true;
    // A step failing because the signal handler killed its command is no news.
    if (!interruptedBy) {
      const detail = err instanceof ImageCheckError && err.detail ? `\n${err.detail.trimEnd()}\n` : "";
      process.stderr.write(`${detail}\nimage-check FAILED at step "${currentStep}": ${err instanceof Error ? err.message : String(err)}\n`);
    }
  } finally {
    await cleanup();
  }
  process.exit(exitCode());
}

if (require.main === module) void main();
