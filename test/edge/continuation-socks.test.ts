/**
 * The relay as HAProxy's SOCKS4 hop to the servers (agent/src/edge/continuation/socks.ts): the
 * CONNECT read and answered, a refused server answered rejected (which HAProxy counts as its own
 * connection failure: marked down, the request sent elsewhere), the server's close mirrored on
 * HAProxy's side, and a cut answer carried on through the continuation listener. Real HAProxy,
 * real relay, stub servers.
 */
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ContinuationRelay } from "../../agent/src/edge/continuation/relay";
import { ContinuationMetrics } from "../../agent/src/edge/continuation/metrics";
import { loadContinueConfig } from "../../agent/src/edge/continuation/config";
import { SOCKS4_GRANTED, SOCKS4_REJECTED, SocksError, parseSocks4 } from "../../agent/src/edge/continuation/socks";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { renderHaproxyConfig } from "../../contracts/haproxy-config";
import { socksHop } from "../../contracts/haproxy-sidecars";
import { HaproxyConfigError } from "../../contracts/haproxy-tuning";
import { freePort, waitFor } from "../../agent/src/util/net";
import { completion, countingServer, staticServer, statRows } from "../l1/fixtures";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const EVENT = (text: string, finish: string | null): string => `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"${text}","finish_reason":${finish ? `"${finish}"` : "null"}}]}\n\n`;

/** A completion server: two chunks; with `dieFirst`, its first answer is cut after one chunk (the socket destroyed). */
async function server(o: { dieFirst?: boolean; keepAliveMs?: number } = {}): Promise<{ port: number; requests: () => number; connections: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const s = await countingServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const n = ++requests;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(EVENT(" a", null));
      if (o.dieFirst && n === 1) return void setTimeout(() => req.socket.destroy(), 20);
      setTimeout(() => res.end(`${EVENT(" b", "length")}data: [DONE]\n\n`), 20);
    });
  });
  if (o.keepAliveMs) s.server.keepAliveTimeout = o.keepAliveMs;
  cleanups.push(s.close);
  return { port: s.port, requests: () => requests, connections: s.connections, close: s.close };
}

async function relayOn(upstreamPort: number, source?: string): Promise<{ relay: ContinuationRelay; port: number }> {
  const relay = new ContinuationRelay({ upstream: { host: "127.0.0.1", port: upstreamPort }, kind: "vllm", stallMs: 5_000, maxBodyBytes: 1 << 20, metrics: new ContinuationMetrics("vllm"), ...(source ? { source } : {}) });
  const port = await relay.listen(0, "127.0.0.1");
  cleanups.push(() => relay.close());
  return { relay, port };
}

function connectRequest(port: number, ip = [127, 0, 0, 1]): Buffer {
  const b = Buffer.from([4, 1, 0, 0, ...ip, 0]);
  b.writeUInt16BE(port, 2);
  return b;
}

/** A raw client of the relay: CONNECT to `port`, then what the relay answers and whether it closed. */
async function socksClient(relayPort: number, port: number): Promise<{ s: Socket; reply: Buffer; bytes: () => string; closed: () => boolean }> {
  const s = connect(relayPort, "127.0.0.1");
  let got = Buffer.alloc(0);
  let closed = false;
  s.on("data", (d: Buffer) => (got = Buffer.concat([got, d])));
  s.on("close", () => (closed = true));
  s.on("error", () => undefined);
  await new Promise<void>((r) => s.once("connect", () => r()));
  s.write(connectRequest(port));
  await waitFor("the CONNECT answered", () => got.length >= 8 || closed, { timeoutMs: 5_000, everyMs: 5 });
  cleanups.push(async () => void s.destroy());
  return { s, reply: got.subarray(0, 8), bytes: () => got.subarray(8).toString("latin1"), closed: () => closed };
}

describe("the relay's SOCKS4 CONNECT", () => {
  it("is read whole, incomplete, or refused for what HAProxy never sends", () => {
    expect(parseSocks4(connectRequest(8000))).toEqual({ target: { host: "127.0.0.1", port: 8000 }, used: 9 });
    // A user id, and the request's bytes that follow it, left for the HTTP reader.
    const withUser = Buffer.concat([connectRequest(8000, [10, 1, 2, 3]).subarray(0, 8), Buffer.from("haproxy\0GET")]);
    expect(parseSocks4(withUser)).toEqual({ target: { host: "10.1.2.3", port: 8000 }, used: 16 });
    expect(parseSocks4(connectRequest(8000).subarray(0, 5))).toBeNull();
    expect(parseSocks4(connectRequest(8000).subarray(0, 8))).toBeNull();
    expect(() => parseSocks4(Buffer.from([4, 2, 0, 80, 127, 0, 0, 1, 0]))).toThrow(/command 2 is not CONNECT/);
    expect(() => parseSocks4(Buffer.from([5, 1, 0]))).toThrow(SocksError);
    expect(() => parseSocks4(connectRequest(0))).toThrow(/port 0/);
    expect(() => parseSocks4(connectRequest(80, [0, 0, 0, 1]))).toThrow(/SOCKS4a/);
    expect(() => parseSocks4(Buffer.concat([connectRequest(80).subarray(0, 8), Buffer.alloc(300, 0x41)]))).toThrow(/user id too long/);
  });

  it("is granted once the server's connection is open, rejected and closed when it is refused", async () => {
    const up = await server();
    const { port } = await relayOn(await freePort());
    const ok = await socksClient(port, up.port);
    expect(ok.reply).toEqual(SOCKS4_GRANTED);
    expect(up.connections()).toBe(1);
    const dead = await freePort();
    const no = await socksClient(port, dead);
    expect(no.reply).toEqual(SOCKS4_REJECTED);
    await waitFor("the rejected connection closed", () => no.closed(), { timeoutMs: 5_000, everyMs: 5 });
  });

  it("carries requests to the server over its one connection; after the server closed it, the next request opens another", async () => {
    const up = await server({ keepAliveMs: 300 });
    const { port } = await relayOn(await freePort());
    const c = await socksClient(port, up.port);
    const body = JSON.stringify({ model: "m", prompt: "p", stream: true });
    const ask = (): void => void c.s.write(`POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    const answers = (): number => c.bytes().split("[DONE]").length - 1;
    ask();
    await waitFor("the first answer", () => answers() === 1, { timeoutMs: 5_000, everyMs: 5 });
    ask();
    await waitFor("the second answer", () => answers() === 2, { timeoutMs: 5_000, everyMs: 5 });
    expect([up.requests(), up.connections()]).toEqual([2, 1]);
    // The server closes its idle connection after 300 ms; HAProxy's side stays open (it may be
    // sending on it that very moment), and the next request reaches the server anew.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(c.closed()).toBe(false);
    ask();
    await waitFor("the third answer", () => answers() === 3, { timeoutMs: 5_000, everyMs: 5 });
    expect([up.requests(), up.connections()]).toEqual([3, 2]);
    expect(c.closed()).toBe(false);
  });

  it("a server gone from under its tunnel: the request gets the relay's answer, then HAProxy's side closes (its next CONNECT is HAProxy's to judge)", async () => {
    const up = await server();
    const { port } = await relayOn(await freePort());
    const c = await socksClient(port, up.port);
    await up.close();
    // The relay sees the server's connection close first, and its next request must connect anew.
    await new Promise((r) => setTimeout(r, 200));
    const body = JSON.stringify({ model: "m", prompt: "p", stream: true });
    c.s.write(`POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    // The retry through the continuation listener finds nothing there either (no listener in this test).
    await waitFor("the relay's answer", () => /^HTTP\/1\.1 502 /.test(c.bytes()), { timeoutMs: 5_000, everyMs: 5 }).catch((e) => {
      throw new Error(`${String(e)}: ${JSON.stringify(c.bytes())} closed=${c.closed()}`);
    });
    await waitFor("HAProxy's side closed", () => c.closed(), { timeoutMs: 5_000, everyMs: 5 }).catch((e) => {
      throw new Error(`${String(e)}: ${JSON.stringify(c.bytes())}`);
    });
  });
});

describe("the generator's relayed backend", () => {
  it("takes one relay on IPv4 loopback as the SOCKS4 hop, several workers on Unix sockets the listener's way, and refuses a Unix socket for one", () => {
    const one = renderHaproxyConfig({ proxies: [{ name: "p", bind: "127.0.0.1:1", health: "agent", servers: { kind: "static", local: [staticServer({ name: "s0", port: 2 }, 3)], backup: [] }, continuation: { relay: "127.0.0.1:9420", bind: "127.0.0.1:9422" } }] });
    expect(one).toContain("  use_backend p_relayed if METH_POST { path /v1/chat/completions /v1/completions } { nbsrv(p_continuation) gt 0 } { nbsrv(p_relayed) gt 0 }");
    expect(one).toMatch(/\nbackend p_relayed\n[^]*http-reuse always\n {2}server s0 127\.0\.0\.1:2 [^\n]* socks4 127\.0\.0\.1:9420\n/);
    expect(one.split("\nbackend p_servers\n")[1].split("\n\n")[0]).not.toContain("socks4");
    // The listener (second requests) goes straight to the servers.
    expect(one).toMatch(/frontend p_continuation\n[^]*default_backend p_servers\n/);
    const two = renderHaproxyConfig({ proxies: [{ name: "p", bind: "127.0.0.1:1", health: "agent", servers: { kind: "static", local: [staticServer({ name: "s0", port: 2 }, 3)], backup: [] }, continuation: { relay: "unix@/run/c/relay.sock", bind: "unix@/run/c/up.sock", workers: 2 } }] });
    expect(two).toContain("  use_backend p_continuation if METH_POST");
    expect(two).not.toContain("socks4");
    const unix = { relay: "unix@/run/c/relay.sock", bind: "unix@/run/c/up.sock" };
    expect(() => socksHop("p", unix)).toThrow(/continuation relay "unix@\/run\/c\/relay.sock" of p must be an IPv4 loopback address:port with one worker/);
    expect(() => renderHaproxyConfig({ proxies: [{ name: "p", bind: "127.0.0.1:1", health: "agent", servers: { kind: "static", local: [staticServer({ name: "s0", port: 2 }, 3)], backup: [] }, continuation: unix }] })).toThrow(/must be an IPv4 loopback address:port/);
    expect(() => socksHop("p", { ...unix, relay: "[::1]:9420" })).toThrow(HaproxyConfigError);
  });
});

describe("LLMHA_CONTINUE_SOURCE", () => {
  it("sets where the relay's connections to the servers leave from; anything but an IP address stops start-up, named", async () => {
    expect(loadContinueConfig([], {}).source).toBeNull();
    expect(loadContinueConfig(["--source", "127.0.0.2"], {}).source).toBe("127.0.0.2");
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_SOURCE: "az-a" })).toThrow(/LLMHA_CONTINUE_SOURCE="az-a" must be an IP address/);
    let from = "";
    const s = await countingServer((req, res) => {
      from = req.socket.remoteAddress ?? "";
      res.end("ok");
    });
    cleanups.push(s.close);
    const { port } = await relayOn(await freePort(), "127.0.0.2");
    const c = await socksClient(port, s.port);
    expect(c.reply).toEqual(SOCKS4_GRANTED);
    c.s.write("GET / HTTP/1.1\r\nhost: x\r\n\r\n");
    await waitFor("the answer", () => c.bytes().endsWith("ok"), { timeoutMs: 5_000, everyMs: 5 });
    expect(from).toBe("127.0.0.2");
  });
});

describe("HAProxy through the relay (socks4 on the relayed backend's servers)", () => {
  async function l1(servers: { name: string; port: number }[], tuning = {}): Promise<{ hp: HaproxyHandle; port: number; relay: ContinuationRelay; relayPort: number; listener: number }> {
    const bindPort = await freePort();
    const listener = await freePort();
    const { relay, port: relayPort } = await relayOn(listener);
    const hp = await startHaproxy({
      nbthread: 1,
      proxies: [
        {
          name: "l1",
          bind: `127.0.0.1:${bindPort}`,
          health: "agent",
          tuning,
          servers: { kind: "static", local: await Promise.all(servers.map(async (s) => staticServer(s, await freePort()))), backup: [] },
          continuation: { relay: `127.0.0.1:${relayPort}`, bind: `127.0.0.1:${listener}` },
        },
      ],
    });
    cleanups.push(() => hp.stop());
    await waitFor("servers and relay UP", async () => (await hp.stats()).filter((r) => r.status.startsWith("UP")).length === 2 * servers.length + 1, { timeoutMs: 10_000, everyMs: 50 });
    return { hp, port: bindPort, relay, relayPort, listener };
  }

  it("a relay that goes away: straight to the servers once HAProxy sees it down, and still straight after it is back until its backend has a server up again", async () => {
    const up = await server();
    // The servers' checks far apart: a server taken out of the relayed backend stays out for this
    // test, while the relay's own check (every second) sees it go and come back.
    const { hp, port, relay, relayPort, listener } = await l1([{ name: "s0", port: up.port }], { checkInterMs: 20_000, agentInterMs: 20_000 });
    const status = async (px: string, sv: string): Promise<string> => (await statRows(hp))(px, sv).status;
    const total = async (px: string): Promise<number> => Number((await statRows(hp))(px, "s0").req_tot);
    expect((await completion(port)).status).toBe(200);
    expect(await total("l1_relayed")).toBe(1);
    await relay.close();
    // Before HAProxy's check sees the relay gone, a request through it fails to connect: that takes
    // the server out of the relayed backend (only), and the request has nowhere else to go there.
    expect([200, 503]).toContain((await completion(port)).status);
    await waitFor("the relayed backend's server out", async () => (await status("l1_relayed", "s0")).startsWith("DOWN"), { timeoutMs: 10_000, everyMs: 20 });
    expect(await status("l1_servers", "s0")).toMatch(/^UP/);
    await waitFor("the relay seen DOWN", async () => (await status("l1_continuation", "relay")).startsWith("DOWN"), { timeoutMs: 10_000, everyMs: 50 });
    for (let i = 0; i < 3; i++) expect((await completion(port)).status).toBe(200);
    expect(await total("l1_servers")).toBe(3);
    // Back on the same port: seen up at its next check, while the relayed backend's server is still
    // out; completions keep going straight until it is back (HAProxy's checks bring it).
    const again = new ContinuationRelay({ upstream: { host: "127.0.0.1", port: listener }, kind: "vllm", stallMs: 5_000, maxBodyBytes: 1 << 20, metrics: new ContinuationMetrics("vllm") });
    await again.listen(relayPort, "127.0.0.1");
    cleanups.push(() => again.close());
    await waitFor("the relay UP", async () => (await status("l1_continuation", "relay")).startsWith("UP"), { timeoutMs: 10_000, everyMs: 20 });
    expect(await status("l1_relayed", "s0")).toMatch(/^DOWN/);
    for (let i = 0; i < 3; i++) expect((await completion(port)).status).toBe(200);
    expect([await total("l1_relayed"), await total("l1_servers")]).toEqual([1, 6]);
  });

  it("a server that refuses: the relay rejects the CONNECT, HAProxy counts its connection error, marks it down and sends the request to another", async () => {
    const gone = await server();
    const alive = await server();
    // Checks far apart: what takes the refusing server out is the live traffic, not a check.
    const { hp, port } = await l1([{ name: "s0", port: gone.port }, { name: "s1", port: alive.port }], { checkInterMs: 20_000, agentInterMs: 20_000 });
    await gone.close();
    for (let i = 0; i < 4; i++) {
      const r = await completion(port);
      expect(r.status).toBe(200);
      expect(r.body).toContain("[DONE]");
    }
    const row = await statRows(hp);
    const s0 = row("l1_relayed", "s0");
    // Taken out by HAProxy's analysis of live traffic (`observe layer4`: "L4 unsuccessful
    // connection"), not by a check, and the request redispatched.
    expect(s0.status).toMatch(/^DOWN/);
    expect([s0.check_status, Number(s0.hanafail) >= 1, Number(s0.wredis) >= 1]).toEqual(["HANA", true, true]);
    expect(Number(row("l1_relayed", "s1").req_tot)).toBe(4);
    expect(alive.requests()).toBe(4);
  });

  it("an answer cut mid-stream is carried on through the continuation listener, whose backend goes straight to the servers", async () => {
    const up = await server({ dieFirst: true });
    const { hp, port } = await l1([{ name: "s0", port: up.port }]);
    const r = await completion(port);
    expect(r.status).toBe(200);
    expect(r.body).toContain(": x-llmha-continued continue after 1 tokens");
    expect(r.body).toContain("[DONE]");
    const row = await statRows(hp);
    // The first request through the relay's tunnel, the second through the listener and the straight backend.
    expect(Number(row("l1_relayed", "s0").req_tot)).toBe(1);
    expect(Number(row("l1_servers", "s0").req_tot)).toBe(1);
    expect(Number(row("l1_continuation", "FRONTEND").req_tot)).toBe(1);
    expect(up.requests()).toBe(2);
  });
});
