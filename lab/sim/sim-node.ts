/**
 * One simulated GPU node: a fake nvidia-smi driven by a state file, a fake inference
 * server process, and a REAL `llm-ha agent` process watching them. The tests, the drill
 * and the bench build fleets from these.
 */
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { appendFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { InferenceKind } from "../../agent/src/config/spec";
import { DRAIN_SETTLE_S, preStopCommand } from "../../contracts/drain";
import { end, logTail, start, type Proc } from "./node-proc";
import { freePort, sleep, socketExchange, waitFor, within } from "../../agent/src/util/net";
import { NVSMI_FAULTS, writeFakeDcgmiWrapper, writeFakeNvidiaSmiWrapper, writeNvsmiState, type NvsmiFault, type NvsmiState } from "./nvsmi-state";
import { fakeInferenceFlags, fakeInferenceStats, setFakeInferenceMode, type FakeInferenceMode, type FakeInferenceProfile, type FakeInferenceSettings, type FakeInferenceStats } from "./fake-inference";

const REPO = join(__dirname, "..", "..");
const CLI = join(REPO, "agent", "src", "cli.ts");
const FAKE_INFERENCE = join(__dirname, "fake-inference.ts");
/** The compiled CLI (`npm run build`): what the image runs. */
export const BUILT_CLI = join(REPO, "dist", "agent", "src", "cli.js");
const START_LIMIT_MS = 45_000; // for the inference server and the agent: a tsx start on a loaded 2-core host took over 20 s

export interface SimNodeOptions {
  id: string;
  az: string;
  /** Folder for the state file and logs. */
  dir: string;
  kind?: InferenceKind;
  model?: string;
  gpuCount?: number;
  /** Extra `LLMHA_*` settings for the agent. */
  env?: Record<string, string>;
  /** Start the agent from `dist/` (after `npm run build`) instead of the TypeScript sources. */
  built?: boolean;
  /** Don't start the agent (a node whose inference server a baseline checks alone). */
  noAgent?: boolean;
  /** Initial inference mode. Default `ready`. */
  mode?: FakeInferenceMode;
  /** What its server is started with every time (the revision it serves, its latency, load time…); a rollout's switch changes it. */
  inference?: FakeInferenceProfile;
  /** The fake's API key (vLLM `--api-key`): its `/v1` routes answer 401 without it. Default: none. */
  inferenceApiKey?: string;
  /** Allocate ports and files but start no process: a standby node scaled to zero (`boot()` wakes it). */
  stopped?: boolean;
  /**
   * Loopback address every port of the node listens on. Default 127.0.0.1. The drill gives
   * each node one of its own (127.1.x.y) with the same `ports` as every other node: what the
   * pods behind a headless Service look like to HAProxy's `server-template`.
   */
  address?: string;
  /** Fixed ports (free on `address`); default: free ports chosen by the kernel. */
  ports?: SimNodePorts;
}

/** The four ports of a simulated node. */
export interface SimNodePorts {
  inference: number;
  admin: number;
  http: number;
  agentCheck: number;
}

export class SimNodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SimNodeError";
  }
}

export class SimNode {
  readonly id: string;
  readonly az: string;
  /** Address all its ports listen on. */
  readonly address: string;
  readonly statePath: string;
  readonly xidLogPath: string;
  /** The node's planned-drain file (`LLMHA_DRAIN_FILE`), written by the production preStop script. */
  readonly drainFilePath: string;
  inferencePort = 0;
  adminPort = 0;
  httpPort = 0;
  agentCheckPort = 0;
  private inference: Proc | null = null;
  private agent: Proc | null = null;
  /** When its inference server ended (epoch ms), and whether by a planned stop (`halt`, `stop`) or a death: a stream cut by a death had to be. */
  readonly inferenceExits: { at: number; planned: boolean }[] = [];
  /** Set while a planned stop ends the inference process. */
  private stopping = false;
  /** Set by stop(): nothing starts after it. */
  private closed = false;
  /** From halt() to the next boot(): an agent started then (a settings switch racing a scale-in) outlived the node. */
  private down = false;
  private readonly log: WriteStream;
  private nvsmi: NvsmiState;
  /** Booted on an unusable GPU: its server's port stays closed until the GPU is healed. */
  private crashLooping = false;

  private constructor(readonly opts: SimNodeOptions) {
    this.id = opts.id;
    this.az = opts.az;
    this.address = opts.address ?? "127.0.0.1";
    mkdirSync(opts.dir, { recursive: true });
    this.statePath = join(opts.dir, `${opts.id}.nvsmi.json`);
    this.xidLogPath = join(opts.dir, `${opts.id}.kmsg`);
    this.drainFilePath = join(opts.dir, `${opts.id}.drain`);
    this.log = createWriteStream(join(opts.dir, `${opts.id}.log`), { flags: "a" });
    this.nvsmi = { gpuCount: opts.gpuCount ?? 8 };
  }

  /** Starts several nodes at once; when one fails, the ones that started are stopped before the error is thrown. */
  static async startAll(list: readonly SimNodeOptions[]): Promise<SimNode[]> {
    const settled = await Promise.allSettled(list.map((o) => SimNode.start(o)));
    const up = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) {
      await Promise.all(up.map((n) => n.stop()));
      throw failed.reason;
    }
    return up;
  }

  static async start(opts: SimNodeOptions): Promise<SimNode> {
    const n = new SimNode(opts);
    try {
      await writeNvsmiState(n.statePath, n.nvsmi);
      await appendFile(n.xidLogPath, "");
      const p = opts.ports;
      [n.inferencePort, n.adminPort, n.httpPort, n.agentCheckPort] = p
        ? [p.inference, p.admin, p.http, p.agentCheck]
        : await Promise.all([freePort(), freePort(), freePort(), freePort()]);
      if (!opts.stopped) await n.boot();
    } catch (e) {
      await n.stop();
      throw e;
    }
    return n;
  }

  get inferenceUrl(): string { return `http://${this.address}:${this.inferencePort}`; }
  get agentUrl(): string { return `http://${this.address}:${this.httpPort}`; }
  get adminUrl(): string { return `http://${this.address}:${this.adminPort}`; }
  get agentPid(): number | null { return this.agent?.child.pid ?? null; }
  get inferencePid(): number | null { return this.inference?.child.pid ?? null; }
  /** GPUs the node has (what its agent is told to expect, and what the inventory lists). */
  get gpuCount(): number { return this.opts.gpuCount ?? 8; }
  /** While its inference server or agent process runs. */
  get running(): boolean { return this.inference !== null || this.agent !== null; }
  /** Halted by a planned stop (a scale-in, a reboot) and not booted since: no agent starts. */
  get halted(): boolean { return this.down; }

  /** Starts the node's processes (a new instance of the group booting): inference server, then agent. */
  async boot(): Promise<void> {
    this.down = false;
    // vLLM exits at CUDA init on a GPU the driver cannot open (lost, driver gone or mismatched):
    // the pod restarts in a loop with its port closed until the GPU is back (see gpuFault).
    this.crashLooping = this.gpuUnusable();
    await this.startNewPod(this.crashLooping ? "refused" : (this.opts.mode ?? "ready"));
    if (!this.opts.noAgent) await this.startAgent();
  }

  /**
   * Stops its processes as a planned scale-in should (keeps its log open): the agent first (SIGTERM: it answers
   * `drain`, so no proxy sends the node a new request, and leaves the registry), then the inference server once
   * the requests it holds have finished (its own count, up to `maxWaitMs`): a planned move cuts no stream.
   */
  async halt(maxWaitMs = 30_000): Promise<void> {
    this.down = true;
    await end(this.agent, "SIGTERM", 10_000);
    this.agent = null;
    const deadline = Date.now() + maxWaitMs;
    while (this.inference && Date.now() < deadline && ((await this.inFlight()) ?? 0) > 0) await sleep(100);
    await this.endPlanned();
  }

  /**
   * Restarts the inference server as a rolling update of its pod does in production: the
   * shipped preStop script (`contracts/drain.ts`: drain file, then wait until the server holds
   * nothing), SIGTERM, then the init container's removal of the drain file and a new server.
   * The agent keeps running and sees it all. Resolves with how long the preStop hook took.
   */
  async restartInferencePlanned(limitS = 30): Promise<{ preStopMs: number }> {
    const r = await this.evictInference(limitS);
    await this.startNewPod();
    return r;
  }

  /**
   * Evicts the inference pod as a Kubernetes drain does: the shipped preStop hook (drain file,
   * then wait until the server holds nothing), then SIGTERM. The drain file stays until a new
   * server starts (the next pod's init container removes it). Resolves with the hook's time.
   */
  async evictInference(limitS = 30): Promise<{ preStopMs: number }> {
    const t0 = Date.now();
    const [cmd, ...args] = preStopCommand(this.drainFilePath, `${this.inferenceUrl}/metrics`, DRAIN_SETTLE_S, limitS);
    const hook = start(cmd, args, { ...process.env }, this.log);
    await hook.exited;
    const code = hook.child.exitCode;
    if (code !== 0) throw new SimNodeError(`preStop hook of ${this.id} exited ${code} (see ${this.opts.dir}/${this.id}.log)`);
    const preStopMs = Date.now() - t0;
    await this.endPlanned();
    return { preStopMs };
  }

  /** A new inference pod: its init container removes the drain file an evicted predecessor left (else the agent answers `drain`). */
  async startNewPod(mode: FakeInferenceMode = this.opts.mode ?? "ready"): Promise<void> {
    await rm(this.drainFilePath, { force: true });
    await this.startInference(mode);
  }

  /** Whether its inference server process runs (an evicted pod's does not). */
  get serving(): boolean { return this.inference !== null; }
  /** The fake nvidia-smi's state now (what `setGpu`/`gpuFault` last wrote). */
  get gpuState(): NvsmiState { return this.nvsmi; }

  /** Which kind of server it runs (vLLM unless started or switched otherwise). */
  get kind(): InferenceKind { return this.opts.kind ?? "vllm"; }

  /**
   * Makes the node a server of another kind: its agent stopped (draining), its server stopped
   * once idle, both started again as `kind` (the agent learns the kind from its settings).
   */
  async switchKind(kind: InferenceKind): Promise<void> {
    await this.halt(10_000);
    this.opts.kind = kind;
    await this.boot();
  }

  /** Completions the inference server holds now (its admin count), null when it does not answer. */
  async inFlight(): Promise<number | null> {
    return (await this.activity())?.inFlight ?? null;
  }

  /** Completions the inference server holds now and, of those, streams already sending; null when it does not answer. */
  async activity(): Promise<{ inFlight: number; streaming: number } | null> {
    const s = await this.stats();
    return typeof s?.inFlight === "number" ? { inFlight: s.inFlight, streaming: s.streaming ?? 0 } : null;
  }

  /** The fake server's counters (its admin `/stats`); null when it does not answer. */
  stats(): Promise<Partial<FakeInferenceStats> | null> {
    return fakeInferenceStats(this.adminUrl);
  }

  /** Starts the fake inference server process and waits for its ready line. */
  async startInference(mode: FakeInferenceMode = "ready"): Promise<void> {
    this.refuseWhenStopped("inference server");
    const args = [
      "--import", "tsx", FAKE_INFERENCE, "--host", this.address, "--port", String(this.inferencePort), "--admin-port", String(this.adminPort),
      "--kind", this.opts.kind ?? "vllm", "--model", this.opts.model ?? "llm-ha/test-model", "--mode", mode, ...fakeInferenceFlags(this.opts.inference ?? {}),
      ...(this.opts.inferenceApiKey ? ["--api-key", this.opts.inferenceApiKey] : []),
    ];
    const p = start(process.execPath, args, { ...process.env }, this.log);
    this.inference = p;
    void p.exited.then(() => this.inferenceExits.push({ at: Date.now(), planned: this.stopping }));
    const rl = createInterface({ input: p.child.stdout! });
    const ready = new Promise<void>((resolve, reject) => {
      rl.on("line", (l) => {
        if (l.includes('"ready":true')) resolve();
      });
      p.exited.then(() => reject(new SimNodeError(`fake inference server of ${this.id} exited at start-up (see ${this.opts.dir}/${this.id}.log)`)));
    });
    await within(ready, START_LIMIT_MS, () => new SimNodeError(`fake inference server of ${this.id} did not start in ${START_LIMIT_MS / 1000} s${logTail(this.opts.dir, this.id)}`));
    rl.close();
  }

  agentEnv(): NodeJS.ProcessEnv {
    const nvsmi = writeFakeNvidiaSmiWrapper(join(this.opts.dir, `${this.id}-nvidia-smi.sh`), this.statePath);
    return {
      ...process.env,
      FAKE_NVSMI_STATE: this.statePath,
      LLMHA_NODE_ID: this.id,
      LLMHA_AZ: this.az,
      LLMHA_NVIDIA_SMI: nvsmi,
      LLMHA_GPU_COUNT: String(this.opts.gpuCount ?? 8),
      LLMHA_INFERENCE_URL: this.inferenceUrl,
      LLMHA_INFERENCE_KIND: this.opts.kind ?? "vllm",
      LLMHA_MODEL: this.opts.model ?? "llm-ha/test-model",
      LLMHA_HTTP_PORT: String(this.httpPort),
      LLMHA_AGENT_CHECK_PORT: String(this.agentCheckPort),
      LLMHA_BIND_ADDRESS: this.address,
      LLMHA_XID_LOG: this.xidLogPath,
      LLMHA_DRAIN_FILE: this.drainFilePath,
      // Every boot goes through the deep check, with the fake dcgmi on the same state file
      // (LLMHA_DEEP_CHECK=off in the drill's environment gives the old behaviour, to compare).
      LLMHA_DEEP_CHECK: process.env.LLMHA_DEEP_CHECK ?? "auto",
      LLMHA_DCGMI: writeFakeDcgmiWrapper(join(this.opts.dir, `${this.id}-dcgmi.sh`), this.statePath),
      // The fake serves Triton's metrics on its one port (a real Triton: 8002).
      ...(this.opts.kind === "triton" ? { LLMHA_METRICS_URL: `${this.inferenceUrl}/metrics` } : {}),
      ...this.opts.env,
    };
  }

  /** Starts the real agent process and waits until it answers `/livez`. */
  async startAgent(): Promise<void> {
    this.refuseWhenStopped("agent");
    if (this.down) return; // halted (a scale-in, a reboot): as on a stopped instance, its agent starts at its next boot
    const args = this.opts.built ? [BUILT_CLI, "agent"] : ["--import", "tsx", CLI, "agent"];
    this.agent = start(process.execPath, args, this.agentEnv(), this.log);
    let gone = false;
    void this.agent.exited.then(() => (gone = true));
    const t0 = Date.now();
    await waitFor(
      `agent ${this.id} /livez`,
      async () => {
        if (gone) throw new SimNodeError(`agent ${this.id} exited at start-up (see ${this.opts.dir}/${this.id}.log)`);
        const r = await fetch(`${this.agentUrl}/livez`, { signal: AbortSignal.timeout(500) });
        return r.ok;
      },
      { timeoutMs: START_LIMIT_MS, everyMs: 50 },
    ).catch((err: Error) => {
      throw new SimNodeError(`${err.message} (${gone ? "it exited" : `still running after ${Date.now() - t0} ms`})${logTail(this.opts.dir, this.id)}`);
    });
  }

  /** What HAProxy would read from the agent-check port: one line. */
  async agentCheck(timeoutMs = 2000): Promise<string> {
    return (await socketExchange({ host: this.address, port: this.agentCheckPort }, null, timeoutMs, `agent-check of ${this.id}`)).trim();
  }

  /** GET a JSON endpoint of the agent. */
  async agentGet(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const r = await fetch(`${this.agentUrl}${path}`, { signal: AbortSignal.timeout(2000) });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  }

  async setGpu(state: NvsmiState): Promise<void> {
    this.nvsmi = { gpuCount: this.opts.gpuCount ?? 8, ...state };
    await writeNvsmiState(this.statePath, this.nvsmi);
  }

  async gpuFault(fault: NvsmiFault | null): Promise<void> {
    await this.setGpu(fault ? NVSMI_FAULTS[fault] : {});
    if (this.crashLooping && !this.gpuUnusable() && this.inference) {
      // The crash-looping pod's next restart finds the GPU: its server loads and listens.
      this.crashLooping = false;
      await this.setMode(this.opts.mode ?? "ready");
    }
  }

  /** nvidia-smi fails outright (exit code set): CUDA cannot open the GPU, no server can start on it. */
  private gpuUnusable(): boolean {
    return (this.nvsmi.exitCode ?? 0) !== 0;
  }

  async setMode(change: FakeInferenceMode | Partial<FakeInferenceSettings>): Promise<void> {
    await setFakeInferenceMode(this.adminUrl, typeof change === "string" ? { mode: change } : change);
  }

  /** Appends a kernel log line the agent reads for XIDs. */
  async xid(code: number): Promise<void> {
    await appendFile(this.xidLogPath, `[12345.678901] NVRM: Xid (PCI:0000:53:00): ${code}, pid=4242, name=python3, Ch 00000001\n`);
  }

  /** SIGKILL the inference server: a crash. */
  async crashInference(): Promise<void> {
    await end(this.inference, "SIGKILL");
    this.inference = null;
  }

  async killAgent(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    await end(this.agent, signal);
    this.agent = null;
  }

  /** Graceful agent stop (SIGTERM: drains first). */
  async stopAgent(): Promise<void> {
    await end(this.agent, "SIGTERM", 10_000);
    this.agent = null;
  }

  pauseAgent(): void { this.agent?.child.kill("SIGSTOP"); }
  resumeAgent(): void { this.agent?.child.kill("SIGCONT"); }

  /** SIGTERM the inference server as a planned stop does. */
  private async endPlanned(): Promise<void> {
    this.stopping = true;
    try {
      await end(this.inference, "SIGTERM");
    } finally {
      this.stopping = false;
    }
    this.inference = null;
  }

  /** A boot still under way when the drill stops (a standby woken late) must start nothing: nobody would end it. */
  private refuseWhenStopped(what: string): void {
    if (this.closed) throw new SimNodeError(`${this.id}: not starting its ${what}: the node was stopped`);
  }

  async stop(): Promise<void> {
    this.closed = true;
    await Promise.all([end(this.agent, "SIGTERM"), this.endPlanned()]);
    this.agent = null;
    this.inference = null;
    this.log.end();
  }
}
