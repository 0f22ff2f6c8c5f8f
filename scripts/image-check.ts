/**
 * `npm run image:check`: proves agent/Dockerfile without a Docker daemon. It reads the
 * Dockerfile and .dockerignore (scripts/dockerfile.ts, scripts/dockerignore.ts), so the files,
 * commands and entrypoint it uses are the image's own, never a second list that could drift;
 * then, for each stage the final one needs, it copies that stage's context files into a fresh
 * temporary folder that stands for the stage's file system and runs its RUN commands there (a
 * compile error in agent/src, such as an import of ../../infra, fails here with tsc's message).
 * It assembles the final stage from the others, prints the size of what the image adds to the
 * node base image, checks the compiled CLI and the Lua scripts in that layout alone, and starts
 * the entrypoint against a fake nvidia-smi and a fake inference server until `/readyz` answers
 * 200, then stops it with SIGTERM and expects exit 0.
 *
 * What it cannot prove: the base image itself (it runs the local node and npm, whose major
 * version it compares with NODE_VERSION) and USER (it runs as the current user, and only
 * checks that the final stage names a non-root one).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { appendFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort, sleep } from "../agent/src/util/net";
import { FAKE_NVIDIA_SMI_PATH, writeNvsmiState } from "../lab/sim/nvsmi-state";
import { startFakeInference } from "../lab/sim/fake-inference";
import { children, cleanup, ImageCheckError, log, READY_TIMEOUT_MS, refuseAfterCleanup, runCommand, setFake, step, stepNow, STOP_TIMEOUT_MS, t0, tail, tempDir } from "./image-run";
import { biggestPackages, BUILTINS, buildStage, duMiB, hostPath, requiredPackages, stageLabel, type BuiltStage } from "./image-stages";
import { DOCKERFILE_PATH, REPO, neededStages, parseDockerfile, stageDeps } from "./dockerfile";
import { dockerignorePath, parseDockerignore } from "./dockerignore";

/**
 * The agent's runtime node_modules measured 32.8 MiB (ioredis, prom-client, pino, kafkajs, the
 * AWS clients it calls): room to grow, not to carry the Pulumi SDKs (it was 178.5 MiB when
 * @pulumi/docker-build and the preflight's AWS clients slipped in).
 */
const RUNTIME_NODE_MODULES_BUDGET_MIB = 60;

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
  refuseAfterCleanup();
  const fake = await startFakeInference({ kind: "vllm", model });
  setFake(fake);
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
  refuseAfterCleanup();
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
    const order = stages.map((s) => {
      const after = stageDeps(df, s).map(stageLabel);
      return after.length ? `${stageLabel(s)} (after ${after.join(" and ")})` : stageLabel(s);
    });
    log(`stages to build: ${order.join(", ")}; ${patterns.length} ignore patterns from ${ignore ?? "(no .dockerignore)"}`);
    const nodeVersion = df.globalArgs.NODE_VERSION;
    if (nodeVersion && process.versions.node.split(".")[0] !== nodeVersion.split(".")[0]) {
      log(`warning: the image uses node ${nodeVersion}, this check runs node ${process.versions.node}`);
    }
    return { df, patterns, stages };
  });
  // Each stage starts once the stages it copies from are built, so stages that need nothing of
  // each other build at once (BuildKit does the same): build and deps share the wait on npm.
  const built = new Map<number, BuiltStage>();
  const building = new Map<number, Promise<BuiltStage>>();
  await step(`stages ${stages.map(stageLabel).join(", ")}: COPY and RUN as the Dockerfile does`, async () => {
    for (const s of stages) {
      const before = stageDeps(df, s).map((d) => building.get(d.index) as Promise<BuiltStage>);
      building.set(
        s.index,
        Promise.all(before).then(async () => {
          const b = await buildStage(df, s, built, patterns);
          built.set(s.index, b);
          return b;
        }),
      );
    }
    // The first failure fails the check at once; the cleanup stops the builds still running, whose
    // own failures then are no news.
    for (const p of building.values()) p.catch(() => undefined);
    await Promise.all(building.values());
  });
  const final = built.get(stages[stages.length - 1].index)!;
  const app = hostPath(final.root, final.workdir);

  const sizes = await step("final layout: USER and size", async () => {
    if (isRoot(final.user)) throw new ImageCheckError(`the final stage runs as ${final.user ?? "root (no USER)"}: it must name a non-root USER`);
    const nodeModules = await duMiB(join(app, "node_modules"));
    const total = await duMiB(final.root);
    log(`runtime node_modules ${nodeModules.toFixed(1)} MiB; all the image adds to the node base image ${total.toFixed(1)} MiB; USER ${final.user}`);
    const biggest = await biggestPackages(join(app, "node_modules"), 6);
    log(`biggest packages: ${biggest}`);
    // A package of infra/ or the checkout's CLI slipping into the image shows here, not on a node's disk.
    if (nodeModules > RUNTIME_NODE_MODULES_BUDGET_MIB) {
      throw new ImageCheckError(
        `runtime node_modules is ${nodeModules.toFixed(1)} MiB, over its ${RUNTIME_NODE_MODULES_BUDGET_MIB} MiB budget (biggest: ${biggest}): drop the packages the agent does not load in agent/Dockerfile's deps stage`,
      );
    }
    return { nodeModules, total };
  });

  await step("final layout: the compiled CLI and the Lua scripts work without the sources", async () => {
    const env = containerEnv(final, {});
    const help = await runCommand([process.execPath, "bin/llm-ha", "help"], app, env, "bin/llm-ha help");
    if (!help.includes("llm-ha agent")) throw new ImageCheckError("bin/llm-ha help did not print the agent's usage", help);
    // The agent started below runs without Redis, so it never builds the functions library from the Lua scripts: build it here, from the compiled module, as the controller would.
    const probe =
      "const s = require('./dist/agent/src/fleet/redis/scripts.js'); const lib = s.fleetLibrary(); const names = [...lib.specs.keys()];" +
      "if (!s.SCRIPT_NAMES.every((n) => names.includes(n))) { console.error('missing', s.SCRIPT_NAMES, names); process.exit(1); }" +
      "console.log(names.length + ' scripts');";
    const lua = await runCommand([process.execPath, "-e", probe], app, env, "loading the Lua scripts from dist/agent/src/fleet/redis");
    log(`bin/llm-ha help ok; ${lua.trim()} loaded from dist/agent/src/fleet/redis`);
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
  const exitCode = (): number => (interruptedBy === "SIGINT" ? 130 : interruptedBy === "SIGPIPE" ? 141 : interruptedBy ? 143 : failed ? 1 : 0);
  const interrupted = (sig: NodeJS.Signals): void => {
    interruptedBy = sig;
    log(`interrupted by ${sig} during "${stepNow()}": stopping what it started, removing its temp folders`);
    void cleanup().finally(() => process.exit(exitCode()));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  // Output read by something that went away (`| head`): stop as on Ctrl-C, the builds stopped and
  // the temp folders removed, rather than die on EPIPE with both left behind.
  process.stdout.on("error", () => {
    if (!interruptedBy) interrupted("SIGPIPE");
  });
  try {
    await check();
  } catch (err) {
    failed = true;
    // A step failing because the signal handler killed its command is no news.
    if (!interruptedBy) {
      const detail = err instanceof ImageCheckError && err.detail ? `\n${err.detail.trimEnd()}\n` : "";
      process.stderr.write(`${detail}\nimage-check FAILED at step "${stepNow()}": ${err instanceof Error ? err.message : String(err)}\n`);
    }
  } finally {
    await cleanup();
  }
  process.exit(exitCode());
}

if (require.main === module) void main();
