/**
 * A real `redis-server` on loopback, for the tests, the drill and the bench. Persistence
 * is off (`--save '' --appendonly no`): a restart loses every key, which is exactly the
 * "Redis restarted, lease key lost" fault the lease must survive.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { loadLibrary } from "../../agent/src/fleet/redis/functions";
import { allLibraries } from "../../agent/src/fleet/redis/libraries";
import { freePort, sleep } from "../../agent/src/util/net";
import type { RoleName } from "../../agent/src/fleet/redis/roles";
import { EngineMissingError, isRunning, pauseProcess, stopChild } from "./child";
import { LAB_ADMIN_USER, labUrlAs, writeLabAcl, type LabRedisAcl } from "./redis-acl";

export class RedisServerMissingError extends EngineMissingError {
  constructor(bin: string) {
    super(bin, "redis-server");
    this.name = "RedisServerMissingError";
  }
}

export class RedisServerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RedisServerStartError";
  }
}

export interface RedisServerOptions {
  /** TCP port on 127.0.0.1. Default: a free port chosen by the kernel. */
  port?: number;
  /** Extra arguments, e.g. `["--requirepass", "s3cret"]`. Default none. */
  args?: string[];
  /** Working directory of the server. Default: a fresh temporary folder, removed on `stop()`. */
  dir?: string;
  /** Path of the binary. Default `redis-server` (or `$LLMHA_REDIS_SERVER`). */
  bin?: string;
  /** How long to wait for PING to answer. Default 10000 ms. */
  startTimeoutMs?: number;
  /** Password for the readiness PING when `args` sets `--requirepass`. Default none. */
  password?: string;
  /**
   * Start with the llm-ha roles' ACL file (`user default off`): `url` then logs in as the
   * lab's admin, `urlAs(role)` as a role. Kept across `restart()`. Default none (the default user, no password).
   */
  acl?: LabRedisAcl;
  /**
   * Load llm-ha's Redis functions libraries at each start, as the lab's admin (or the
   * default user): what the controller does in production. A replica (`--replicaof`) gets
   * them from its primary. Default true.
   */
  functions?: boolean;
}

export interface RedisServerHandle {
  /** `redis://127.0.0.1:<port>` (no password in it); with `acl`, the lab admin's URL. */
  readonly url: string;
  /** With `acl`: a URL that logs in as the role. */
  urlAs(role: RoleName): string;
  readonly port: number;
  /** Pid of the running server; changes on `restart()`. */
  readonly pid: number;
  /** SIGTERM, then SIGKILL after 3 s; removes the temporary folder. Idempotent. */
  stop(): Promise<void>;
  /** Sends a signal to the server without waiting. */
  kill(signal: NodeJS.Signals): void;
  /**
   * Stops and starts again on the same port; every key is lost. `args` replace the start
   * arguments from then on (e.g. a failed primary that comes back as a replica of the new one).
   */
  restart(args?: string[]): Promise<void>;
  /** SIGSTOP: the server stops answering, connections stay open; resolves once it has stopped. */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): void;
}

/** The redis-server binary (`$LLMHA_REDIS_SERVER` or `redis-server` on PATH); it runs the sentinels too (`--sentinel`). */
export function redisServerBinary(): string {
  return process.env.LLMHA_REDIS_SERVER ?? "redis-server";
}

function binaryExists(bin: string): boolean {
  const r = spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 5000 });
  return !r.error;
}

/** One PING over a raw socket; resolves true on `+PONG`. */
function ping(port: number, password: string | undefined, timeoutMs: number, user?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host: "127.0.0.1", port });
    let buf = "";
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.on("error", () => done(false));
    sock.on("connect", () => {
      sock.write(password ? `AUTH ${user ? `${user} ` : ""}${password}\r\nPING\r\n` : "PING\r\n");
    });
    sock.on("data", (d) => {
      buf += d.toString("utf8");
      if (buf.includes("+PONG")) done(true);
      else if (buf.includes("-")) done(false);
    });
  });
}

/** Starts a real redis-server on 127.0.0.1 and waits until it answers PING. */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const bin = opts.bin ?? redisServerBinary();
  if (!binaryExists(bin)) throw new RedisServerMissingError(bin);
  const port = opts.port ?? (await freePort());
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "llmha-redis-"));
  const startTimeoutMs = opts.startTimeoutMs ?? 10_000;
  let child: ChildProcess | null = null;
  let stderr = "";

  let extra = opts.args ?? [];
  const acl = opts.acl;
  // The lab admin is also the replication user: a server that becomes a replica (a failover) must log in to its primary.
  const aclArgs = acl ? ["--aclfile", writeLabAcl(dir, acl), "--masteruser", LAB_ADMIN_USER, "--masterauth", acl.adminPassword] : [];
  const launch = async (): Promise<void> => {
    stderr = "";
    const args = [
      "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
      "--dir", dir, "--daemonize", "no", "--loglevel", "warning",
      // As the ElastiCache parameter group (infra/redis.ts): the lease and the fence are never evicted; a full Redis refuses writes instead.
      "--maxmemory-policy", "noeviction",
      // A replica's full sync starts at once, not after Redis 7's 5 s wait for more replicas to share it: a server
      // back as a replica is in sync in milliseconds, which narrows every window in which it holds less than its primary.
      "--repl-diskless-sync-delay", "0", ...aclArgs, ...extra,
    ];
    const c = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
    child = c;
    c.stderr?.on("data", (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString("utf8");
    });
    const deadline = performance.now() + startTimeoutMs;
    for (;;) {
      if (c.exitCode !== null) {
        throw new RedisServerStartError(`redis-server exited with code ${c.exitCode} on port ${port}: ${stderr.trim()}`);
      }
      if (await ping(port, acl ? acl.adminPassword : opts.password, 500, acl ? LAB_ADMIN_USER : undefined)) return;
      if (performance.now() > deadline) {
        c.kill("SIGKILL");
        throw new RedisServerStartError(`redis-server on port ${port} did not answer PING within ${startTimeoutMs} ms`);
      }
      await sleep(20);
    }
  };

  // The lab admin loads the libraries (production roles may not, but the controller's).
  const loadFunctions = async (): Promise<void> => {
    if (opts.functions === false) return;
    const r = new Redis({
      host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false,
      ...(acl ? { username: LAB_ADMIN_USER, password: acl.adminPassword } : opts.password ? { password: opts.password } : {}),
    });
    try {
      await r.connect();
      for (const lib of allLibraries()) await loadLibrary(r, lib);
    } catch (err) {
      if (!/READONLY|MASTERDOWN|LOADING/.test((err as Error).message)) throw new RedisServerStartError(`redis-server on port ${port}: loading llm-ha's functions failed: ${(err as Error).message}`);
    } finally {
      r.disconnect();
    }
  };

  const halt = async (): Promise<void> => {
    if (child) await stopChild(child);
  };

  await launch();
  await loadFunctions();
  let stopped = false;
  return {
    url: acl ? labUrlAs(acl, port, LAB_ADMIN_USER) : `redis://127.0.0.1:${port}`,
    urlAs(role: RoleName) {
      if (!acl) throw new RedisServerStartError("urlAs needs a server started with `acl`");
      return labUrlAs(acl, port, role);
    },
    port,
    get pid(): number {
      return child?.pid ?? -1;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await halt();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
    kill(signal) {
      child?.kill(signal);
    },
    async restart(args?: string[]) {
      await halt();
      if (args) extra = args;
      await launch();
      await loadFunctions();
    },
    async pause() {
      if (child?.pid !== undefined && isRunning(child)) await pauseProcess(child.pid);
    },
    resume() {
      child?.kill("SIGCONT");
    },
  };
}
