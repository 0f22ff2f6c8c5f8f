/**
 * One kept-alive HTTP/1.1 connection for a request the agent repeats several times a second (the
 * engine's metrics every 200 ms; the model check and the probe every period, KeptAlive below). Node's `http` client costs about 0.5 ms of CPU per request
 * (ClientRequest, IncomingMessage, their streams); writing the request line on a socket and
 * reading the answer here costs about a fifth of that, which at five reads a second was most of
 * the agent's own CPU on a node.
 *
 * Only what such a read needs: plain `http:`, GET or a POST of a small body, an answer with `Content-Length`, chunked, or
 * ended by the server closing. Anything else (`https:`, a header that cannot be sent as is, an
 * informational 1xx answer, a malformed one) answers `unsupported`, and the caller uses the full
 * client for it. A failure on a reused connection before any byte of the answer is retried once on
 * a fresh one, as the full client's pool does: a server that restarted drops its idle connections.
 */
import { connect, type Socket } from "node:net";

export type GetResult = { status: number; text: string } | { kind: "refused" | "timeout" | "error"; detail: string } | { kind: "unsupported"; detail: string };

/** Largest answer read (a metrics page is tens of KB). */
const MAX_BYTES = 16 * 1024 * 1024;
const HEADER_END = Buffer.from("\r\n\r\n");
const CRLF = Buffer.from("\r\n");

/** How the answer's body ends. */
type Framing = { kind: "length"; left: number } | { kind: "chunked" } | { kind: "close" };

interface Exchange {
  resolve: (r: GetResult) => void;
  timer: NodeJS.Timeout;
  /** Bytes of the answer so far (headers, then the body as it arrives). */
  buf: Buffer;
  head: { status: number; framing: Framing; close: boolean; bodyAt: number } | null;
  body: Buffer[];
  bodyBytes: number;
  /** Any byte of the answer came (a failure after that is not a stale connection). */
  answered: boolean;
}

/**
 * The request head for `method` on `url` with `headers` (and a body's length), or why it cannot be
 * sent as is (another protocol, a user part, a header with a line break): the full client sends it.
 */
export function requestHead(method: "GET" | "POST", url: string, headers: Readonly<Record<string, string>>, bodyBytes?: number): { head: string } | { why: string } {
  const u = new URL(url);
  if (u.protocol !== "http:") return { why: `${u.protocol} is read with the full client` };
  const lines = [`${method} ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`, "Accept: */*", ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (bodyBytes !== undefined) lines.push("Content-Type: application/json", `Content-Length: ${bodyBytes}`);
  if (lines.some((l) => /[\r\n]/.test(l)) || u.username || u.password) return { why: "headers not sendable as is" };
  return { head: `${lines.join("\r\n")}\r\n\r\n` };
}

/** One kept-alive connection to one server: one exchange at a time, any request head on it. */
export class KeepAliveConnection {
  private readonly host: string;
  private readonly port: number;
  private socket: Socket | null = null;
  /** The socket has carried an exchange already (a failure on it may be the server's idle close). */
  private reused = false;
  private x: Exchange | null = null;

  /** `origin`: any URL of the server (`http://host:port/...`); only its host and port are used. */
  constructor(origin: string) {
    const u = new URL(origin);
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(u.port || 80);
  }

  /** The connection has carried an answer and is open: a failure before any byte of the next one may be a stale connection. */
  get isReused(): boolean {
    return this.socket !== null && this.reused;
  }

  get busy(): boolean {
    return this.x !== null;
  }

  /**
   * Sends `head` (and `body`) and reads the answer; never throws. An aborted `signal` ends the
   * exchange as a timeout and drops the connection (its answer would come out of step).
   */
  send(head: string, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<GetResult> {
    if (this.x) return Promise.resolve({ kind: "unsupported", detail: "a read is already under way" });
    if (signal?.aborted) return Promise.resolve({ kind: "timeout", detail: "aborted" });
    return new Promise((resolve) => {
      const s = this.socket ?? this.open();
      const onAbort = (): void => this.finish({ kind: "timeout", detail: "aborted" }, true);
      const x: Exchange = {
        resolve: (r) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(r);
        },
        timer: setTimeout(() => this.finish({ kind: "timeout", detail: `no answer within ${timeoutMs} ms` }, true), timeoutMs),
        buf: Buffer.alloc(0),
        head: null,
        body: [],
        bodyBytes: 0,
        answered: false,
      };
      this.x = x;
      signal?.addEventListener("abort", onAbort, { once: true });
      s.write(body === undefined ? head : head + body);
    });
  }

  /** Drops the connection; an exchange under way ends as an error. */
  close(): void {
    this.finish({ kind: "error", detail: "closed by the agent" }, true);
    this.drop();
  }

  private open(): Socket {
    const s = connect({ host: this.host, port: this.port });
    s.setNoDelay(true);
    this.socket = s;
    this.reused = false;
    s.on("data", (d: Buffer) => {
      if (this.socket === s) this.data(d);
    });
    s.on("error", (e: NodeJS.ErrnoException) => {
      if (this.socket !== s) return;
      const x = this.x;
      this.finish(e.code === "ECONNREFUSED" ? { kind: "refused", detail: "connection refused" } : { kind: "error", detail: `${x?.answered ? "answered, then " : ""}${e.code ?? e.message}` }, true);
    });
    s.on("close", () => {
      if (this.socket !== s) return;
      const x = this.x;
      if (!x) {
        // The server closed an idle connection: the next read opens a new one.
        this.drop();
        return;
      }
      // A body that ends with the connection is complete now.
      if (x.head?.framing.kind === "close") this.complete(x, true);
      else this.finish({ kind: "error", detail: x.answered ? "answered, then the connection closed mid-answer" : "connection closed" }, true);
    });
    return s;
  }

  private data(d: Buffer): void {
    const x = this.x;
    if (!x) {
      // Bytes nobody asked for: the connection is out of step.
      this.drop();
      return;
    }
    x.answered = true;
    if (!x.head) {
      x.buf = x.buf.length ? Buffer.concat([x.buf, d]) : d;
      const end = x.buf.indexOf(HEADER_END);
      if (end < 0) {
        if (x.buf.length > 64 * 1024) this.finish({ kind: "unsupported", detail: "answer headers over 64 KiB" }, true);
        return;
      }
      const head = parseHead(x.buf.subarray(0, end).toString("latin1"));
      if ("detail" in head) {
        this.finish({ kind: "unsupported", detail: head.detail }, true);
        return;
      }
      x.head = { ...head, bodyAt: end + 4 };
      d = x.buf.subarray(end + 4);
      x.buf = Buffer.alloc(0);
    }
    this.body(x, d);
  }

  private body(x: Exchange, d: Buffer): void {
    const f = x.head!.framing;
    if (f.kind === "chunked") {
      x.buf = x.buf.length ? Buffer.concat([x.buf, d]) : d;
      this.chunks(x);
      return;
    }
    if (d.length) {
      x.body.push(d);
      x.bodyBytes += d.length;
    }
    if (x.bodyBytes > MAX_BYTES) return this.finish({ kind: "error", detail: "answered, then more than 16 MiB" }, true);
    if (f.kind === "length" && x.bodyBytes >= f.left) {
      if (x.bodyBytes > f.left) return this.finish({ kind: "unsupported", detail: "more bytes than Content-Length" }, true);
      this.complete(x, x.head!.close);
    }
  }

  /** Chunked transfer coding: `size[;ext]\r\n data \r\n` … `0\r\n` trailers `\r\n`. */
  private chunks(x: Exchange): void {
    for (;;) {
      const eol = x.buf.indexOf(CRLF);
      if (eol < 0) return;
      const size = parseInt(x.buf.subarray(0, eol).toString("latin1").split(";")[0].trim(), 16);
      if (!Number.isFinite(size) || size < 0) return this.finish({ kind: "unsupported", detail: "bad chunk size" }, true);
      if (size === 0) {
        // Trailers end with an empty line; usually there are none.
        const end = x.buf.indexOf(HEADER_END, eol - 2 >= 0 ? eol - 2 : 0);
        if (end < 0 && !x.buf.subarray(eol + 2).equals(CRLF)) return;
        return this.complete(x, x.head!.close);
      }
      if (x.buf.length < eol + 2 + size + 2) return;
      x.body.push(x.buf.subarray(eol + 2, eol + 2 + size));
      x.bodyBytes += size;
      if (x.bodyBytes > MAX_BYTES) return this.finish({ kind: "error", detail: "answered, then more than 16 MiB" }, true);
      x.buf = x.buf.subarray(eol + 2 + size + 2);
    }
  }

  private complete(x: Exchange, close: boolean): void {
    this.finish({ status: x.head!.status, text: Buffer.concat(x.body, x.bodyBytes).toString("utf8") }, close);
  }

  private finish(r: GetResult, close: boolean): void {
    const x = this.x;
    if (!x) return;
    this.x = null;
    clearTimeout(x.timer);
    if (close) this.drop();
    else this.reused = true;
    x.resolve(r);
  }

  private drop(): void {
    const s = this.socket;
    this.socket = null;
    this.reused = false;
    s?.destroy();
  }
}

/** A GET of one URL with fixed headers over one kept-alive connection (the engine's metrics). */
export class KeepAliveGet {
  private readonly conn: KeepAliveConnection;
  private readonly request: string | null;
  private readonly why: string;

  constructor(url: string, headers: Readonly<Record<string, string>> = {}) {
    this.conn = new KeepAliveConnection(url);
    const h = requestHead("GET", url, headers);
    this.request = "head" in h ? h.head : null;
    this.why = "why" in h ? h.why : "";
  }

  /** One GET; never throws. One at a time (the caller's loop does not overlap its reads). */
  async get(timeoutMs: number): Promise<GetResult> {
    if (this.request === null) return { kind: "unsupported", detail: this.why };
    if (this.conn.busy) return { kind: "unsupported", detail: "a read is already under way" };
    const reused = this.conn.isReused;
    const first = await this.conn.send(this.request, undefined, timeoutMs);
    if (reused && "kind" in first && first.kind === "error" && !first.detail.startsWith("answered")) return this.conn.send(this.request, undefined, timeoutMs);
    return first;
  }

  close(): void {
    this.conn.close();
  }
}

/** The status line and the headers that decide how the body ends and whether the connection stays. */
function parseHead(text: string): { status: number; framing: Framing; close: boolean } | { detail: string } {
  const lines = text.split("\r\n");
  const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]);
  if (!m) return { detail: `not an HTTP/1.x answer: ${JSON.stringify(lines[0].slice(0, 40))}` };
  const status = Number(m[2]);
  if (status < 200) return { detail: `informational answer ${status}` };
  let length: number | null = null;
  let chunked = false;
  let close = m[1] === "0";
  for (const l of lines.slice(1)) {
    const colon = l.indexOf(":");
    if (colon <= 0) continue;
    const name = l.slice(0, colon).trim().toLowerCase();
    const value = l.slice(colon + 1).trim().toLowerCase();
    if (name === "content-length") {
      if (!/^\d+$/.test(value) || (length !== null && length !== Number(value))) return { detail: "bad Content-Length" };
      length = Number(value);
    } else if (name === "transfer-encoding") {
      if (value !== "chunked") return { detail: `transfer coding ${value}` };
      chunked = true;
    } else if (name === "connection") {
      if (value.split(",").some((t) => t.trim() === "close")) close = true;
      else if (m[1] === "0" && value.split(",").some((t) => t.trim() === "keep-alive")) close = false;
    }
  }
  // 204 and 304 have no body whatever the headers say.
  if (status === 204 || status === 304) return { status, framing: { kind: "length", left: 0 }, close };
  if (chunked) return { status, framing: { kind: "chunked" }, close };
  if (length !== null) return { status, framing: { kind: "length", left: length }, close };
  return { status, framing: { kind: "close" }, close: true };
}
