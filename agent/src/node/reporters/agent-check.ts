import { createServer, type Server } from "node:net";
import type { Decision } from "../../types";
import { limitServer } from "./conn-limit";

/**
 * The HAProxy agent-check reply for a decision (one line, `\n`-terminated):
 * `up ready N%` serving (N = share of `weight 100`), `drain` while loading, draining or
 * UNKNOWN, `down #REASON` when UNHEALTHY/UNREACHABLE — with the space: HAProxy 2.6
 * reads `down#reason` as an agent error and keeps the server UP.
 *
 * Every `up` carries `ready`: HAProxy keeps `drain` as an administrative state that a plain
 * `up N%` does not lift (seen on 2.6: `drain` then `up 100%` stays DRAIN). Sending `ready`
 * only for a while after a drain left a node drained for good in any HAProxy that missed
 * that window (restarted, partitioned, a new L1 replica); `ready` on a server already READY
 * changes nothing, so it is always sent.
 */
export class AgentCheckResponder {
  reply(d: Decision, draining: boolean): string {
    if (draining || d.phase === "draining" || d.phase === "loading" || (d.phase === "down" && d.status === "UNKNOWN")) return "drain";
    if (d.phase === "down") return `down #${d.reasons[0]?.code ?? d.status}`;
    return `up ready ${Math.max(1, Math.min(100, Math.round(d.weight)))}%`;
  }
}

export interface AgentCheckServerOptions {
  /** Connections held at once from all addresses but the node's loopback. Default 1024. */
  maxConnections?: number;
  /** Connections one client address may hold at once: one pod's idle sockets cannot starve HAProxy's checks. Default 32. */
  maxPerSource?: number;
  /** A connection silent this long after the reply is destroyed. Default 1000 ms (HAProxy reads the line at once and closes). */
  idleTimeoutMs?: number;
}

/**
 * Serves one reply line per connection, then closes. Whatever the client sends (HAProxy's
 * `agent-send`, an HTTP request, garbage) is read and discarded: an unread byte kept the
 * socket's read side open forever, one descriptor leaked per client until the agent hit its
 * `ulimit -n` and every port and nvidia-smi spawn failed (EMFILE). A client that never closes
 * its side is cut off after `idleTimeoutMs`. Errors from HAProxy's resets are ignored.
 */
export function startAgentCheckServer(
  host: string,
  port: number,
  reply: () => string,
  onReply?: (line: string) => void,
  opts: AgentCheckServerOptions = {},
): Promise<Server> {
  const idleTimeoutMs = opts.idleTimeoutMs ?? 1000;
  const server = createServer((sock) => {
    sock.on("error", () => {
      /* HAProxy resets the connection after reading: ECONNRESET is normal */
    });
    sock.setTimeout(idleTimeoutMs, () => sock.destroy());
    sock.resume(); // discard input, so the client's FIN is seen and the socket closes
    const line = reply();
    onReply?.(line);
    sock.end(line + "\n");
  });
  limitServer(server, opts.maxConnections ?? 1024, opts.maxPerSource ?? 32);
  server.on("error", () => {
    /* listen errors are reported through the promise below */
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}
