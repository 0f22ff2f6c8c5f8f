/**
 * The GPUs read from one long-lived `nvidia-smi --query-gpu=… --format=csv,noheader,nounits -lms <period>`
 * child instead of one nvidia-smi per period: nvidia-smi prints one line per GPU every period, and
 * the agent parses each batch as it comes. Starting a process a second (a fork of the agent, an exec,
 * the driver's initialisation) was most of what the agent cost on a node.
 *
 * Every outcome of the per-tick path (`GpuSource`) keeps its meaning:
 * - no batch within the deadline (the GPU time limit after it was due) is `timeout`, as a hung
 *   one-shot call is: the child is killed, and while it lives (D state) no second one is started;
 * - an exit with 9, 15 or 18 is `driver-not-loaded`, `gpu-lost`, `driver-mismatch`; any other
 *   non-zero exit is `failed`; the stream is started again with backoff (a period, doubling to four)
 *   and, until a batch comes, that outcome is repeated once a period, as per-tick reads would;
 * - a field an older driver refuses by name is dropped and the stream started again at once;
 * - a GPU gone from a batch (lost, off the bus) is a batch with fewer rows: seen in that period.
 * An nvidia-smi that refuses `-lms` itself (a usage error before any batch) hands over to the
 * per-tick path for the life of the agent (`onNote` says so once).
 */
import type { ChildProcess } from "node:child_process";
import { streamTool, type ToolStream } from "../../util/run-tool";
import { exitObservation, GPU_FIELDS, GpuSource, parseGpuCsv, queryArgs, refusedField, spawnFailure, type GpuReader } from "./gpu";
import type { GpuObservation } from "./signals";
import type { AgentConfig } from "../../config/spec";

export interface GpuStreamOptions {
  path: string;
  /** How often nvidia-smi prints a batch (`-lms`): the agent's check period. */
  periodMs: number;
  /** How late a batch may be before the stream counts as hung (`LLMHA_GPU_TIMEOUT_MS`). */
  timeoutMs: number;
  /** Told once of something an operator should know: `gpu-stream-refused` (per-tick from now on), `gpu-field-dropped`. */
  onNote?: (event: "gpu-stream-refused" | "gpu-field-dropped", detail: string) => void;
  clock?: () => number;
}

/** nvidia-smi's answer to arguments it does not know (an nvidia-smi without `-lms`). */
const USAGE_ERROR = /Invalid combination of input arguments|unrecognized option|Unknown option/i;
/** More rows than any node has GPUs, without a pause: not a batch of GPU rows. */
const MAX_ROWS = 256;
const STDERR_KEEP = 4096;

/** Children alive now, killed if the agent process exits without stopping them (an uncaught error). */
const LIVE = new Set<ChildProcess>();
let exitHook = false;
function track(child: ChildProcess): void {
  LIVE.add(child);
  child.once("close", () => LIVE.delete(child));
  if (exitHook) return;
  exitHook = true;
  process.once("exit", () => {
    for (const c of LIVE) c.kill("SIGKILL");
  });
}

/** The GPU index a row starts with (the first queried field), null when it has none. */
function leadingIndex(line: string): number | null {
  const comma = line.indexOf(",");
  const t = (comma < 0 ? line : line.slice(0, comma)).trim();
  return /^\d+$/.test(t) ? Number(t) : null;
}

export class GpuStream implements GpuReader {
  readonly paces = true;
  readonly droppedFields: string[] = [];
  private fields: string[] = [...GPU_FIELDS];
  private readonly clock: () => number;
  /** The child printing batches now. */
  private stream: ToolStream | null = null;
  /** A child killed for missing its deadline that has not exited yet (D state). */
  private hung: ChildProcess | null = null;
  private startedAt = 0;
  /** When the running child's last batch came (null: none yet). */
  private lastBatchAt: number | null = null;
  /** A child of this source has printed a batch: a usage error after that is not "no -lms". */
  private everBatch = false;
  private rows: string[] = [];
  private lastIndex: number | null = null;
  /** The most rows a batch has had: a batch that reaches it is complete without waiting for the pause. */
  private widest = 0;
  private quiet: NodeJS.Timeout | null = null;
  private readonly quietMs: number;
  private stderr = "";
  /** The newest observation nobody has read yet. */
  private unread: GpuObservation | null = null;
  /** What reads repeat while no child prints (an exit's meaning, a hang); cleared by the next batch. */
  private failure: GpuObservation | null = null;
  private waiter: ((o: GpuObservation | null) => void) | null = null;
  private waitTimer: NodeJS.Timeout | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  /** Exits in a row without a batch between them: the restart backoff. */
  private fails = 0;
  private stopped = false;
  private fallback: GpuSource | null = null;
  private lastFallbackRead = 0;
  /** When `read` last returned. */
  private lastReturnAt = 0;

  constructor(private readonly o: GpuStreamOptions) {
    this.clock = o.clock ?? Date.now;
    // Rows of one batch come together; a pause this long after a row ends the batch (one fewer GPU).
    this.quietMs = Math.min(250, Math.max(20, Math.floor(o.periodMs / 4)));
  }

  /** `stream`, or `per-tick` once nvidia-smi refused `-lms`. */
  get mode(): "stream" | "per-tick" {
    return this.fallback ? "per-tick" : "stream";
  }

  /** The pid of the child printing batches now (tests, and the stop path's proof). */
  get pid(): number | null {
    return this.stream?.child.pid ?? null;
  }

  async read(): Promise<GpuObservation> {
    let obs = await this.next();
    // A child that prints far faster than asked (not nvidia-smi's way) must not make the agent evaluate as
    // fast: a result is returned no sooner than a quarter period after the last, the newest by then. The
    // wait is taken only for such a result: a timer each period for nothing cost the agent a wake a second.
    const soon = this.lastReturnAt + this.o.periodMs / 4 - this.clock();
    if (soon > 0) {
      await new Promise((r) => setTimeout(r, soon));
      if (this.unread) {
        obs = this.unread;
        this.unread = null;
      }
    }
    this.lastReturnAt = this.clock();
    return obs;
  }

  private async next(): Promise<GpuObservation> {
    if (this.stopped) return { kind: "failed", exitCode: null, detail: "the GPU reader is stopped" };
    if (!this.fallback && !this.stream && !this.hung && !this.restartTimer && !this.unread && !this.failure) this.spawn();
    for (;;) {
      const u = this.unread;
      if (u) {
        this.unread = null;
        return u;
      }
      if (this.fallback) return this.readFallback();
      if (this.stream || (this.restartTimer && !this.failure)) {
        // A batch is coming (a child prints, or one that ended cleanly is about to start again): wait for it, up to the deadline.
        const due = (this.lastBatchAt === null ? this.startedAt : this.lastBatchAt + this.o.periodMs) + this.o.timeoutMs;
        const left = due - this.clock();
        if (left <= 0) return this.hang();
        const got = await this.wait(left);
        if (got) return got;
        continue;
      }
      // No child prints (an exit's restart pending, or a hung one not gone): its outcome once a period.
      const got = await this.wait(this.o.periodMs);
      if (got) return got;
      if (this.stream || this.fallback || !this.failure) continue;
      return this.failure;
    }
  }

  stop(): void {
    this.stopped = true;
    for (const t of [this.quiet, this.waitTimer, this.restartTimer]) if (t) clearTimeout(t);
    this.quiet = this.waitTimer = this.restartTimer = null;
    this.waiter = null;
    this.stream?.kill();
    this.stream = null;
    if (this.hung && this.hung.exitCode === null && this.hung.signalCode === null) this.hung.kill("SIGKILL");
  }

  /** Resolves with the next observation, or null after `ms`. */
  private wait(ms: number): Promise<GpuObservation | null> {
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.waitTimer = setTimeout(() => {
        this.waitTimer = null;
        this.waiter = null;
        resolve(null);
      }, ms);
      this.waitTimer.unref?.();
    });
  }

  private deliver(obs: GpuObservation): void {
    const w = this.waiter;
    if (w) {
      if (this.waitTimer) clearTimeout(this.waitTimer);
      this.waitTimer = null;
      this.waiter = null;
      w(obs);
    } else {
      this.unread = obs;
    }
  }

  private spawn(): void {
    this.restartTimer = null;
    if (this.stopped) return;
    this.rows = [];
    this.lastIndex = null;
    this.stderr = "";
    this.lastBatchAt = null;
    this.startedAt = this.clock();
    let s: ToolStream | null = null;
    s = streamTool(this.o.path, [...queryArgs(this.fields), `-lms`, String(this.o.periodMs)], {
      onLine: (line, cut) => {
        if (this.stream === s) this.row(line, cut);
      },
      onRead: () => {
        if (this.stream === s) this.awaitRest();
      },
      onStderr: (text) => {
        if (this.stream === s && this.stderr.length < STDERR_KEEP) this.stderr += text;
      },
      onExit: (code, signal, err) => this.exited(s, code, signal, err),
    });
    // A spawn that threw has already reported its exit (and scheduled a restart).
    if (!s) return;
    this.stream = s;
    track(s.child);
  }

  private row(line: string, cut: boolean): void {
    if (line.trim() === "") return;
    const index = leadingIndex(line);
    // Rows are listed by index from 0: an index not above the last one starts the next batch.
    if (index !== null && this.lastIndex !== null && index <= this.lastIndex && this.rows.length) this.endBatch();
    this.rows.push(line);
    this.lastIndex = index;
    if (cut || this.rows.length >= MAX_ROWS || (this.widest > 0 && this.rows.length >= this.widest)) this.endBatch();
  }

  /**
   * After a read: a batch still short of its rows ends when none follows within `quietMs`.
   * Armed once a read, and only then: a timer set at a batch's first row and cleared by its last,
   * in the same read, would still wake the process when it was due (Node leaves a cleared
   * timer's wake-up in place) — one wake a second for nothing.
   */
  private awaitRest(): void {
    if (!this.rows.length) return;
    if (this.quiet) this.quiet.refresh();
    else {
      this.quiet = setTimeout(() => this.endBatch(), this.quietMs);
      this.quiet.unref?.();
    }
  }

  private endBatch(): void {
    if (this.quiet) clearTimeout(this.quiet);
    this.quiet = null;
    if (!this.rows.length) return;
    const rows = this.rows;
    this.rows = [];
    this.lastIndex = null;
    this.lastBatchAt = this.clock();
    this.everBatch = true;
    this.fails = 0;
    this.failure = null;
    let obs: GpuObservation;
    try {
      obs = { kind: "ok", gpus: parseGpuCsv(rows.join("\n"), this.fields) };
      this.widest = Math.max(this.widest, rows.length);
    } catch (e) {
      obs = { kind: "garbage", detail: (e as Error).message };
    }
    this.deliver(obs);
  }

  /** No batch by the deadline: what a hung one-shot call is. The child is killed; a new one waits until it is gone. */
  private hang(): GpuObservation {
    const obs: GpuObservation = { kind: "timeout", detail: `nvidia-smi printed no GPU rows within ${this.o.timeoutMs} ms of when they were due` };
    const s = this.stream;
    this.failure = obs;
    if (s) {
      this.stream = null;
      this.hung = s.child;
      s.kill();
      this.failure = { kind: "timeout", detail: `an earlier nvidia-smi (pid ${s.child.pid}) has not exited` };
    }
    return obs;
  }

  private exited(s: ToolStream | null, code: number | null, signal: NodeJS.Signals | null, err?: NodeJS.ErrnoException): void {
    if (this.stopped) return;
    if (s !== null && s.child === this.hung) {
      // The child killed at its deadline is gone at last: start again (the hang stays the outcome until a batch).
      this.hung = null;
      this.failure = { kind: "timeout", detail: `nvidia-smi printed no GPU rows within ${this.o.timeoutMs} ms of when they were due; starting it again` };
      this.restart();
      return;
    }
    if (s !== null && this.stream !== s) return;
    // Rows it printed just before a clean end are its last batch; before a failing one, its error text.
    let pending = "";
    if (code === 0) this.endBatch();
    else {
      if (this.quiet) clearTimeout(this.quiet);
      this.quiet = null;
      pending = this.rows.join("\n");
      this.rows = [];
    }
    this.stream = null;
    const output = `${this.stderr}\n${pending}`;
    let obs: GpuObservation | null;
    if (err) obs = spawnFailure(this.o.path, err);
    else if (code === 0) obs = this.lastBatchAt === null ? { kind: "garbage", detail: "nvidia-smi -lms ended without printing GPU rows" } : null;
    else if (code === null) obs = { kind: "failed", exitCode: null, detail: `nvidia-smi -lms ended by ${signal ?? "a signal"}` };
    else {
      obs = exitObservation(code, output);
      if (obs.kind === "failed") {
        const refused = refusedField(output, this.fields);
        if (refused) {
          this.fields = this.fields.filter((f) => f !== refused);
          this.droppedFields.push(refused);
          this.o.onNote?.("gpu-field-dropped", `nvidia-smi refused the field ${refused}: it is no longer asked for`);
          if (this.fields.length > 1) {
            this.spawn();
            return;
          }
          obs = { kind: "failed", exitCode: null, detail: "nvidia-smi refused every field" };
        } else if (!this.everBatch && USAGE_ERROR.test(output)) {
          this.o.onNote?.("gpu-stream-refused", `nvidia-smi refused -lms (${obs.detail}): one nvidia-smi per period from now on`);
          this.fallback = new GpuSource(this.o.path, this.o.timeoutMs, this.fields);
          this.failure = null;
          const w = this.waiter;
          if (w) {
            if (this.waitTimer) clearTimeout(this.waitTimer);
            this.waiter = this.waitTimer = null;
            void this.readFallback().then(w);
          }
          return;
        }
      }
    }
    if (obs) {
      this.failure = obs;
      this.deliver(obs);
    }
    this.restart();
  }

  /** Starts the stream again after a period, doubling with each exit in a row up to four periods. */
  private restart(): void {
    if (this.stopped || this.restartTimer) return;
    const delay = this.o.periodMs * 2 ** Math.min(this.fails, 2);
    this.fails += 1;
    this.restartTimer = setTimeout(() => this.spawn(), delay);
    this.restartTimer.unref?.();
  }

  /** The per-tick path, paced to one read a period (the caller does not sleep between reads). */
  private async readFallback(): Promise<GpuObservation> {
    const wait = this.lastFallbackRead + this.o.periodMs - this.clock();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    this.lastFallbackRead = this.clock();
    return this.fallback!.read();
  }
}

/** The agent's GPU reader: one long-lived `nvidia-smi -lms` (the default), or one nvidia-smi a period (`LLMHA_GPU_QUERY=per-tick`). */
export function openGpuReader(cfg: Pick<AgentConfig, "gpuQuery" | "nvidiaSmi" | "intervalMs" | "gpuTimeoutMs">, onNote: GpuStreamOptions["onNote"]): GpuReader {
  if (cfg.gpuQuery === "per-tick") return new GpuSource(cfg.nvidiaSmi, cfg.gpuTimeoutMs);
  return new GpuStream({ path: cfg.nvidiaSmi, periodMs: cfg.intervalMs, timeoutMs: cfg.gpuTimeoutMs, onNote });
}
