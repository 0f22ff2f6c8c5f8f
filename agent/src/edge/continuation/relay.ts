/**
 * The continuation relay (`llm-ha continue`), in the L1 pod: HAProxy's SOCKS4 hop to the server
 * it picked for a completion (socks.ts; with several workers, between HAProxy's public frontend
 * and its loopback continuation listener instead). It forwards the completion, watches the
 * answer, and when the server dies under it — a reset, an end without the final event, no chunk
 * within the stall bound — it asks once more through HAProxy's continuation listener (the same
 * servers: health checks, agent-check, retries) with what was already delivered, and splices the
 * second answer into the first.
 * At most two servers per request: a request that killed both is a query of death, and ends
 * with an error. It keeps only the delivered text of each answer.
 */
import { rm } from "node:fs/promises";
import type { Server } from "node:net";
import { CONTINUE_IDLE } from "../../../../contracts/continuation";
import { listenHttp, listenOn } from "../../util/net";
import { DEFAULT_UPSTREAM_MAX_SOCKETS } from "./config";
import { Exchange, forwardable, jsonError, type ExchangeHost, type RelayOptions } from "./exchange";
import { H1Pool, type H1Call, type H1Handler } from "./h1-pool";
import { closeH1Server, createH1Server, type H1Request, type H1Response } from "./h1-server";
import { Tunnel } from "./socks";

/**
 * How long the relay tries to reach the server HAProxy chose before rejecting the CONNECT;
 * HAProxy's own `timeout connect` (1 s in the L1 pod) gives up first and retries elsewhere.
 */
const TUNNEL_CONNECT_MS = 5_000;

export type { RelayOptions } from "./exchange";

export class ContinuationRelay implements ExchangeHost {
  private server: Server | null = null;
  /**
   * Connections to the proxy's listener, kept idle for the next request (a new one costs two
   * loopback handshakes before the request even leaves): up to the pool's bounds, the most recent
   * first (the warm ones), each closed when idle for `CONTINUE_IDLE.relayMs`, before the
   * listener's own keep-alive bound.
   */
  private readonly pool: H1Pool;

  constructor(readonly opts: RelayOptions) {
    const pool = opts.upstreamPool ?? { maxSockets: DEFAULT_UPSTREAM_MAX_SOCKETS, maxFreeSockets: DEFAULT_UPSTREAM_MAX_SOCKETS };
    this.pool = new H1Pool(opts.upstream, { ...pool, idleMs: CONTINUE_IDLE.relayMs });
  }

  /** Connections to the listener now: in use and idle (the tests read it). */
  upstreamSockets(): { busy: number; idle: number } {
    return this.pool.sockets();
  }

  /**
   * `exclusive`: in a worker of several, a listener the worker makes and accepts on itself (a
   * cluster worker's listener is otherwise the primary's, each connection passed over its pipe).
   */
  async listen(port: number, host: string, o: { exclusive?: boolean } = {}): Promise<number> {
    // HAProxy is the only client and reuses any idle connection for the next request (`http-reuse
    // always` on the relay's backend): the relay never closes one itself, so none is closed just as
    // HAProxy sends on it; HAProxy purges the idle ones it no longer needs.
    const s = this.h1Server();
    const got = await listenHttp(s, port, host, { setting: "LLMHA_CONTINUE_PORT", exclusive: o.exclusive });
    this.server = s;
    return got;
  }

  /**
   * Listens on a Unix socket (HAProxy beside it in the pod, through a shared volume): a stale file
   * of an earlier run is replaced; readable and writable by all, as HAProxy runs as another user and
   * only the pod's own containers mount the volume. Returns 0 (no port). `exclusive`: as `listen`.
   */
  async listenSocket(path: string, o: { exclusive?: boolean } = {}): Promise<number> {
    const s = this.h1Server();
    await rm(path, { force: true });
    await listenOn(s, { path, readableAll: true, writableAll: true, exclusive: o.exclusive ?? false }, path, "LLMHA_CONTINUE_SOCKET");
    this.server = s;
    return 0;
  }

  /** The listener, on a port or a Unix socket: every complete request becomes an Exchange. */
  private h1Server(): Server {
    return createH1Server({ maxBodyBytes: this.opts.maxBodyBytes, headersTimeoutMs: 15_000, tunnel: (t) => Tunnel.open(t, TUNNEL_CONNECT_MS, this.opts.source) }, (req, res) => this.onRequest(req, res));
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    await closeH1Server(s);
    this.pool.destroy();
  }

  private onRequest(req: H1Request, res: H1Response): void {
    const raw = req.body;
    if (raw === null) return jsonError(res, 413, `request body larger than ${this.opts.maxBodyBytes} bytes`, "request_too_large");
    new Exchange(this, req, res, raw).start();
  }

  /**
   * One request upstream: the first of a tunnel's request to the server HAProxy chose, over the
   * tunnel; any other (a second request, a request not through a tunnel) to the continuation
   * listener, for HAProxy to pick the server.
   */
  upstream(req: H1Request, payload: Buffer, h: H1Handler, first: boolean): H1Call {
    const out = { method: req.method, path: req.url, headers: forwardable(req.headers), body: payload };
    return first && req.tunnel ? req.tunnel.request(out, h) : this.pool.request(out, h);
  }
}
