/**
 * The relay's listener: HTTP/1.1 requests from the pod's HAProxy, one at a time per connection,
 * each read whole (a completion's body is small and bounded by the edge) and answered through an
 * `H1Response`. Connections stay open until HAProxy closes them: it reuses any idle one
 * (`http-reuse always`), so the relay never closes one under a request.
 */
import { createServer, type Server, type Socket } from "node:net";
import { BodyReader, H1Error, MAX_HEAD_BYTES, chunk, framingOf, header, headEnd, headerLines, keepsAlive, parseHead, type Headers } from "./h1";
import { SOCKS4_GRANTED, SOCKS4_REJECTED, parseSocks4, startsSocks4, type SocksTarget, type Tunnel } from "./socks";

export interface H1Request {
  method: string;
  url: string;
  headers: Headers;
  /** The body, or null when it was larger than `maxBodyBytes` (read past, not kept). */
  body: Buffer | null;
  /** The server HAProxy chose, when the connection began with a SOCKS4 CONNECT (socks.ts); else null. */
  tunnel: Tunnel | null;
}

export interface H1ServerOptions {
  maxBodyBytes: number;
  /** From a request's first byte to its head's end (a client trickling a head is cut). */
  headersTimeoutMs: number;
  /**
   * A connection that begins with a SOCKS4 CONNECT (HAProxy's `socks4` server option): the tunnel
   * to its destination, opened before the CONNECT is granted (a rejection is HAProxy's connection
   * failure). Without it such a connection is closed.
   */
  tunnel?: (target: SocksTarget) => Promise<Tunnel>;
}

const STATUS: Record<number, string> = { 200: "OK", 400: "Bad Request", 413: "Payload Too Large", 431: "Request Header Fields Too Large", 502: "Bad Gateway" };

/** One answer on a relay connection: a head, then its body as written (chunked unless it has a `content-length`). */
export class H1Response {
  headersSent = false;
  /** `end` was called. */
  writableEnded = false;
  /** The whole answer was handed to the socket. */
  writableFinished = false;
  /** The head, until it goes out with the first bytes of the body. */
  private head: { status: number; headers: Headers } | null = null;
  private chunked = true;
  private trailers: Headers | null = null;
  private closed = false;
  /** Text written in this task, sent as one write when it ends (`flush`). */
  private queued = "";
  private flushing = false;
  private readonly onClose: (() => void)[] = [];
  private readonly flushLater = (): void => {
    this.flushing = false;
    this.flush(null);
  };

  constructor(
    private readonly socket: Socket,
    private readonly keepAlive: boolean,
    private readonly done: (reusable: boolean) => void,
  ) {}

  /** `close`: once, when the answer is complete or the connection went first. */
  on(_ev: "close", fn: () => void): void {
    if (this.closed) queueMicrotask(fn);
    else this.onClose.push(fn);
  }

  /** The connection ended under the answer. */
  socketClosed(): void {
    this.close();
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const fn of this.onClose.splice(0)) fn();
  }

  writeHead(status: number, headers: Headers): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.chunked = header(headers, "content-length") === undefined;
    this.head = { status, headers };
  }

  addTrailers(t: Headers): void {
    this.trailers = t;
  }

  write(data: string | Buffer): boolean {
    if (this.writableEnded || this.socket.destroyed || data.length === 0) return false;
    if (!this.headersSent) this.writeHead(200, {});
    return this.send(this.chunked ? chunk(data) : data, null);
  }

  end(data?: string | Buffer): void {
    if (this.writableEnded) return;
    const size = data ? Buffer.byteLength(data) : 0;
    if (!this.headersSent) this.writeHead(200, { "content-length": String(size) });
    // The whole answer in this call and no trailers: it goes with its length, not in chunks.
    else if (this.head && this.chunked && !this.trailers) {
      this.head.headers = { ...this.head.headers, "content-length": String(size) };
      this.chunked = false;
    }
    this.writableEnded = true;
    if (this.socket.destroyed) return this.close();
    let tail: string | Buffer = "";
    if (this.chunked) {
      tail = `0\r\n${this.trailers ? headerLines(this.trailers) : ""}\r\n`;
      if (data && data.length > 0) tail = typeof data === "string" ? `${chunk(data) as string}${tail}` : Buffer.concat([chunk(data) as Buffer, Buffer.from(tail, "latin1")]);
    } else if (data) tail = data;
    this.send(tail, () => {
      this.writableFinished = true;
      this.close();
      this.done(this.keepAlive);
    });
  }

  destroy(): void {
    this.socket.destroy();
  }

  private headText(status: number, headers: Headers): string {
    let h = `HTTP/1.1 ${status} ${STATUS[status] ?? "Status"}\r\n${headerLines(headers)}`;
    if (this.chunked) h += "transfer-encoding: chunked\r\n";
    if (!this.keepAlive) h += "connection: close\r\n";
    return `${h}\r\n`;
  }

  /**
   * Writes wait for the end of the current task, then go out together as one write of one string:
   * the head with the first bytes, the events of one read of the server's answer (several when the
   * relay was busy), the last event with the end of the body. One `socket.write` a task, not one an
   * event with a cork around them: each write is a request object and its callback in the socket's
   * queue, and the allocations were most of what the relay's garbage collector had to do.
   */
  private send(data: string | Buffer, cb: (() => void) | null): boolean {
    const head = this.head;
    if (head !== null) {
      this.head = null;
      const text = this.headText(head.status, head.headers);
      // Header values are bytes (latin1): one outside ASCII would change if sent as UTF-8 with the body.
      if (NON_ASCII.test(text)) {
        this.flush(null);
        this.socket.write(text, "latin1");
      } else this.queued += text;
    }
    if (typeof data !== "string") {
      this.flush(null);
      return cb ? this.socket.write(data, cb) : this.socket.write(data);
    }
    this.queued += data;
    if (cb) return this.flush(cb);
    if (!this.flushing) {
      this.flushing = true;
      queueMicrotask(this.flushLater);
    }
    return !this.socket.writableNeedDrain;
  }

  private flush(cb: (() => void) | null): boolean {
    const text = this.queued;
    this.queued = "";
    if (this.socket.destroyed) return false;
    if (cb) return this.socket.write(text, "utf8", cb);
    if (text !== "") this.socket.write(text, "utf8");
    return !this.socket.writableNeedDrain;
  }
}

/** A character that is not printable ASCII or the head's own tab, CR and LF. */
const NON_ASCII = /[^\t\r\n -~]/;

/** A plain-text refusal of a request the relay could not read, then the connection closed. */
function refuse(socket: Socket, err: H1Error): void {
  socket.end(`HTTP/1.1 ${err.status} ${STATUS[err.status] ?? "Error"}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(err.message) + 1}\r\nconnection: close\r\n\r\n${err.message}\n`);
}

const OPEN = new WeakMap<Server, Set<Socket>>();

/** A listener whose every complete request goes to `onRequest`. */
export function createH1Server(opts: H1ServerOptions, onRequest: (req: H1Request, res: H1Response) => void): Server {
  const open = new Set<Socket>();
  const server = createServer({ noDelay: true }, (socket) => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    serveConnection(socket, opts, onRequest);
  });
  OPEN.set(server, open);
  return server;
}

/** Stops listening and closes every connection, idle or not. */
export async function closeH1Server(s: Server | null): Promise<void> {
  if (!s) return;
  for (const socket of OPEN.get(s) ?? []) socket.destroy();
  await new Promise<void>((r) => s.close(() => r()));
}

function serveConnection(socket: Socket, opts: H1ServerOptions, onRequest: (req: H1Request, res: H1Response) => void): void {
  let buf: Buffer | null = null;
  let headTimer: NodeJS.Timeout | null = null;
  /** The request being read: its head, its body so far. */
  let reading: { method: string; url: string; version: string; headers: Headers; body: BodyReader; parts: Buffer[]; size: number } | null = null;
  /** The answer in progress: no further request is read until it is done. */
  let answering: H1Response | null = null;
  /** `start`: the first bytes decide; `socks`: a CONNECT read, its tunnel opening; `http`: requests. */
  let phase: "start" | "socks" | "http" = opts.tunnel ? "start" : "http";
  let tunnel: Tunnel | null = null;

  const clearHeadTimer = (): void => {
    if (headTimer) clearTimeout(headTimer);
    headTimer = null;
  };

  const parse = (): void => {
    try {
      while (buf && buf.length > 0 && !answering) {
        let at = 0;
        if (!reading) {
          const end = headEnd(buf);
          if (end < 0) {
            if (!headTimer) headTimer = setTimeout(() => socket.destroy(), opts.headersTimeoutMs);
            return;
          }
          clearHeadTimer();
          const { start, headers } = parseHead(buf, end);
          const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(start);
          if (!m) throw new H1Error(400, `malformed request line ${JSON.stringify(start.slice(0, 80))}`);
          const r = { method: m[1], url: m[2], version: m[3], headers, parts: [] as Buffer[], size: 0, body: null as unknown as BodyReader };
          r.body = new BodyReader(framingOf(headers, false), (b) => {
            r.size += b.length;
            // A read's buffer is its own (Node allocates each): kept without a copy.
            if (r.size <= opts.maxBodyBytes) r.parts.push(b);
          });
          reading = r;
          if (/^100-continue$/i.test(header(headers, "expect") ?? "")) socket.write("HTTP/1.1 100 Continue\r\n\r\n");
          at = end;
        }
        const r = reading;
        const used = r.body.push(buf, at);
        buf = used < 0 ? null : used < buf.length ? buf.subarray(used) : null;
        if (!r.body.done) return;
        reading = null;
        const keepAlive = keepsAlive(r.version, r.headers);
        const res = new H1Response(socket, keepAlive, (reusable) => {
          answering = null;
          // A tunnel whose server could not be reached again carries no further request: HAProxy's
          // side closes, and its next connection to that server asks the relay to CONNECT anew.
          if (!reusable || tunnel?.broken) socket.end();
          else parse();
        });
        answering = res;
        const body = r.size <= opts.maxBodyBytes ? (r.parts.length === 1 ? r.parts[0] : Buffer.concat(r.parts)) : null;
        onRequest({ method: r.method, url: r.url, headers: r.headers, body, tunnel }, res);
      }
    } catch (err) {
      clearHeadTimer();
      buf = null;
      if (err instanceof H1Error && !answering) refuse(socket, err);
      else socket.destroy();
    }
  };

  /** A SOCKS4 CONNECT at the connection's start: its tunnel opened, then granted (or rejected and closed). */
  const socks = (open: (t: SocksTarget) => Promise<Tunnel>): void => {
    let got: ReturnType<typeof parseSocks4>;
    try {
      got = parseSocks4(buf as Buffer);
    } catch {
      return void socket.destroy();
    }
    if (!got) {
      if (!headTimer) headTimer = setTimeout(() => socket.destroy(), opts.headersTimeoutMs);
      return;
    }
    clearHeadTimer();
    phase = "socks";
    buf = got.used < (buf as Buffer).length ? (buf as Buffer).subarray(got.used) : null;
    open(got.target).then(
      (t) => {
        if (socket.destroyed) return t.destroy();
        tunnel = t;
        phase = "http";
        socket.write(SOCKS4_GRANTED);
        parse();
      },
      () => {
        if (!socket.destroyed) socket.end(SOCKS4_REJECTED);
      },
    );
  };

  socket.on("data", (b: Buffer) => {
    buf = buf && buf.length > 0 ? Buffer.concat([buf, b]) : b;
    if (phase === "start" && opts.tunnel) {
      if (!startsSocks4(buf)) phase = "http";
      else return socks(opts.tunnel);
    }
    // HAProxy sends nothing before the CONNECT is answered; anything early waits for the tunnel, bounded.
    if (phase === "socks") return void (buf.length > MAX_HEAD_BYTES + opts.maxBodyBytes ? socket.destroy() : undefined);
    // Bytes sent ahead while an answer is in progress wait for it (HAProxy never does; the
    // connection is still read, so a client that leaves is seen at once), up to one request's worth.
    if (answering && buf.length > MAX_HEAD_BYTES + opts.maxBodyBytes) return socket.destroy();
    parse();
  });
  socket.on("error", () => socket.destroy());
  socket.on("close", () => {
    clearHeadTimer();
    tunnel?.destroy();
    answering?.socketClosed();
    answering = null;
  });
}
