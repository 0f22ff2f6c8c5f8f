/**
 * The relay's connections: its pool toward HAProxy's continuation listener (bounded by the
 * listener's maxconn, idle ones kept for the next request) and HAProxy's toward the relay (any idle
 * one reused, a new client's first request included). Real HAProxy, real relay, stub servers.
 */
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContinuationRelay } from "../../agent/src/edge/continuation/relay";
import { ContinuationMetrics } from "../../agent/src/edge/continuation/metrics";
import { ContinueConfigError, DEFAULT_UPSTREAM_MAX_SOCKETS, loadContinueConfig } from "../../agent/src/edge/continuation/config";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { freePort, waitFor } from "../../agent/src/util/net";
import { completion, countingServer, send, staticServer, statRows } from "../l1/fixtures";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server answering each completion with a short SSE stream, held until `release()`; counts its connections. */
async function streamingServer(): Promise<{ port: number; connections: () => number; requests: () => number; hold: () => void; release: () => void }> {
  let requests = 0;
  const held: Array<() => void> = [];
  let open = true;
  const s = await countingServer((req, res) => {
    req.resume();
    req.on("end", () => {
      requests++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n`);
      const finish = (): void => void res.end(`data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" b","finish_reason":"length"}]}\n\ndata: [DONE]\n\n`);
      if (open) finish();
      else held.push(finish);
    });
  });
  cleanups.push(s.close);
  return {
    port: s.port,
    connections: s.connections,
    requests: () => requests,
    // From now on each answer stops after its first chunk until `release`.
    hold: () => {
      open = false;
    },
    release: () => {
      for (const f of held.splice(0)) f();
    },
  };
}

async function relayOver(upstreamPort: number, pool?: { maxSockets: number; maxFreeSockets: number }): Promise<{ relay: ContinuationRelay; port: number }> {
  const relay = new ContinuationRelay({ upstream: { host: "127.0.0.1", port: upstreamPort }, kind: "vllm", stallMs: 5_000, maxBodyBytes: 1 << 20, metrics: new ContinuationMetrics("vllm"), ...(pool ? { upstreamPool: pool } : {}) });
  const port = await relay.listen(0, "127.0.0.1");
  cleanups.push(() => relay.close());
  return { relay, port };
}

describe("llm-ha continue: the upstream pool settings", () => {
  it("default to the L1 pod's continuation listener maxconn, idle as many as open", () => {
    const cfg = loadContinueConfig([], {});
    expect(cfg.upstreamPool).toEqual({ maxSockets: DEFAULT_UPSTREAM_MAX_SOCKETS, maxFreeSockets: DEFAULT_UPSTREAM_MAX_SOCKETS });
    expect(loadContinueConfig(["--upstream-max-sockets", "64"], {}).upstreamPool).toEqual({ maxSockets: 64, maxFreeSockets: 64 });
    expect(loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS: "64", LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS: "8" }).upstreamPool).toEqual({ maxSockets: 64, maxFreeSockets: 8 });
    expect(loadContinueConfig(["--upstream-max-free-sockets=0"], {}).upstreamPool.maxFreeSockets).toBe(0);
  });

  it("refuse bad values at start-up, naming the variable", () => {
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS: "0" })).toThrow(/LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS="0" must be an integer ≥ 1/);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS: "lots" })).toThrow(ContinueConfigError);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS: "-1" })).toThrow(/LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS="-1"/);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS: "4", LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS: "5" })).toThrow(/LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS=5 must be ≤ LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS=4/);
  });

  it("take Unix sockets for both legs (the L1 pod), refusing a relative or overlong path by name", () => {
    const cfg = loadContinueConfig(["--socket", "/run/ct/relay.sock"], { LLMHA_CONTINUE_UPSTREAM: "unix@/run/ct/upstream.sock" });
    expect([cfg.socket, cfg.upstream]).toEqual(["/run/ct/relay.sock", { path: "/run/ct/upstream.sock" }]);
    expect(loadContinueConfig([], {})).toMatchObject({ socket: null, upstream: { host: "127.0.0.1", port: 9422 } });
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_SOCKET: "relay.sock" })).toThrow(/LLMHA_CONTINUE_SOCKET: "relay.sock" must be an absolute Unix socket path/);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM: `unix@/${"x".repeat(120)}` })).toThrow(/LLMHA_CONTINUE_UPSTREAM: .* at most 100 bytes/);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_UPSTREAM: "unix:/run/x.sock" })).toThrow(/must be host:port or unix@\/path/);
  });
});

describe("llm-ha continue: connections to the listener", () => {
  it("one connection carries request after request; at most maxSockets open, maxFreeSockets kept idle", async () => {
    const up = await streamingServer();
    const { relay, port } = await relayOver(up.port, { maxSockets: 2, maxFreeSockets: 1 });
    for (let i = 0; i < 5; i++) expect((await completion(port)).status).toBe(200);
    expect(up.connections()).toBe(1);
    // Three streams at once over a pool of two: the third waits for a connection.
    up.hold();
    const three = [completion(port), completion(port), completion(port)];
    await waitFor("two streams upstream", () => up.requests() === 5 + 2, { timeoutMs: 5_000, everyMs: 10 });
    await new Promise((r) => setTimeout(r, 100));
    expect(up.requests()).toBe(7);
    expect(relay.upstreamSockets().busy).toBe(2);
    up.release();
    await waitFor("the third stream upstream", () => up.requests() === 8, { timeoutMs: 5_000, everyMs: 10 });
    up.release();
    for (const r of await Promise.all(three)) expect(r.body).toContain("[DONE]");
    expect(up.connections()).toBe(2);
    // Both back; one kept idle, the other closed.
    await waitFor("one idle connection", () => relay.upstreamSockets().busy === 0, { timeoutMs: 5_000, everyMs: 10 });
    expect(relay.upstreamSockets()).toEqual({ busy: 0, idle: 1 });
  });

  it.each(["socks4", "workers"] as const)("through HAProxy (%s), a new client connection's request reuses an idle connection (http-reuse always)", async (way) => {
    const up = await streamingServer();
    const bindPort = await freePort();
    let continuation: { relay: string; bind: string; workers?: number };
    if (way === "socks4") {
      // One relay: HAProxy's SOCKS4 hop to the server, on loopback TCP.
      const relayUpstream = await freePort();
      const { port: relayPort } = await relayOver(relayUpstream);
      continuation = { relay: `127.0.0.1:${relayPort}`, bind: `127.0.0.1:${relayUpstream}` };
    } else {
      // Several workers, each on a Unix socket of its own in one folder, sending through the
      // listener; a stale file where a relay listens is replaced.
      const dir = await mkdtemp(join(tmpdir(), "llmha-ct-"));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      await writeFile(join(dir, "relay-0.sock"), "stale");
      for (const i of [0, 1]) {
        const relay = new ContinuationRelay({ upstream: { path: join(dir, "upstream.sock") }, kind: "vllm", stallMs: 5_000, maxBodyBytes: 1 << 20, metrics: new ContinuationMetrics("vllm") });
        expect(await relay.listenSocket(join(dir, `relay-${i}.sock`))).toBe(0);
        cleanups.push(() => relay.close());
      }
      expect((await stat(join(dir, "relay-0.sock"))).isSocket()).toBe(true);
      continuation = { relay: `unix@${join(dir, "relay.sock")}`, bind: `unix@${join(dir, "upstream.sock")}`, workers: 2 };
    }
    const hp: HaproxyHandle = await startHaproxy({
      nbthread: 1,
      proxies: [{ name: "l1", bind: `127.0.0.1:${bindPort}`, health: "agent", servers: { kind: "static", local: [staticServer({ name: "s0", port: up.port }, await freePort())], backup: [] }, continuation }],
    });
    cleanups.push(() => hp.stop());
    // The server in its backends (also the relayed one with the SOCKS4 hop) and the relay's rows.
    await waitFor("server and relay UP", async () => (await hp.stats()).filter((r) => r.status.startsWith("UP")).length === 3, { timeoutMs: 10_000, everyMs: 50 });
    const body = JSON.stringify({ model: "m", prompt: "p", max_tokens: 2, stream: true });
    for (let i = 0; i < 10; i++) {
      // Each on a connection of its own (Connection: close, no agent).
      const a = await send(`http://127.0.0.1:${bindPort}/v1/completions`, { body });
      expect(a.status).toBe(200);
      expect(a.body).toContain("[DONE]");
    }
    const row = await statRows(hp);
    if (way === "socks4") {
      // HAProxy's connections to the server, each through the relay: one, reused for the other nine
      // (`http-reuse safe`, HAProxy's default, opened one per client connection: 10).
      const srv = row("l1_relayed", "s0");
      expect([Number(srv.req_tot), Number(srv.connect), Number(srv.reuse)]).toEqual([10, 1, 9]);
      // So the server saw one connection, and the continuation listener none (no second request).
      expect(up.connections()).toBe(1);
      expect(Number(row("l1_continuation", "FRONTEND").conn_tot)).toBe(0);
      expect(Number(row("l1_servers", "s0").req_tot)).toBe(0);
    } else {
      const relays = [row("l1_continuation", "relay-0"), row("l1_continuation", "relay-1")];
      expect(relays.reduce((a, r) => a + Number(r.req_tot), 0)).toBe(10);
      // One connection to each worker, reused.
      expect(relays.reduce((a, r) => a + Number(r.connect), 0)).toBe(2);
      // And each worker's own connection to the listener carried its share.
      expect(Number(row("l1_continuation", "FRONTEND").conn_tot)).toBe(2);
    }
  });
});
