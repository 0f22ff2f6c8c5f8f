/**
 * The one way llm-ha connects to Redis: `redis://` or `rediss://` (TLS), auth in the URL or
 * given apart, reconnect with capped exponential backoff, every command with a timeout, a
 * silent connection left and made again (socket timeout, TCP keep-alive),
 * commands failing at once while disconnected (the agent degrades instead of queueing),
 * and the password never in a log line.
 */
import { Redis, type RedisOptions } from "ioredis";
import type { ConnectionOptions } from "node:tls";
import type { Logger } from "../../util/log";
import { connect as netConnect } from "node:net";
import { safeUrl } from "../../util/log";
import { redisAuthFromEnv } from "./auth";
import { useFunctions } from "./functions";
import { allLibraries } from "./libraries";
import { followEndpoint } from "./follow";

export class RedisUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RedisUrlError";
  }
}

export interface RedisClientOptions {
  /** Client name shown by `CLIENT LIST` (e.g. `llmha-agent-<node>`). */
  name: string;
  log: Logger;
  /** TLS options; `rediss://` turns TLS on with `{}` when this is omitted. */
  tls?: ConnectionOptions;
  /** Overrides the password in the URL (ElastiCache auth token from a secret). */
  password?: string;
  /** ACL user name; overrides the URL's. */
  username?: string;
  /**
   * Where `LLMHA_REDIS_USER` / `LLMHA_REDIS_PASSWORD_FILE` are read when `username` /
   * `password` are not given (auth.ts). Default `process.env`.
   */
  env?: NodeJS.ProcessEnv;
  /** Per-command timeout. Default 1000 ms. */
  commandTimeoutMs?: number;
  /**
   * A connection that has a command outstanding and receives nothing for this long is
   * destroyed and made again (to whatever the endpoint's name points at now): a primary
   * that went silent without closing its connections (a failover, a partition, a frozen
   * process) is left in seconds, not after the kernel's ~15 min of TCP retransmissions.
   * Default 2000 ms; longer than any llm-ha command (`WAIT` ≤ 500 ms).
   */
  socketTimeoutMs?: number;
  /** TCP keep-alive probes on idle connections start after this. Default 5000 ms. */
  keepAliveMs?: number;
  /**
   * Called when a new connection reaches another Redis server than the last one (its
   * `run_id` changed: a failover to a replica, a restart): what that server holds may be
   * older than what this process wrote.
   */
  onServerChange?: (from: string, to: string) => void;
  /**
   * How often the connection checks that it is still where the endpoint points (follow.ts):
   * not on a replica, not on a server another connection of this process has left. Default
   * 1000 ms; 0 turns it off.
   */
  followEndpointMs?: number;
  /** TCP/TLS connect timeout. Default 2000 ms. */
  connectTimeoutMs?: number;
  /** First reconnect delay; doubles up to `maxBackoffMs`. Default 100 ms. */
  minBackoffMs?: number;
  /**
   * Longest wait between reconnect attempts. Default 2000 ms. A process that heartbeats passes
   * its period: it then tries no more often than it writes anyway, and is back at most one
   * period after the endpoint reaches a server again (after a failover every agent lost its
   * connection at the same moment; with a 2 s cap they all came back 1.1–1.4 s after the new
   * primary was reachable).
   */
  maxBackoffMs?: number;
  /**
   * This process is the controller (or an agent that contends for the lease): its Redis user
   * may `FUNCTION LOAD`, so the client loads llm-ha's functions libraries at each connection
   * and again when a call finds them gone. Default false: calls wait for the controller to
   * load them (functions.ts).
   */
  loadFunctions?: boolean;
}

/** An ioredis client set up to call llm-ha's Redis functions, plus a connectivity flag. */
export interface RedisClient {
  readonly redis: Redis;
  /** True while the connection is ready for commands. */
  readonly connected: boolean;
  /** `redis://host:port/db` with the password replaced, for logs and `/status`. */
  readonly safeUrl: string;
  /**
   * True once the server said `cluster_enabled:1`: llm-ha's scripts need one primary
   * (ElastiCache with cluster mode disabled); every fenced write would fail there.
   */
  readonly clusterMode: boolean;
  /** Resolves true once connected, or false after `timeoutMs`. */
  whenReady(timeoutMs: number): Promise<boolean>;
  /** QUIT with a timeout, then disconnect. */
  close(): Promise<void>;
}

/**
 * An ioredis error as a person should read it. A port that answers something other than
 * RESP (an HTTP server, an SSH banner, a wrong service) makes the parser throw
 * `Unknown RESP type 117 "u". Please report this.` — that is not a bug to report but the
 * wrong endpoint.
 */
export function describeRedisError(message: string): string {
  if (/Unknown RESP type|Protocol error|Parser? error/i.test(message)) {
    return `the server does not speak the Redis protocol (wrong host or port?): ${message.replace(/\s*Please report this\.?/, "")}`;
  }
  return message;
}

/**
 * Whether whatever listens at host:port answers a `PING` in RESP (a Redis reply starts with
 * one of `+-:$*` or a RESP3 type byte), with the first bytes it sent; null when nothing
 * answered in time or the connection failed (that says nothing about the protocol).
 * Used to explain a failed first contact: a closed socket or EPIPE can hide the real cause.
 */
export function speaksResp(host: string, port: number, timeoutMs = 1000): Promise<{ resp: boolean; firstBytes: string } | null> {
  return new Promise((resolve) => {
    const sock = netConnect({ host, port });
    const done = (v: { resp: boolean; firstBytes: string } | null): void => {
      clearTimeout(t);
      sock.destroy();
      resolve(v);
    };
    const t = setTimeout(() => done(null), timeoutMs);
    sock.on("connect", () => sock.write("PING\r\n"));
    sock.on("data", (b: Buffer) => {
      const text = b.toString("latin1");
      done({ resp: /^[+\-:$*_,#!=(%~>|]/.test(text), firstBytes: text.slice(0, 40).replace(/[^\x20-\x7e]/g, "·") });
    });
    sock.on("error", () => done(null));
  });
}

/** What the agent logs when its Redis endpoint runs in cluster mode. */
export const CLUSTER_MODE_MESSAGE =
  "Redis runs in cluster mode: llm-ha needs one primary with replicas (ElastiCache: cluster mode disabled; its scripts touch keys of several hash slots). Registry, lease and fenced writes will fail: the agent serves its local state only";

/**
 * Capped exponential backoff for reconnects, with "equal jitter": between half and all of the
 * capped delay (`random` in [0, 1)). Clients that lost their connection together (a failover
 * drops every agent's at once) do not come back in lockstep, and none waits longer than the cap.
 */
export function reconnectDelay(attempt: number, minMs: number, maxMs: number, random: number = Math.random()): number {
  const capped = Math.min(maxMs, minMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(capped / 2 + (capped / 2) * random);
}

export function createRedisClient(url: string, opts: RedisClientOptions): RedisClient {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RedisUrlError(`LLMHA_REDIS_URL is not a URL: ${safeUrl(url)}`);
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new RedisUrlError(`LLMHA_REDIS_URL must start with redis:// or rediss://, got ${parsed.protocol}//`);
  }
  const minMs = opts.minBackoffMs ?? 100;
  const maxMs = opts.maxBackoffMs ?? 2000;
  const shown = safeUrl(url);
  const log = opts.log.child({ component: "redis", redis: shown, client: opts.name });
  const envAuth = redisAuthFromEnv(opts.env ?? process.env);
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0;
  const options: RedisOptions = {
    host: parsed.hostname,
    port: parsed.port ? Number(parsed.port) : 6379,
    db: Number.isInteger(db) ? db : 0,
    username: opts.username ?? envAuth.username ?? (parsed.username ? decodeURIComponent(parsed.username) : undefined),
    password: opts.password ?? envAuth.password ?? (parsed.password ? decodeURIComponent(parsed.password) : undefined),
    tls: parsed.protocol === "rediss:" ? (opts.tls ?? {}) : opts.tls,
    connectionName: opts.name,
    commandTimeout: opts.commandTimeoutMs ?? 1000,
    socketTimeout: opts.socketTimeoutMs ?? 2000,
    keepAlive: opts.keepAliveMs ?? 5000,
    connectTimeout: opts.connectTimeoutMs ?? 2000,
    // A close while a reconnect is under way waits this long for the socket (ioredis default 2 s): shutdown must not stall on a dead Redis.
    disconnectTimeout: 200,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    lazyConnect: false,
    retryStrategy: (attempt: number) => reconnectDelay(attempt, minMs, maxMs),
    // After a failover the old primary turns read-only: reconnect so we reach the new one.
    reconnectOnError: (err: Error) => err.message.startsWith("READONLY"),
  };
  const redis = new Redis(options);
  useFunctions(redis, { load: opts.loadFunctions ? allLibraries() : undefined, log });

  let ready = false;
  let everReady = false;
  let lastError = "";
  let clusterMode = false;
  followEndpoint(redis, {
    everyMs: opts.followEndpointMs ?? 1000,
    log,
    onServerChange: (from, to) => {
      log.warn({ from, to }, "redis endpoint now reaches another server (failover or restart): its data may be older than ours");
      opts.onServerChange?.(from, to);
    },
  });
  redis.on("ready", () => {
    ready = true;
    log.info({ reconnected: everReady }, everReady ? "redis reconnected" : "redis connected");
    everReady = true;
    lastError = "";
    // The mode llm-ha supports is stated, not assumed: a cluster-mode endpoint is named at once.
    redis.info("cluster").then(
      (cluster) => {
        clusterMode = /^cluster_enabled:1\b/m.test(cluster);
        if (clusterMode) log.error(`${CLUSTER_MODE_MESSAGE} (${shown})`);
      },
      () => undefined,
    );
  });
  redis.on("close", () => {
    if (ready) log.warn("redis connection lost");
    ready = false;
  });
  redis.on("error", (err: Error) => {
    // ioredis repeats the same error on every reconnect attempt: log changes only.
    if (err.message !== lastError) log.warn({ err: describeRedisError(err.message) }, "redis error");
    lastError = err.message;
  });

  return {
    redis,
    get connected() {
      return ready && redis.status === "ready";
    },
    safeUrl: shown,
    get clusterMode() {
      return clusterMode;
    },
    whenReady(timeoutMs: number) {
      if (ready && redis.status === "ready") return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean): void => {
          clearTimeout(t);
          redis.off("ready", onReady);
          resolve(ok);
        };
        const onReady = (): void => done(true);
        const t = setTimeout(() => done(false), timeoutMs);
        redis.on("ready", onReady);
      });
    },
    async close() {
      ready = false;
      if (redis.status === "end") return;
      try {
        await Promise.race([redis.quit(), new Promise((r) => setTimeout(r, 500).unref())]);
      } catch {
        // already gone
      }
      redis.disconnect(false);
    },
  };
}
