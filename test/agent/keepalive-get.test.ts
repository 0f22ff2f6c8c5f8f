import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { KeepAliveGet } from "../../agent/src/util/keepalive-get";
import { EngineReader } from "../../agent/src/node/sources/engine-metrics";
import { KeptAlive } from "../../agent/src/node/sources/kept-alive";
import { freePort } from "../../agent/src/util/net";

const servers: (Server | HttpServer)[] = [];
const clients: KeepAliveGet[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => { (s as HttpServer).closeAllConnections?.(); s.close(() => r()); })));
});

/** A server that answers every request on a connection with `answer(n)` (n: requests seen on the whole server), raw bytes. */
async function raw(answer: (n: number, socket: Socket) => string | null): Promise<{ port: number; connections: () => number; requests: string[] }> {
  let n = 0;
  let conns = 0;
  const requests: string[] = [];
  const srv = createServer((s) => {
    conns++;
    let buf = "";
    s.setEncoding("latin1").on("data", (d: string) => {
      buf += d;
      for (let end = buf.indexOf("\r\n\r\n"); end >= 0; end = buf.indexOf("\r\n\r\n")) {
        requests.push(buf.slice(0, end));
        buf = buf.slice(end + 4);
        const a = answer(++n, s);
        if (a !== null) s.write(a);
      }
    });
    s.on("error", () => undefined);
  });
  servers.push(srv);
  const port = await freePort();
  await new Promise<void>((r) => srv.listen(port, "127.0.0.1", () => r()));
  return { port, connections: () => conns, requests };
}

function client(url: string, headers: Record<string, string> = {}): KeepAliveGet {
  const c = new KeepAliveGet(url, headers);
  clients.push(c);
  return c;
}

describe("a kept-alive GET over one socket (the engine metrics, five times a second)", () => {
  it("reads Content-Length answers, many over one connection, with the caller's headers", async () => {
    const s = await raw((n) => `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${String(n).length + 6}\r\n\r\nvalue ${n}`);
    const c = client(`http://127.0.0.1:${s.port}/metrics?x=1`, { Authorization: "Bearer k" });
    for (let i = 1; i <= 5; i++) expect(await c.get(2000)).toEqual({ status: 200, text: `value ${i}` });
    expect(s.connections()).toBe(1);
    expect(s.requests[0]).toMatch(/^GET \/metrics\?x=1 HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+\r\n/);
    expect(s.requests[0]).toContain("\r\nAuthorization: Bearer k");
  });

  it("reads chunked answers (split anywhere, with trailers) and answers ended by the server closing", async () => {
    const body = "a".repeat(70_000) + "é";
    const s = await raw((n, sock) => {
      if (n === 1) {
        // Written in small pieces: chunk sizes and data split across reads.
        const b = Buffer.from(body);
        const text = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(40_000).toString(16)};ext=1\r\n${b.subarray(0, 40_000).toString("latin1")}\r\n${(b.length - 40_000).toString(16)}\r\n${b.subarray(40_000).toString("latin1")}\r\n0\r\nX-Trailer: 1\r\n\r\n`;
        const bytes = Buffer.from(text, "latin1");
        for (let i = 0; i < bytes.length; i += 7_001) sock.write(bytes.subarray(i, i + 7_001));
        return null;
      }
      sock.end("HTTP/1.0 200 OK\r\n\r\nuntil close");
      return null;
    });
    const c = client(`http://127.0.0.1:${s.port}/m`);
    expect(await c.get(2000)).toEqual({ status: 200, text: body });
    expect(await c.get(2000)).toEqual({ status: 200, text: "until close" });
  });

  it("a server that closed the idle connection, or restarted, costs a retry on a fresh one, not a failed read", async () => {
    // Each connection answers once; a second request on it is dropped unanswered, as a server that
    // closed its idle connection just as the request left (or a restarted one) does.
    const served = new WeakSet<Socket>();
    const s = await raw((n, sock) => {
      if (served.has(sock)) {
        sock.destroy();
        return null;
      }
      served.add(sock);
      return `HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nr${n}`;
    });
    const c = client(`http://127.0.0.1:${s.port}/`);
    expect(await c.get(2000)).toEqual({ status: 200, text: "r1" });
    expect(await c.get(2000)).toEqual({ status: 200, text: "r3" });
    expect(s.connections()).toBe(2);
    // An idle close the client saw before it asked: a fresh connection, no retry needed.
    const t = await raw((n, sock) => {
      sock.write(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nq${n}`);
      setTimeout(() => sock.destroy(), 20);
      return null;
    });
    const d = client(`http://127.0.0.1:${t.port}/`);
    expect(await d.get(2000)).toEqual({ status: 200, text: "q1" });
    await new Promise((r) => setTimeout(r, 100));
    expect(await d.get(2000)).toEqual({ status: 200, text: "q2" });
  });

  it("refused, timed out, and unsupported answers say so", async () => {
    const closed = await freePort();
    expect(await client(`http://127.0.0.1:${closed}/`).get(1000)).toMatchObject({ kind: "refused" });
    const silent = await raw(() => null);
    const t0 = performance.now();
    expect(await client(`http://127.0.0.1:${silent.port}/`).get(200)).toMatchObject({ kind: "timeout" });
    expect(performance.now() - t0).toBeLessThan(1500);
    const info = await raw(() => "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect(await client(`http://127.0.0.1:${info.port}/`).get(1000)).toMatchObject({ kind: "unsupported" });
    expect(await client("https://127.0.0.1:1/").get(1000)).toMatchObject({ kind: "unsupported" });
    expect(await client(`http://127.0.0.1:${info.port}/`, { Authorization: "Bearer a\r\nX-Evil: 1" }).get(1000)).toMatchObject({ kind: "unsupported" });
  });
});

describe("EngineReader", () => {
  it("reads a real node:http server's metrics over one connection; an answer it does not take goes to the full client", async () => {
    let conns = 0;
    let early = false;
    const srv = createHttpServer((_req, res) => {
      if (early) res.writeEarlyHints({ link: "</x>; rel=preload" });
      res.end('vllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_running{engine="0"} 1\nvllm:generation_tokens_total{engine="0"} 10\n');
    });
    srv.on("connection", () => conns++);
    servers.push(srv);
    const port = await freePort();
    await new Promise<void>((r) => srv.listen(port, "127.0.0.1", () => r()));
    const reader = new EngineReader(`http://127.0.0.1:${port}/metrics`);
    for (let i = 0; i < 4; i++) expect(await reader.read(2000)).toMatchObject({ family: "vllm", waiting: 2, running: 1, tokensTotal: 10 });
    expect(conns).toBe(1);
    early = true;
    expect(await reader.read(2000)).toMatchObject({ family: "vllm", waiting: 2 });
    expect(await reader.read(2000)).toMatchObject({ family: "vllm", waiting: 2 });
    reader.close();
  });
});

describe("KeptAlive (the model check and the probe)", () => {
  it("sends GETs and JSON POSTs over one connection with the caller's headers; an aborted request drops the connection", async () => {
    const s = await raw((n) => (n === 4 ? null : `HTTP/1.1 200 OK\r\nContent-Length: ${String(n).length + 3}\r\n\r\nok ${n}`));
    const k = new KeptAlive();
    try {
      const base = `http://127.0.0.1:${s.port}`;
      expect(await k.send(`${base}/health`, 2000)).toEqual({ status: 200, text: "ok 1" });
      expect(await k.send(`${base}/v1/completions`, 2000, { prompt: "ping" }, undefined, { Authorization: "Bearer k" })).toEqual({ status: 200, text: "ok 2" });
      expect(await k.send(`${base}/v1/models`, 2000)).toEqual({ status: 200, text: "ok 3" });
      expect(s.connections()).toBe(1);
      expect(s.requests[1]).toMatch(/^POST \/v1\/completions HTTP\/1\.1\r\n/);
      expect(s.requests[1]).toContain("\r\nAuthorization: Bearer k");
      expect(s.requests[1]).toContain(`\r\nContent-Length: ${JSON.stringify({ prompt: "ping" }).length}`);
      // The 4th request gets no answer: aborted, it ends as a timeout and the next request opens a new connection.
      const abort = new AbortController();
      const pending = k.send(`${base}/v1/completions`, 5000, { prompt: "ping" }, abort.signal);
      setTimeout(() => abort.abort(), 100);
      expect(await pending).toMatchObject({ kind: "timeout" });
      expect(await k.send(`${base}/health`, 2000)).toEqual({ status: 200, text: "ok 5" });
      expect(s.connections()).toBe(2);
      // Nothing listening: the same failure as the full client's.
      const port = await freePort();
      expect(await k.send(`http://127.0.0.1:${port}/health`, 2000)).toEqual({ kind: "refused", detail: `connection refused: http://127.0.0.1:${port}/health` });
    } finally {
      k.close();
    }
  });
});
