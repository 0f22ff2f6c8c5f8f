/** Shared helpers for the Redis suites: fresh key prefixes and child-process lease holders. */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pino from "pino";
import { createLogger, type Logger } from "../../agent/src/util/log";
import { waitFor } from "../../agent/src/util/net";

/** A cluster name no other test uses: a fresh key prefix per test. */
export function freshCluster(tag = "t"): string {
  return `${tag}-${randomBytes(5).toString("hex")}`;
}

/** A quiet logger for tests (set LLMHA_TEST_LOG=debug to see it). */
export function testLogger(): Logger {
  return createLogger({ level: process.env.LLMHA_TEST_LOG ?? "silent", destination: pino.destination({ fd: 2, sync: true }) });
}

export interface HolderEvent {
  ev: "acquired" | "lost" | "write" | "write-error" | "released";
  holder: string;
  t: number;
  token?: number;
  accepted?: boolean;
  atUs?: number;
  reason?: string;
  highest?: number;
}

export interface Holder {
  readonly id: string;
  readonly child: ChildProcess;
  readonly events: HolderEvent[];
  /** Waits for an event matching `pred` at or after index `from`. */
  waitEvent(pred: (e: HolderEvent) => boolean, timeoutMs: number, from?: number): Promise<HolderEvent>;
  /** True while its last acquired/lost event is `acquired`. */
  leads(): boolean;
  stop(): Promise<void>;
}

const FIXTURE = join(__dirname, "fixtures", "lease-holder.ts");

export function spawnHolder(url: string, cluster: string, id: string, settings: object, writeEveryMs = 25): Holder {
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, url, cluster, id, JSON.stringify(settings), String(writeEveryMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const events: HolderEvent[] = [];
  let buf = "";
  child.stdout?.on("data", (d: Buffer) => {
    buf += d.toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        events.push(JSON.parse(line) as HolderEvent);
      } catch {
        // not ours
      }
    }
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return {
    id,
    child,
    events,
    async waitEvent(pred, timeoutMs, from = 0) {
      return waitFor(`${id} event`, () => events.slice(from).find(pred), { timeoutMs, everyMs: 10 });
    },
    leads() {
      const last = [...events].reverse().find((e) => e.ev === "acquired" || e.ev === "lost");
      return last?.ev === "acquired";
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGCONT");
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** Every accepted write, in Redis execution order: tokens must never go down. */
export function acceptedInOrder(holders: Holder[]): HolderEvent[] {
  return holders
    .flatMap((h) => h.events.filter((e) => e.ev === "write" && e.accepted))
    .sort((a, b) => (a.atUs ?? 0) - (b.atUs ?? 0));
}

export { FreezableProxy } from "../../lab/engines/tcp-link";
