/**
 * A real Kafka-protocol broker on loopback, for the tests and the drill: librdkafka's mock
 * cluster, served by Debian's `kcat` (`-X test.mock.num.brokers=N`). It speaks the wire
 * protocol (produce with acks=all, consumer groups, offset commits); topics are created on
 * first produce or metadata request. Nothing is persisted: `stop()` loses every message.
 *
 * `kcat` itself is only the host process: it runs a consumer on a throw-away topic against
 * the mock cluster and prints the cluster's `bootstrap.servers` on stderr (`-d mock`).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { EngineMissingError, isRunning, stopChild } from "./child";

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
}

export interface KafkaMockHandle {
  /** `127.0.0.1:P1,127.0.0.1:P2,…` */
  readonly bootstrap: string;
  /** The same as a list, for kafkajs `brokers`. */
  readonly brokers: string[];
  readonly pid: number;
  /** SIGTERM, then SIGKILL after 3 s. Idempotent. */
  stop(): Promise<void>;
  /** SIGSTOP: every broker stops answering, connections stay open. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

const BOOTSTRAP_RE = /bootstrap\.servers=([0-9.:,]+)/;

/** True when `bin` runs (`kcat -V`). */
export function kcatPresent(bin = process.env.LLMHA_KCAT ?? "kcat"): boolean {
  return !spawnSync(bin, ["-V"], { stdio: "ignore", timeout: 5000 }).error;
}

/** Starts a mock Kafka cluster on 127.0.0.1 and waits for its bootstrap servers. */
export async function startKafkaMock(opts: KafkaMockOptions = {}): Promise<KafkaMockHandle> {
  const bin = opts.bin ?? process.env.LLMHA_KCAT ?? "kcat";
  if (!kcatPresent(bin)) throw new KcatMissingError(bin);
  const n = opts.brokers ?? 3;
  if (!Number.isInteger(n) || n < 1) throw new KafkaMockStartError(`brokers ${n} must be an integer ≥ 1`);
  const timeoutMs = opts.startTimeoutMs ?? 10_000;
  const child: ChildProcess = spawn(bin, ["-C", "-b", "unused:9092", "-t", "llmha-mock-boot", "-X", `test.mock.num.brokers=${n}`, "-d", "mock", "-q"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let seen = "";
  const bootstrap = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new KafkaMockStartError(`kcat printed no bootstrap.servers within ${timeoutMs} ms: ${seen.slice(-500)}`));
    }, timeoutMs);
    const onData = (d: Buffer): void => {
      if (seen.length < 20_000) seen += d.toString("utf8");
      const m = BOOTSTRAP_RE.exec(seen);
      if (m) {
        clearTimeout(timer);
        // The mock's debug log keeps coming: read it and throw it away.
        seen = "";
        child.stderr?.off("data", onData);
        child.stderr?.resume();
        resolve(m[1]);
      }
    };
    child.stderr?.on("data", onData);
    child.once("exit", (code, sig) => {
      clearTimeout(timer);
      reject(new KafkaMockStartError(`kcat exited (${code ?? sig}) before the mock cluster came up: ${seen.slice(-500)}`));
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new KafkaMockStartError(`kcat failed to start: ${err.message}`));
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
      if (isRunning(child)) await stopChild(child);
    },
    pause() {
      child.kill("SIGSTOP");
    },
    resume() {
      child.kill("SIGCONT");
    },
  };
}
