/**
 * The edge scenarios' flood, cheap to send: a pre-built HTTP/1.1 request written on raw
 * keep-alive sockets (one in flight on each, more sockets when the rate needs them), answers
 * read with a minimal parser (status line, Content-Length, Retry-After). A flood from other
 * hosts costs the proxy's host nothing but the proxy's own work; generated with Node's HTTP
 * client on the same 2-core machine it cost about a fifth of a millisecond of CPU per request,
 * which the legitimate clients then measured as the proxy's slowness (edge-flood: p50 ×1.57).
 * Not pipelined: HAProxy closes a connection when it refuses a request whose body is still
 * arriving behind the next one (seen: 21 of 400 pipelined requests cut).
 */
import { connect, type Socket } from "node:net";
import { EDGE_BODY as BODY, type Sent } from "./paced";

/** Sockets per proxy at most: past it, requests wait for a free one (sent late, not dropped). */
const MAX_SOCKETS_PER_URL = 32;
const TICK_MS = 50;

/** One proxy: its pre-built request, its sockets, and the send times waiting for a free socket. */
interface Target {
  url: URL;
  bytes: Buffer;
  conns: Conn[];
  queued: number[];
}

interface Conn {
  target: Target;
  sock: Socket;
  buf: Buffer;
  /** The request in flight: its send time (drill clock) and performance.now() at the write; null when idle. */
  busy: { t: number; t0: number } | null;
}

function requestBytes(url: URL, headers: Record<string, string>): Buffer {
  const lines = [`POST /v1/completions HTTP/1.1`, `host: ${url.host}`, "content-type: application/json", `content-length: ${Buffer.byteLength(BODY)}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return Buffer.from(`${lines.join("\r\n")}\r\n\r\n${BODY}`);
}

/** The length of a chunked body starting at `from` (its last chunk and trailers included), null while incomplete. */
function chunkedLength(buf: Buffer, from: number): number | null {
  let at = from;
  for (;;) {
    const eol = buf.indexOf("\r\n", at);
    if (eol < 0) return null;
    const n = parseInt(buf.subarray(at, eol).toString("latin1"), 16);
    if (Number.isNaN(n)) return buf.length - from; // not chunked after all: take what came
    if (n === 0) {
      const end = buf.indexOf("\r\n\r\n", eol);
      return end < 0 ? null : end + 4 - from;
    }
    at = eol + 2 + n + 2;
    if (at > buf.length) return null;
  }
}

/** Sends at `perS` requests a second round-robin over `urls` until stopped. */
export function rawPaced(urls: readonly string[], headers: Record<string, string>, perS: number, now: () => number): { records: Sent[]; stop(): Promise<void> } {
  const records: Sent[] = [];
  const targets: Target[] = urls.map((u) => new URL(u)).map((url) => ({ url, bytes: requestBytes(url, headers), conns: [], queued: [] }));
  let stopped = false;
  const send = (c: Conn, t: number): void => {
    c.busy = { t, t0: performance.now() };
    c.sock.write(c.target.bytes);
  };
  const idle = (c: Conn): void => {
    c.busy = null;
    const t = c.target.queued.shift();
    if (t !== undefined && !stopped) send(c, t);
  };
  const open = (target: Target): Conn => {
    const c: Conn = { target, sock: connect(Number(target.url.port), target.url.hostname), buf: Buffer.alloc(0), busy: null };
    c.sock.setNoDelay(true);
    c.sock.on("data", (d: Buffer) => read(c, d));
    c.sock.on("error", () => undefined);
    c.sock.on("close", () => {
      // The request in flight failed (the proxy closed, or refused the connection): a new one takes its place.
      if (c.busy) records.push({ t: c.busy.t, ms: performance.now() - c.busy.t0, status: 0, retryAfter: false });
      c.busy = null;
      target.conns.splice(target.conns.indexOf(c), 1);
    });
    target.conns.push(c);
    return c;
  };
  const read = (c: Conn, d: Buffer): void => {
    c.buf = c.buf.length ? Buffer.concat([c.buf, d]) : d;
    const end = c.buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const head = c.buf.subarray(0, end).toString("latin1");
    const size = /\r\ntransfer-encoding:\s*chunked/i.test(head) ? chunkedLength(c.buf, end + 4) : Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
    if (size === null || c.buf.length < end + 4 + size) return;
    c.buf = c.buf.subarray(end + 4 + size);
    const w = c.busy;
    if (w) records.push({ t: w.t, ms: performance.now() - w.t0, status: Number(head.slice(9, 12)) || 0, retryAfter: /\r\nretry-after:/i.test(head) });
    if (/\r\nconnection:\s*close/i.test(head)) {
      c.busy = null;
      c.sock.destroy();
    } else idle(c);
  };
  let owed = 0;
  let next = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    // By the time passed, not the ticks: a late timer on a busy machine must not lower the rate.
    const at = performance.now();
    owed += (perS * (at - last)) / 1000;
    last = at;
    const t = now();
    for (; owed >= 1; owed--) {
      const target = targets[next++ % targets.length];
      const free = target.conns.find((c) => c.busy === null && !c.sock.connecting) ?? target.conns.find((c) => c.busy === null);
      if (free) send(free, t);
      else if (target.conns.length < MAX_SOCKETS_PER_URL) send(open(target), t);
      else target.queued.push(t);
    }
  }, TICK_MS);
  return {
    records,
    async stop() {
      clearInterval(timer);
      const deadline = performance.now() + 5000;
      const pending = (): boolean => targets.some((x) => x.queued.length > 0 || x.conns.some((c) => c.busy !== null));
      while (pending() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      stopped = true;
      for (const x of targets) for (const c of [...x.conns]) c.sock.destroy();
      await new Promise((r) => setTimeout(r, 20));
    },
  };
}
