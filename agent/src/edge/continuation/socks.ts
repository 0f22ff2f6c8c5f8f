/**
 * The relay as HAProxy's SOCKS4 hop to a server (`socks4` on the server lines of the L1 pod's
 * relayed backend): HAProxy picks the server — health checks, agent weights, its per-server
 * `maxconn` queue, retries and redispatch on a refused connection — then opens its connection
 * to that server through the relay. The relay reads the SOCKS4 CONNECT (the server's IPv4
 * address and port), connects, answers granted or rejected, and from then on reads HTTP/1.1
 * requests on that connection and sends each to the server over its own paired connection.
 *
 * Why: a completion then crosses the relay once each way (HAProxy → relay → server), where
 * through the continuation listener it crossed HAProxy a second time (HAProxy → relay → HAProxy
 * → server): two process wakes fewer per chunk and four per request. Only the second request of
 * a cut answer goes through the continuation listener, for HAProxy to pick another server.
 *
 * A refused or failed connect is answered rejected, which HAProxy counts as its own connection
 * failure to that server: `observe layer4` marks it down and `retry-on conn-failure` sends the
 * request elsewhere, as without the relay.
 *
 * Reach: the relay connects where HAProxy asks, from inside the pod's network namespace, on a
 * loopback port; every container of the pod already shares that namespace and its reach.
 */
import type { Socket } from "node:net";
import { Call, upstreamConnection, withHost, type CallOwner, type H1Call, type H1Handler, type H1Outgoing } from "./h1-pool";

export interface SocksTarget {
  host: string;
  port: number;
}

/** Bytes past which a CONNECT with no end of its user id is refused (HAProxy sends none). */
const MAX_SOCKS4_REQUEST = 264;
export const SOCKS4_GRANTED = Buffer.from([0, 0x5a, 0, 0, 0, 0, 0, 0]);
export const SOCKS4_REJECTED = Buffer.from([0, 0x5b, 0, 0, 0, 0, 0, 0]);

export class SocksError extends Error {}

/** Whether a connection's first byte is a SOCKS4 request's (an HTTP request starts with a method's letter). */
export function startsSocks4(buf: Buffer): boolean {
  return buf.length > 0 && buf[0] === 4;
}

/**
 * A SOCKS4 CONNECT at the start of `buf`: its destination and the bytes it took, or null while
 * incomplete. Throws `SocksError` for anything else: another command (BIND), SOCKS4a (a name to
 * resolve: 0.0.0.x), a port 0, a user id past the bound.
 */
export function parseSocks4(buf: Buffer): { target: SocksTarget; used: number } | null {
  if (buf.length < 2) return null;
  if (buf[0] !== 4) throw new SocksError(`not a SOCKS4 request (version ${buf[0]})`);
  if (buf[1] !== 1) throw new SocksError(`SOCKS4 command ${buf[1]} is not CONNECT`);
  if (buf.length < 9) return null;
  const nul = buf.indexOf(0, 8);
  if (nul < 0) {
    if (buf.length > MAX_SOCKS4_REQUEST) throw new SocksError("SOCKS4 user id too long");
    return null;
  }
  const port = buf.readUInt16BE(2);
  if (port === 0) throw new SocksError("SOCKS4 destination port 0");
  if (buf[4] === 0 && buf[5] === 0 && buf[6] === 0) throw new SocksError("SOCKS4a (a name to resolve) is not taken: HAProxy sends the address it resolved");
  return { target: { host: `${buf[4]}.${buf[5]}.${buf[6]}.${buf[7]}`, port }, used: nul + 1 };
}

/**
 * One tunnel's connection to its server: one request at a time, as HTTP/1.1 on the HAProxy side
 * carries them. When the server closes it (its keep-alive bound, a cut answer), the next request
 * on the tunnel opens a new one to the same server: HAProxy may already be sending on its side,
 * and closing that side under it would cost the request. A reconnection that fails marks the
 * tunnel `broken`: after that request's answer (carried on or retried through the continuation
 * listener) HAProxy's side is closed, and HAProxy's next connection to that server goes through
 * a CONNECT again, whose rejection HAProxy counts itself.
 */
export class Tunnel implements CallOwner {
  private call: Call | null = null;
  private socket: Socket | null = null;
  /** A reconnection to the server failed: HAProxy's side closes after the answer in progress. */
  broken = false;

  private constructor(
    readonly target: SocksTarget,
    private readonly connectMs: number,
    private readonly source: string | undefined,
  ) {}

  /**
   * Connects to `target` (from `source` when given); rejects when the connection is refused, fails
   * or takes past `timeoutMs` (a reconnection has the same bound).
   */
  static open(target: SocksTarget, timeoutMs: number, source?: string): Promise<Tunnel> {
    const t = new Tunnel(target, timeoutMs, source);
    return new Promise((resolve, reject) => {
      const s = t.connect();
      s.once("connect", () => resolve(t));
      // After the connect, a close settles nothing (the promise is already resolved).
      s.once("close", () => reject(new SocksError(`cannot connect to ${target.host}:${target.port}`)));
    });
  }

  private connect(): Socket {
    const s = upstreamConnection(this.source ? { ...this.target, localAddress: this.source } : this.target, () => (this.socket === s ? (this.call ?? undefined) : undefined));
    this.socket = s;
    let connected = false;
    // A server that never answers the connect (its address gone, packets dropped) fails it in time.
    const timer = setTimeout(() => s.destroy(), this.connectMs);
    s.once("connect", () => {
      connected = true;
      clearTimeout(timer);
    });
    s.on("error", () => s.destroy());
    // A server closing its side ends the connection: no half-open ones.
    s.on("end", () => s.destroy());
    s.on("close", () => {
      clearTimeout(timer);
      if (this.socket !== s) return;
      this.socket = null;
      const c = this.call;
      this.call = null;
      if (c && !connected) this.broken = true;
      c?.fail();
    });
    return s;
  }

  request(req: H1Outgoing, h: H1Handler): H1Call {
    const call = new Call(this, withHost(req, this.target), h);
    if (this.call) return call.refused();
    this.call = call;
    // Written at once; a new connection sends it when it opens.
    call.start(this.socket ?? this.connect());
    return call;
  }

  finished(call: Call, reusable: boolean): void {
    if (this.call === call) this.call = null;
    if (!reusable) this.socket?.destroy();
  }

  dropped(call: Call): void {
    if (this.call !== call) return;
    this.call = null;
    this.socket?.destroy();
  }

  /** HAProxy's side closed: the server's goes too. */
  destroy(): void {
    this.socket?.destroy();
  }
}
