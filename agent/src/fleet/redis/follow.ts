/**
 * Every connection follows the endpoint, not only the ones that write. After a failover a
 * connection that only reads, or only writes when a key is free (the lease's acquisition), never
 * meets the READONLY error that moves a writing one: it stays on the old server — a replica, or
 * on the far side of a partition a primary again — while the process's other connection talks to
 * the new one (seen: every leader term ended at its first renew with `not-ours`).
 *
 * So each connection checks, every `everyMs`, two things: whether its server is a replica
 * (`INFO replication`), and whether another connection of this process to the same endpoint
 * reached a different server since this one connected (the `run_id` the newest connection saw is
 * where the endpoint points now). Either way it drops its socket and connects again.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../util/log";

/** Per endpoint (`host:port`): the server the most recent connection of this process reached. */
const newest = new Map<string, { runId: string; at: number }>();

export interface FollowOptions {
  /** Check period. 0 turns the checks off (the server-change callback still runs). */
  everyMs: number;
  log?: Logger;
  /** A new connection reached another server than this one's last (failover or restart). */
  onServerChange?: (from: string, to: string) => void;
}

/** Attaches the checks to an ioredis connection; they end with it. */
export function followEndpoint(redis: Redis, o: FollowOptions): void {
  const key = `${redis.options.host ?? "localhost"}:${redis.options.port ?? 6379}`;
  /** The server this connection is on now ("" while (re)connecting); `last`: the one before. */
  let runId = "";
  let last = "";
  let connectedAt = 0;
  let checking = false;
  const reconnect = (why: string): void => {
    o.log?.warn({ from: runId }, `redis connection moves: ${why}`);
    runId = "";
    redis.disconnect(true);
  };
  redis.on("ready", () => {
    const at = performance.now();
    redis.info("server").then(
      (server) => {
        const id = /^run_id:(\w+)/m.exec(server)?.[1] ?? "";
        if (!id) return;
        if (last && id !== last) o.onServerChange?.(last, id);
        runId = last = id;
        connectedAt = at;
        const seen = newest.get(key);
        if (!seen || seen.at < at) newest.set(key, { runId: id, at });
      },
      () => undefined,
    );
  });
  redis.on("close", () => {
    runId = "";
  });
  if (o.everyMs <= 0) return;
  const timer = setInterval(() => {
    if (checking || !runId || redis.status !== "ready") return;
    const seen = newest.get(key);
    if (seen && seen.runId !== runId && seen.at > connectedAt) {
      reconnect("another connection to this endpoint reached a newer server");
      return;
    }
    checking = true;
    redis
      .info("replication")
      .then(
        (repl) => {
          if (/^role:slave/m.test(repl) && runId) reconnect("its server is a replica now");
        },
        () => undefined,
      )
      .finally(() => {
        checking = false;
      });
  }, o.everyMs);
  timer.unref();
  redis.once("end", () => clearInterval(timer));
}
