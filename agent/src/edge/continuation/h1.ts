/**
 * The HTTP/1.1 framing the continuation relay speaks on its legs (HAProxy → relay; relay → the
 * server HAProxy picked, or → HAProxy's continuation listener): a message head and its body's
 * framing (`content-length`, `chunked`, or to the close). Its client is the pod's own HAProxy,
 * which sends normalized HTTP/1.1, and anything else is refused, not guessed at; an answer is
 * read as HTTP/1.1 frames it, whether HAProxy or the inference server sends it.
 *
 * Why not `node:http`: its server and client cost about 0.25 ms of CPU a request on top of the
 * bytes' own system calls on the L1 pod's small cores (measured: a 20-line `node:http` proxy
 * added 0.45–0.9 ms to a stream's first chunk, a byte pipe 0.1–0.3 ms), and a stream's every
 * chunk went through its parser, its streams and its chunked encoder. The relay needs none of
 * what it adds (upgrades, pipelining, informational replies to its own client, timeouts per
 * socket): it reads a head, then a body's bytes.
 */

export type Headers = Record<string, string | string[]>;

/** A peer broke HTTP/1.1 framing: the status to answer (server side) and what was wrong. */
export class H1Error extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Largest message head read (HAProxy's own buffer is smaller). */
export const MAX_HEAD_BYTES = 64 * 1024;
const CRLF2 = Buffer.from("\r\n\r\n");
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Where the head in `buf` ends (after its blank line), or -1 while incomplete; throws past `MAX_HEAD_BYTES`. */
export function headEnd(buf: Buffer): number {
  const at = buf.indexOf(CRLF2);
  if (at >= 0) return at + 4;
  if (buf.length > MAX_HEAD_BYTES) throw new H1Error(431, `message head larger than ${MAX_HEAD_BYTES} bytes`);
  return -1;
}

/** The start line and the headers (names lowercased, repeated ones as arrays) of `buf[0, end)`. */
export function parseHead(buf: Buffer, end: number): { start: string; headers: Headers } {
  const lines = buf.toString("latin1", 0, end - 4).split("\r\n");
  const headers: Headers = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    // A folded line (leading space), a name with spaces or a bare CR/LF is how requests are
    // smuggled: refused.
    if (!TOKEN.test(name) || /[\r\n]/.test(line)) throw new H1Error(400, `malformed header line ${JSON.stringify(line.slice(0, 80))}`);
    const key = name.toLowerCase();
    const value = line.slice(colon + 1).trim();
    const had = headers[key];
    headers[key] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return { start: lines[0], headers };
}

/** One header's value (the first of repeated ones), or undefined. */
export function header(h: Headers, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether the connection stays open after this message (HTTP/1.1 unless `connection: close`). */
export function keepsAlive(version: string, h: Headers): boolean {
  const c = (header(h, "connection") ?? "").toLowerCase();
  return version === "HTTP/1.1" ? !/\bclose\b/.test(c) : /\bkeep-alive\b/.test(c);
}

export type Framing = { kind: "length"; bytes: number } | { kind: "chunked" } | { kind: "close" };

/**
 * A body's framing from its headers. Both `content-length` and `transfer-encoding`, or a
 * transfer coding other than chunked, is refused (how requests are smuggled past a proxy).
 * `untilClose`: what a response with neither means (a request with neither has no body).
 */
export function framingOf(h: Headers, untilClose: boolean): Framing {
  const te = h["transfer-encoding"];
  const cl = h["content-length"];
  if (te !== undefined) {
    if (cl !== undefined) throw new H1Error(400, "both content-length and transfer-encoding");
    if (Array.isArray(te) || te.toLowerCase() !== "chunked") throw new H1Error(400, `unsupported transfer-encoding ${JSON.stringify(te)}`);
    return { kind: "chunked" };
  }
  if (cl !== undefined) {
    if (Array.isArray(cl) || !/^\d{1,15}$/.test(cl)) throw new H1Error(400, `malformed content-length ${JSON.stringify(cl)}`);
    return { kind: "length", bytes: Number(cl) };
  }
  return untilClose ? { kind: "close" } : { kind: "length", bytes: 0 };
}

const enum St {
  Size,
  Data,
  DataEnd,
  Trailer,
  Done,
}

/**
 * A body's bytes as they arrive, unframed: `push` hands each piece of payload to `onData` and
 * says where in the buffer the body ended (the rest is the next message), or -1 while it goes on.
 * Trailers are read past, not kept.
 */
export class BodyReader {
  private st: St;
  private left: number;
  /** A chunk-size or trailer line split across reads. */
  private line = "";

  constructor(
    private readonly framing: Framing,
    private readonly onData: (b: Buffer) => void,
  ) {
    this.st = framing.kind === "chunked" ? St.Size : framing.kind === "length" && framing.bytes === 0 ? St.Done : St.Data;
    this.left = framing.kind === "length" ? framing.bytes : 0;
  }

  get done(): boolean {
    return this.st === St.Done;
  }

  /** The body runs to the connection's close (a response with neither length nor chunks). */
  get endsAtClose(): boolean {
    return this.framing.kind === "close";
  }

  push(buf: Buffer, from: number): number {
    let i = from;
    if (this.st === St.Done) return i;
    if (this.framing.kind === "close") {
      if (i < buf.length) this.onData(i === 0 ? buf : buf.subarray(i));
      return -1;
    }
    if (this.framing.kind === "length") {
      const n = Math.min(this.left, buf.length - i);
      if (n > 0) this.onData(buf.subarray(i, i + n));
      this.left -= n;
      if (this.left > 0) return -1;
      this.st = St.Done;
      return i + n;
    }
    while (i < buf.length) {
      if (this.st === St.Data) {
        const n = Math.min(this.left, buf.length - i);
        this.onData(buf.subarray(i, i + n));
        this.left -= n;
        i += n;
        if (this.left === 0) {
          this.st = St.DataEnd;
          this.line = "";
        }
        continue;
      }
      const nl = buf.indexOf(10, i);
      const piece = buf.toString("latin1", i, nl < 0 ? buf.length : nl + 1);
      this.line += piece;
      if (this.line.length > 4096) throw new H1Error(400, "chunk-size or trailer line too long");
      if (nl < 0) return -1;
      i = nl + 1;
      const text = this.line;
      this.line = "";
      if (!text.endsWith("\r\n")) throw new H1Error(400, "bare LF in chunked framing");
      const body = text.slice(0, -2);
      if (this.st === St.DataEnd) {
        if (body !== "") throw new H1Error(400, "chunk data longer than its size");
        this.st = St.Size;
      } else if (this.st === St.Size) {
        const size = body.split(";", 1)[0].trim();
        if (!/^[0-9A-Fa-f]{1,8}$/.test(size)) throw new H1Error(400, `malformed chunk size ${JSON.stringify(size.slice(0, 20))}`);
        this.left = parseInt(size, 16);
        this.st = this.left === 0 ? St.Trailer : St.Data;
      } else if (body === "") {
        this.st = St.Done;
        return i;
      }
    }
    return -1;
  }
}

/** A head's header lines (`name: value\r\n` each, repeated names on lines of their own). */
export function headerLines(h: Headers): string {
  let out = "";
  for (const k in h) {
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out += `${k}: ${x}\r\n`;
    else out += `${k}: ${v}\r\n`;
  }
  return out;
}

/** One chunk of a chunked body. */
export function chunk(data: string | Buffer): string | Buffer {
  if (typeof data === "string") return `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
  return Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`, "latin1"), data, Buffer.from("\r\n", "latin1")]);
}
