/**
 * The relay's HTTP/1.1 on its two loopback legs (agent/src/edge/continuation/h1*.ts): framing read
 * byte by byte and refused when it could smuggle a request, the listener driven by Node's own HTTP
 * client, the pool against Node's own HTTP server.
 */
import { request, Agent, type createServer, type IncomingMessage } from "node:http";
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BodyReader, H1Error, framingOf, parseHead, headEnd } from "../../agent/src/edge/continuation/h1";
import { closeH1Server, createH1Server, type H1Request } from "../../agent/src/edge/continuation/h1-server";
import { H1Pool, type H1Handler } from "../../agent/src/edge/continuation/h1-pool";
import { freePort, waitFor } from "../../agent/src/util/net";
import { countingServer } from "../l1/fixtures";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function readAll(framing: Parameters<typeof framingOf>[0], wire: string, split: number[]): { data: string; end: number } {
  const got: Buffer[] = [];
  const r = new BodyReader(framingOf(framing, true), (b) => got.push(Buffer.from(b)));
  const buf = Buffer.from(wire, "latin1");
  let end = -1;
  let from = 0;
  for (const to of [...split, buf.length]) {
    const piece = buf.subarray(from, to);
    from = to;
    if (end >= 0 || piece.length === 0) continue;
    const at = r.push(piece, 0);
    if (at >= 0) end = at + (to - piece.length);
  }
  return { data: Buffer.concat(got).toString("latin1"), end };
}

describe("h1 framing", () => {
  const wire = "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: t\r\n\r\nNEXT";

  it("a chunked body reads the same however the bytes are split, and says where it ended", () => {
    for (let cut = 0; cut <= wire.length; cut++) {
      const { data, end } = readAll({ "transfer-encoding": "chunked" }, wire, [cut]);
      expect(data, `split at ${cut}`).toBe("hello, world");
      expect(end, `split at ${cut}`).toBe(wire.length - 4);
    }
  });

  it("a content-length body stops at its length; one to the close never ends by itself", () => {
    expect(readAll({ "content-length": "5" }, "helloNEXT", [2])).toEqual({ data: "hello", end: 5 });
    expect(readAll({}, "all of it", [3])).toEqual({ data: "all of it", end: -1 });
  });

  it("refuses what could smuggle a request past the proxy: both lengths, another coding, a bad size, a bare LF, a folded header", () => {
    expect(() => framingOf({ "content-length": "3", "transfer-encoding": "chunked" }, false)).toThrow(H1Error);
    expect(() => framingOf({ "transfer-encoding": "gzip, chunked" }, false)).toThrow(/transfer-encoding/);
    expect(() => framingOf({ "content-length": ["3", "4"] }, false)).toThrow(/content-length/);
    expect(() => framingOf({ "content-length": "-1" }, false)).toThrow(/content-length/);
    expect(() => readAll({ "transfer-encoding": "chunked" }, "zz\r\nhello\r\n", [])).toThrow(/chunk size/);
    expect(() => readAll({ "transfer-encoding": "chunked" }, "5\nhello\r\n", [])).toThrow(/bare LF/);
    expect(() => readAll({ "transfer-encoding": "chunked" }, "2\r\nhello\r\n", [])).toThrow(/longer than its size/);
    const folded = Buffer.from("POST / HTTP/1.1\r\nx-a: 1\r\n folded\r\n\r\n");
    expect(() => parseHead(folded, headEnd(folded))).toThrow(/malformed header/);
  });

  it("keeps repeated headers, lowercases names, and refuses a head past 64 KiB", () => {
    const b = Buffer.from("HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nset-cookie: b\r\nX-One:  v \r\n\r\n");
    expect(parseHead(b, headEnd(b))).toEqual({ start: "HTTP/1.1 200 OK", headers: { "set-cookie": ["a", "b"], "x-one": "v" } });
    expect(() => headEnd(Buffer.alloc(70_000, 97))).toThrow(expect.objectContaining({ status: 431 }));
  });
});

async function h1Server(onRequest: Parameters<typeof createH1Server>[1], maxBodyBytes = 1024): Promise<{ port: number; server: NetServer }> {
  const server = createH1Server({ maxBodyBytes, headersTimeoutMs: 2_000 }, onRequest);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => closeH1Server(server));
  return { port: (server.address() as AddressInfo).port, server };
}

function post(port: number, body: string | string[], agent: Agent | false = false): Promise<{ res: IncomingMessage; text: string; socket: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: "POST", path: "/v1/completions?x=1", agent, headers: { "content-type": "application/json", ...(typeof body === "string" ? { "content-length": Buffer.byteLength(body) } : {}) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ res, text, socket: req.socket }));
    });
    req.on("error", reject);
    // A list is sent in pieces, chunked.
    if (typeof body === "string") req.end(body);
    else {
      for (const p of body) req.write(p);
      req.end();
    }
  });
}

describe("h1 listener (driven by node:http's client)", () => {
  it("reads content-length and chunked bodies, answers chunked with trailers or with a length, and keeps the connection", async () => {
    const seen: H1Request[] = [];
    const { port } = await h1Server((req, res) => {
      seen.push(req);
      if (seen.length === 1) {
        res.writeHead(200, { "content-type": "text/event-stream", trailer: "x-done" });
        res.write("data: é\n\n");
        res.write(Buffer.from("data: 2\n\n"));
        res.addTrailers({ "x-done": "yes" });
        res.end();
      } else {
        res.writeHead(201, { "content-length": "2" });
        res.end("ok");
      }
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    const a = await post(port, '{"a":1}', agent);
    expect(a.res.headers["transfer-encoding"]).toBe("chunked");
    expect(a.text).toBe("data: é\n\ndata: 2\n\n");
    expect(a.res.trailers).toEqual({ "x-done": "yes" });
    const b = await post(port, ['{"b":', "2}"], agent);
    expect([b.res.statusCode, b.text]).toEqual([201, "ok"]);
    expect(b.socket).toBe(a.socket);
    expect(seen.map((r) => [r.method, r.url, r.body?.toString()])).toEqual([
      ["POST", "/v1/completions?x=1", '{"a":1}'],
      ["POST", "/v1/completions?x=1", '{"b":2}'],
    ]);
    expect(seen[1].headers["transfer-encoding"]).toBe("chunked");
  });

  it("a header value outside ASCII goes out as its byte (latin1, as it came in), the body as UTF-8", async () => {
    const { port } = await h1Server((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "x-name": "caf\u00e9" });
      res.write("data: \u00e9\n\n");
      res.end();
    });
    const a = await post(port, "{}");
    expect(a.res.headers["x-name"]).toBe("caf\u00e9");
    expect(a.text).toBe("data: \u00e9\n\n");
  });

  it("a body past the bound is read past and handed on as null; the connection serves the next request", async () => {
    const { port } = await h1Server((req, res) => {
      res.writeHead(req.body === null ? 413 : 200, { "content-length": "0" });
      res.end();
    }, 16);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    expect((await post(port, "x".repeat(4096), agent)).res.statusCode).toBe(413);
    expect((await post(port, "{}", agent)).res.statusCode).toBe(200);
  });

  it("a malformed request is refused with 400 and the connection closed; the client leaving mid-answer closes the answer", async () => {
    let closed = 0;
    const { port } = await h1Server((_req, res) => {
      res.on("close", () => closed++);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    });
    const raw = await new Promise<string>((resolve) => {
      const s = connect(port, "127.0.0.1", () => s.write("POST / HTTP/1.1\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n"));
      let got = "";
      s.on("data", (d) => (got += d.toString()));
      s.on("close", () => resolve(got));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toMatch(/connection: close/);
    await new Promise<void>((resolve) => {
      const req = request({ host: "127.0.0.1", port, method: "POST", path: "/", agent: false, headers: { "content-length": 0 } }, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.end();
    });
    await waitFor("the answer closed", () => closed === 1, { timeoutMs: 2_000, everyMs: 10 });
  });
});

async function nodeServer(handler: Parameters<typeof createServer>[1]): Promise<{ port: number; connections: () => number }> {
  const s = await countingServer(handler);
  s.server.keepAliveTimeout = 60_000;
  cleanups.push(s.close);
  return s;
}

function call(pool: H1Pool, body = "{}"): Promise<{ status: number; headers: Record<string, unknown>; text: string } | { failed: "error" | "aborted"; text: string }> {
  return new Promise((resolve) => {
    let status = 0;
    let headers: Record<string, unknown> = {};
    let text = "";
    const h: H1Handler = {
      onResponse: (s, hs) => {
        status = s;
        headers = hs;
      },
      onData: (b) => (text += b.toString()),
      onEnd: () => resolve({ status, headers, text }),
      onError: (failed) => resolve({ failed, text }),
    };
    pool.request({ method: "POST", path: "/v1/completions", headers: { "content-type": "application/json" }, body: Buffer.from(body) }, h);
  });
}

describe("h1 listener: a peer sending ahead", () => {
  it("bytes sent while an answer is in progress wait for it, and past one request's worth the connection is cut", async () => {
    const seen: string[] = [];
    const { port } = await h1Server((req, res) => {
      seen.push(req.body?.toString() ?? "");
      if (seen.length === 2) {
        res.writeHead(200, { "content-length": "0" });
        res.end();
      }
      // The first is never answered: what comes after it waits.
    });
    const closed = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1", () => {
        s.write("POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\n\r\na");
        s.write("POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\n\r\nb");
        setTimeout(() => s.write(Buffer.alloc(70 * 1024, 120)), 50);
      });
      s.on("error", () => {});
      s.on("close", () => resolve(true));
      setTimeout(() => resolve(false), 3_000);
    });
    expect(closed).toBe(true);
    expect(seen).toEqual(["a"]);
  });
});

describe("h1 pool (against node:http's server)", () => {
  it("one connection carries request after request; at most maxSockets open, the rest wait; idle ones closed after idleMs", async () => {
    const held: Array<() => void> = [];
    let hold = false;
    const srv = await nodeServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${body}\n\n`);
        if (hold) held.push(() => res.end());
        else res.end();
      });
    });
    const pool = new H1Pool({ host: "127.0.0.1", port: srv.port }, { maxSockets: 2, maxFreeSockets: 1, idleMs: 300 });
    cleanups.push(() => pool.destroy());
    for (let i = 0; i < 3; i++) expect(await call(pool, `{"i":${i}}`)).toMatchObject({ status: 200, text: `data: {"i":${i}}\n\n` });
    expect(srv.connections()).toBe(1);
    hold = true;
    const three = [call(pool), call(pool), call(pool)];
    await waitFor("two held", () => held.length === 2, { timeoutMs: 2_000, everyMs: 5 });
    expect(pool.sockets()).toEqual({ busy: 2, idle: 0 });
    hold = false;
    for (const f of held.splice(0)) f();
    expect((await Promise.all(three)).map((r) => ("status" in r ? r.status : r.failed))).toEqual([200, 200, 200]);
    await waitFor("one kept idle", () => pool.sockets().busy === 0, { timeoutMs: 2_000, everyMs: 5 });
    expect(pool.sockets()).toEqual({ busy: 0, idle: 1 });
    await waitFor("the idle one closed", () => pool.sockets().idle === 0, { timeoutMs: 3_000, everyMs: 20 });
  });

  it("no server: the request fails as 'error'; a server dying mid-answer: 'aborted' after what came; an answer to the close ends whole", async () => {
    const dying = await nodeServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const pool = new H1Pool({ host: "127.0.0.1", port: dying.port }, { maxSockets: 1, maxFreeSockets: 1, idleMs: 1_000 });
    cleanups.push(() => pool.destroy());
    expect(await call(pool)).toEqual({ failed: "aborted", text: "data: 1\n\n" });
    // A raw server: an HTTP/1.0-style answer with no length, ended by closing.
    const raw = await new Promise<NetServer>((resolve) => {
      const s = createNetServer((c) => c.once("data", () => c.end("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nall of it")));
      s.listen(0, "127.0.0.1", () => resolve(s));
    });
    cleanups.push(() => new Promise<void>((r) => raw.close(() => r())));
    const toClose = new H1Pool({ host: "127.0.0.1", port: (raw.address() as AddressInfo).port }, { maxSockets: 1, maxFreeSockets: 1, idleMs: 1_000 });
    cleanups.push(() => toClose.destroy());
    expect(await call(toClose)).toMatchObject({ status: 200, text: "all of it" });
    expect(toClose.sockets()).toEqual({ busy: 0, idle: 0 });
    // Nothing listening at all.
    const port = await freePort();
    const none = new H1Pool({ host: "127.0.0.1", port }, { maxSockets: 1, maxFreeSockets: 1, idleMs: 1_000 });
    cleanups.push(() => none.destroy());
    expect(await call(none)).toEqual({ failed: "error", text: "" });
  });
});
