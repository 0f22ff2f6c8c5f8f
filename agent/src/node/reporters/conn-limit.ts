/**
 * Connection limits for the health listeners: one client address may hold only
 * a few sockets at once, so 300 slowloris HTTP sockets or 600 idle agent-check sockets from
 * one pod cannot take the room the kubelet's probes and HAProxy's checks need. The node's
 * own loopback (`127.0.0.1`, `::1`: a local probe) is never refused for the total.
 *
 * A refused socket is destroyed at once, before any byte is read: it costs the agent a
 * descriptor for microseconds, not for a timeout.
 */
import type { Server, Socket } from "node:net";

export interface ConnectionLimits {
  /** Sockets one client address may hold at once. */
  perSource: number;
  /** Sockets from all other addresses together; the node's loopback does not count. */
  total: number;
}

const LOCAL = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

/** Sockets kept for the node's loopback under a server's hard cap (`maxConnections`). */
export const LOCAL_RESERVE = 32;

/**
 * Applies the hard cap (`server.maxConnections`, every socket) and, under it, the limits:
 * `perSource` per address and, for all addresses but the loopback, the hard cap less
 * `LOCAL_RESERVE` (a small cap is left whole). Returns a function that tells how many sockets were refused.
 */
export function limitServer(server: Server, maxConnections: number, perSource: number): () => number {
  server.maxConnections = maxConnections;
  return limitConnections(server, { perSource, total: maxConnections > 2 * LOCAL_RESERVE ? maxConnections - LOCAL_RESERVE : maxConnections });
}

/** Counts sockets per remote address on `server`; returns a function that tells how many were refused. */
export function limitConnections(server: Server, limits: ConnectionLimits, onRefused?: (source: string) => void): () => number {
  const bySource = new Map<string, number>();
  let others = 0;
  let refused = 0;
  server.on("connection", (sock: Socket) => {
    const source = sock.remoteAddress ?? "?";
    const local = LOCAL.has(source);
    const n = bySource.get(source) ?? 0;
    if (n >= limits.perSource || (!local && others >= limits.total)) {
      refused += 1;
      onRefused?.(source);
      sock.destroy();
      return;
    }
    bySource.set(source, n + 1);
    if (!local) others += 1;
    sock.once("close", () => {
      const left = (bySource.get(source) ?? 1) - 1;
      if (left <= 0) bySource.delete(source);
      else bySource.set(source, left);
      if (!local) others -= 1;
    });
  });
  return () => refused;
}
