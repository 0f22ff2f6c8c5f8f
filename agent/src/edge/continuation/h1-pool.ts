/**
 * The relay's connections to the proxy's continuation listener, and one HTTP/1.1 request at a time
 * on each: at most `maxSockets` open (a stream holds one throughout; one more waits for a stream
 * to end, as it would in the listener's accept queue), up to `maxFreeSockets` kept idle for the
 * next request, the most recently used first (the warm ones), each closed after `idleMs` idle —
 * before the listener's own keep-alive bound, so the listener never closes one under a request.
 */
import { connect, type Socket } from "node:net";
import { BodyReader, headEnd, headerLines, keepsAlive, parseHead, framingOf, type Headers } from "./h1";

export interface H1Handler {
  /** The answer's head (informational answers are read past). */
  onResponse(status: number, headers: Headers): void;
  /** Bytes of the body, valid only during the call (every connection reads into one buffer): copy what is kept. */
  onData(b: Buffer): void;
  onEnd(): void;
  /** `error`: no answer came (refused, reset, closed); `aborted`: the answer broke off. */
  onError(kind: "error" | "aborted"): void;
}

export interface H1Outgoing {
  method: string;
  path: string;
  headers: Headers;
  body: Buffer;
}

export interface PoolOptions {
  maxSockets: number;
  maxFreeSockets: number;
  idleMs: number;
}

/** One request in flight: `abort` drops its connection and calls nothing more. */
export interface H1Call {
  abort(): void;
}

/** What holds a request's connection: a pool of them, or a SOCKS tunnel's one (socks.ts). */
export interface CallOwner {
  /** The answer ended; `reusable`: the connection may carry another request. */
  finished(call: Call, reusable: boolean): void;
  /** The request gave up or its connection failed. */
  dropped(call: Call): void;
}

/** One request on one connection: written, then its answer read as it comes. */
export class Call implements H1Call {
  socket: Socket | null = null;
  settled = false;
  private buf: Buffer | null = null;
  private body: BodyReader | null = null;
  private keepAlive = false;

  constructor(
    private readonly pool: CallOwner,
    readonly req: H1Outgoing,
    private readonly h: H1Handler,
  ) {}

  /** A request that cannot be sent (its pool closed, its tunnel busy): settled, its handler told on the next tick. */
  refused(): Call {
    this.settled = true;
    queueMicrotask(() => this.h.onError("error"));
    return this;
  }

  abort(): void {
    if (this.settled) return;
    this.settled = true;
    this.pool.dropped(this);
  }

  start(socket: Socket): void {
    this.socket = socket;
    const r = this.req;
    const head = `${r.method} ${r.path} HTTP/1.1\r\n${headerLines(r.headers)}content-length: ${r.body.length}\r\n\r\n`;
    socket.cork();
    socket.write(head, "latin1");
    if (r.body.length > 0) socket.write(r.body);
    socket.uncork();
  }

  data(b: Buffer): void {
    if (this.settled) return;
    try {
      const buf = this.buf && this.buf.length > 0 ? Buffer.concat([this.buf, b]) : b;
      this.buf = null;
      let at = 0;
      while (!this.body) {
        const end = headEnd(buf.subarray(at));
        if (end < 0) {
          // A copy: `b` is the pool's read buffer, the next read overwrites it.
          this.buf = Buffer.from(buf.subarray(at));
          return;
        }
        const { start, headers } = parseHead(buf.subarray(at), end);
        const m = /^(HTTP\/1\.[01]) (\d{3})/.exec(start);
        if (!m) throw new Error("malformed status line");
        at += end;
        const status = Number(m[2]);
        if (status >= 100 && status < 200) continue;
        this.keepAlive = keepsAlive(m[1], headers);
        const bodyless = status === 204 || status === 304;
        this.body = new BodyReader(bodyless ? { kind: "length", bytes: 0 } : framingOf(headers, true), (d) => {
          if (!this.settled) this.h.onData(d);
        });
        this.h.onResponse(status, headers);
        if (this.settled) return;
      }
      const used = this.body.push(buf, at);
      if (this.settled || !this.body.done) return;
      this.settled = true;
      // Bytes past the answer's end (it never sends any unasked) make the connection unusable.
      this.pool.finished(this, this.keepAlive && used === buf.length);
      this.h.onEnd();
    } catch {
      this.fail();
    }
  }

  /** The connection failed or closed: an answer to the close is complete; anything else broke. */
  fail(): void {
    if (this.settled) return;
    this.settled = true;
    this.pool.dropped(this);
    if (this.body && !this.body.done && this.body.endsAtClose) return this.h.onEnd();
    this.h.onError(this.body ? "aborted" : "error");
  }
}

/** HTTP/1.1 requires a host: the relay forwards the client's; a request without one gets its peer's. */
export function withHost(req: H1Outgoing, t: { host: string; port: number } | { path: string }): H1Outgoing {
  if (req.headers.host !== undefined) return req;
  return { ...req, headers: { host: "path" in t ? "localhost" : `${t.host}:${t.port}`, ...req.headers } };
}

/** Every upstream connection's reads: 64 KiB, what one read of a socket asks for. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/**
 * A connection whose every read goes to the request it carries, through the one read buffer,
 * each read handed on before the next (`onData` copies what it keeps): not a new buffer and a
 * pass through the socket's stream machinery each read. Bytes on a connection that carries no
 * request (nothing asked) mean it can no longer be trusted to frame the next answer: closed.
 */
export function upstreamConnection(t: { host: string; port: number; localAddress?: string } | { path: string }, carrying: (s: Socket) => Call | undefined): Socket {
  const onread = {
    buffer: READ_BUFFER,
    callback: (n: number): boolean => {
      const call = carrying(s);
      if (call) call.data(READ_BUFFER.subarray(0, n));
      else s.destroy();
      return true;
    },
  };
  const s: Socket = "path" in t ? connect({ path: t.path, onread }) : connect({ host: t.host, port: t.port, noDelay: true, onread, ...(t.localAddress ? { localAddress: t.localAddress } : {}) });
  return s;
}

export class H1Pool implements CallOwner {
  private readonly idle: { socket: Socket; since: number }[] = [];
  private readonly busy = new Map<Socket, Call>();
  private readonly waiting: Call[] = [];
  private sweep: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly target: { host: string; port: number } | { path: string },
    private readonly opts: PoolOptions,
  ) {}

  /** Connections now: carrying a request, and idle. */
  sockets(): { busy: number; idle: number } {
    return { busy: this.busy.size, idle: this.idle.length };
  }

  request(req: H1Outgoing, h: H1Handler): H1Call {
    const call = new Call(this, withHost(req, this.target), h);
    if (this.closed) return call.refused();
    const kept = this.idle.pop();
    if (kept) this.assign(kept.socket, call);
    else if (this.busy.size < this.opts.maxSockets) this.assign(this.open(), call);
    else this.waiting.push(call);
    return call;
  }

  /** Closes every connection; requests in flight fail. */
  destroy(): void {
    this.closed = true;
    if (this.sweep) clearInterval(this.sweep);
    for (const { socket } of this.idle.splice(0)) socket.destroy();
    for (const s of [...this.busy.keys()]) s.destroy();
    for (const c of this.waiting.splice(0)) c.fail();
  }

  private open(): Socket {
    const s = upstreamConnection(this.target, (c) => this.busy.get(c));
    s.on("error", () => s.destroy());
    s.on("close", () => this.lost(s));
    // An idle connection the listener closed is dropped at once, not handed a request.
    s.on("end", () => s.destroy());
    return s;
  }

  private assign(socket: Socket, call: Call): void {
    this.busy.set(socket, call);
    call.start(socket);
  }

  /** The connection closed: its request (if any) fails, it leaves the idle list, a waiting request may open another. */
  private lost(s: Socket): void {
    const call = this.busy.get(s);
    if (call) {
      this.busy.delete(s);
      call.fail();
    } else {
      const i = this.idle.findIndex((x) => x.socket === s);
      if (i >= 0) this.idle.splice(i, 1);
    }
    this.next();
  }

  /** An answer ended: its connection goes back to the idle list (or is closed), the next waiting request takes one. */
  finished(call: Call, reusable: boolean): void {
    const s = call.socket as Socket;
    this.busy.delete(s);
    if (!reusable || this.closed || s.destroyed) s.destroy();
    else if (this.waiting.length > 0) return this.assign(s, this.waiting.shift() as Call);
    else if (this.idle.length < this.opts.maxFreeSockets) {
      this.idle.push({ socket: s, since: Date.now() });
      this.armSweep();
    } else s.destroy();
    this.next();
  }

  /** A request gave up (aborted, or its connection failed): its connection, if any, is closed. */
  dropped(call: Call): void {
    const i = this.waiting.indexOf(call);
    if (i >= 0) this.waiting.splice(i, 1);
    const s = call.socket;
    if (s && this.busy.get(s) === call) {
      this.busy.delete(s);
      s.destroy();
      this.next();
    }
  }

  private next(): void {
    while (this.waiting.length > 0 && this.busy.size < this.opts.maxSockets && !this.closed) {
      const kept = this.idle.pop();
      this.assign(kept ? kept.socket : this.open(), this.waiting.shift() as Call);
    }
  }

  /** One timer for the whole idle list, not one per connection. */
  private armSweep(): void {
    if (this.sweep) return;
    const every = Math.max(50, Math.floor(this.opts.idleMs / 4));
    this.sweep = setInterval(() => {
      const cutoff = Date.now() - this.opts.idleMs;
      // Oldest first: the list is in order of return.
      while (this.idle.length > 0 && this.idle[0].since <= cutoff) (this.idle.shift() as { socket: Socket }).socket.destroy();
      if (this.idle.length === 0 && this.sweep) {
        clearInterval(this.sweep);
        this.sweep = null;
      }
    }, every);
    this.sweep.unref();
  }
}
