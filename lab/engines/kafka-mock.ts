/**
 * A real Kafka-protocol broker on loopback, for the tests and the drill: librdkafka's mock
 * cluster (`test.mock.num.brokers=N`). It speaks the wire protocol (produce with acks=all,
 * consumer groups, offset commits); topics are created on first produce or metadata request.
 * Nothing is persisted: `stop()` loses every message.
 *
 * Two hosts run the same cluster. Debian's `kcat` (the default): it runs a consumer on a
 * throw-away topic against the mock cluster and prints its `bootstrap.servers` on stderr
 * (`-d mock`). `kafka-mock-host.py` (`control: true`): python3 calling librdkafka
 * through ctypes, so the drill can fail one broker and move its partitions' leaders as MSK's
 * controller would — kcat's command line cannot.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { EngineMissingError, isRunning, pauseProcess, stopChild } from "./child";

export class KcatMissingError extends EngineMissingError {
  constructor(bin: string) {
    super(bin, "kcat");
    this.name = "KcatMissingError";
  }
}

export class KafkaMockStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KafkaMockStartError";
  }
}

export interface KafkaMockOptions {
  /** Brokers in the mock cluster. Default 3 (acks=all then waits on real replicas). */
  brokers?: number;
  /** Path of the binary. Default `kcat` (or `$LLMHA_KCAT`). */
  bin?: string;
  /** How long to wait for the bootstrap line. Default 10000 ms. */
  startTimeoutMs?: number;
  /** Hosted by python3 (`kafka-mock-host.py`) with the mock API reachable: the handle's `control`. Default false (kcat). */
  control?: boolean;
}

/** librdkafka's mock API on a running cluster (brokers are numbered from 1, in `brokers` order). */
export interface KafkaMockControl {
  /** The broker's connections closed, new ones refused (it answers again after `brokerUp`). */
  brokerDown(id: number): Promise<void>;
  brokerUp(id: number): Promise<void>;
  /** A partition's leader moved to `id` (what the controller does after a broker's loss). */
  setLeader(topic: string, partition: number, id: number): Promise<void>;
  /** A topic with its partitions' replicas spread over the brokers (the mock refuses CreateTopics from clients). */
  createTopic(topic: string, partitions: number, replicationFactor: number): Promise<void>;
}

export interface KafkaMockHandle {
  /** `127.0.0.1:P1,127.0.0.1:P2,…` */
  readonly bootstrap: string;
  /** The same as a list, for kafkajs `brokers`. */
  readonly brokers: string[];
  readonly pid: number;
  /** SIGTERM, then SIGKILL after 3 s. Idempotent. */
  stop(): Promise<void>;
  /** SIGSTOP: every broker stops answering, connections stay open; resolves once all have stopped. */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): void;
  /** With `control: true`; null for kcat. */
  readonly control: KafkaMockControl | null;
}

/** The list, once a character after it shows it is whole (a read may end inside it). */
const BOOTSTRAP_RE = /bootstrap\.servers=([0-9.:,]+)[^0-9.:,]/;

/** True when `bin` runs (`kcat -V`). */
export function kcatPresent(bin = process.env.LLMHA_KCAT ?? "kcat"): boolean {
  return !spawnSync(bin, ["-V"], { stdio: "ignore", timeout: 5000 }).error;
}

/** The python3 host of the mock cluster with its mock API (this folder). */
export const KAFKA_MOCK_HOST = join(__dirname, "kafka-mock-host.py");

/** Starts a mock Kafka cluster on 127.0.0.1 and waits for its bootstrap servers. */
export async function startKafkaMock(opts: KafkaMockOptions = {}): Promise<KafkaMockHandle> {
  const n = opts.brokers ?? 3;
  if (!Number.isInteger(n) || n < 1) throw new KafkaMockStartError(`brokers ${n} must be an integer ≥ 1`);
  const timeoutMs = opts.startTimeoutMs ?? 10_000;
  let child: ChildProcess;
  let host: string;
  let py: string | null = null;
  if (opts.control) {
    // No `python3 --version` first: a pyenv shim takes seconds to answer on a loaded machine; a missing one is ENOENT below.
    py = process.env.LLMHA_PYTHON3 ?? "python3";
    host = "kafka-mock-host.py";
    child = spawn(py, [KAFKA_MOCK_HOST, String(n)], { stdio: ["pipe", "pipe", "pipe"] });
  } else {
    const bin = opts.bin ?? process.env.LLMHA_KCAT ?? "kcat";
    if (!kcatPresent(bin)) throw new KcatMissingError(bin);
    host = "kcat";
    child = spawn(bin, ["-C", "-b", "unused:9092", "-t", "llmha-mock-boot", "-X", `test.mock.num.brokers=${n}`, "-d", "mock", "-q"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  }
  // kcat prints the line among its debug log on stderr; the python host on stdout, its errors on stderr.
  const announce = opts.control ? child.stdout! : child.stderr!;
  let seen = "";
  const keepErr = (d: Buffer): void => {
    if (seen.length < 20_000) seen += d.toString("utf8");
  };
  if (opts.control) child.stderr?.on("data", keepErr);
  const bootstrap = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new KafkaMockStartError(`${host} printed no bootstrap.servers within ${timeoutMs} ms: ${seen.slice(-500)}`));
    }, timeoutMs);
    const onData = (d: Buffer): void => {
      keepErr(d);
      const m = BOOTSTRAP_RE.exec(seen);
      if (m) {
        clearTimeout(timer);
        // kcat's debug log keeps coming: read it and throw it away.
        seen = "";
        announce.off("data", onData);
        if (!opts.control) announce.resume();
        resolve(m[1]);
      }
    };
    announce.on("data", onData);
    child.once("exit", (code, sig) => {
      clearTimeout(timer);
      reject(new KafkaMockStartError(`${host} exited (${code ?? sig}) before the mock cluster came up: ${seen.slice(-500)}`));
    });
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(py !== null && err.code === "ENOENT" ? new EngineMissingError(py, "python3") : new KafkaMockStartError(`${host} failed to start: ${err.message}`));
    });
  });
  let stopped = false;
  return {
    bootstrap,
    brokers: bootstrap.split(","),
    get pid(): number {
      return child.pid ?? -1;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      child.stdin?.end();
      if (isRunning(child)) await stopChild(child);
    },
    async pause() {
      if (child.pid !== undefined && isRunning(child)) await pauseProcess(child.pid);
    },
    resume() {
      child.kill("SIGCONT");
    },
    control: opts.control ? hostControl(child, n) : null,
  };
}

/** Commands to the python host, one at a time: a line out, its `ok` or `err …` line back. */
function hostControl(child: ChildProcess, brokers: number): KafkaMockControl {
  const replies: Array<(line: string) => void> = [];
  createInterface({ input: child.stdout! }).on("line", (line) => replies.shift()?.(line));
  child.once("exit", () => {
    for (const r of replies.splice(0)) r("err the host exited");
  });
  let chain: Promise<unknown> = Promise.resolve();
  const send = (cmd: string): Promise<void> => {
    const run = async (): Promise<void> => {
      if (!isRunning(child) || !child.stdin?.writable) throw new KafkaMockStartError(`mock cluster host not running (${cmd})`);
      const line = await new Promise<string>((resolve) => {
        replies.push(resolve);
        child.stdin!.write(`${cmd}\n`);
      });
      if (line !== "ok") throw new KafkaMockStartError(`mock cluster: ${cmd}: ${line.replace(/^err /, "")}`);
    };
    const p = chain.then(run, run);
    chain = p.catch(() => undefined);
    return p;
  };
  const broker = (id: number): number => {
    if (!Number.isInteger(id) || id < 1 || id > brokers) throw new KafkaMockStartError(`broker ${id}: the cluster has brokers 1 to ${brokers}`);
    return id;
  };
  const topicName = (t: string): string => {
    if (!/^[A-Za-z0-9._-]{1,249}$/.test(t)) throw new KafkaMockStartError(`topic ${JSON.stringify(t)} is not a Kafka topic name`);
    return t;
  };
  return {
    brokerDown: async (id) => send(`down ${broker(id)}`),
    brokerUp: async (id) => send(`up ${broker(id)}`),
    setLeader: async (topic, partition, id) => send(`leader ${topicName(topic)} ${partition} ${broker(id)}`),
    createTopic: async (topic, partitions, rf) => send(`topic ${topicName(topic)} ${partitions} ${rf}`),
  };
}
