/**
 * `llm-ha continue` with several relay processes (`LLMHA_CONTINUE_WORKERS`), as the CLI runs it:
 * each worker relays on a Unix socket of its own (relay-0.sock, relay-1.sock: what HAProxy's
 * generator lists), the primary's metrics are theirs summed, a worker that dies cuts its own
 * streams only and is replaced, SIGTERM stops them all, and a worker that cannot listen stops
 * start-up. Real processes, a stub server as the upstream (the relay's logic is the same as
 * without workers: continuation.test.ts); HAProxy over the workers: the bench and haproxy -c.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContinueConfigError, loadContinueConfig, workerPool } from "../../agent/src/edge/continuation/config";
import { relayWorkerAddress, relayWorkerSocket } from "../../contracts/continuation";
import { renderContinuation } from "../../contracts/haproxy-sidecars";
import { freePort, waitFor } from "../../agent/src/util/net";
import { stopChild } from "../../lab/engines/child";
import { testTempDir } from "../support/temp-dir";
import { countingServer } from "../l1/fixtures";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const EVENT = (text: string, end: boolean): string => `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"${text}","finish_reason":${end ? '"length"' : "null"}}]}\n\n`;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The upstream: each completion's first chunk at once; the rest when `release()` is called, or at once while not holding. */
async function upstream(): Promise<{ port: number; hold(): void; release(): void }> {
  let holding = false;
  const held: Array<() => void> = [];
  const s = await countingServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(EVENT(" a", false));
      const finish = (): void => void res.end(EVENT(" b", true) + "data: [DONE]\n\n");
      if (holding) held.push(finish);
      else finish();
    });
  });
  cleanups.push(async () => {
    for (const f of held.splice(0)) f();
    await s.close();
  });
  return {
    port: s.port,
    hold: () => (holding = true),
    release: () => {
      holding = false;
      for (const f of held.splice(0)) f();
    },
  };
}

interface Relay {
  child: ChildProcess;
  /** Worker i's socket. */
  socket: (i: number) => string;
  metrics: string;
  log: () => string;
  workerPids: () => number[];
}

/** `llm-ha continue` with `workers` processes on a Unix socket in a folder of the test's own. */
async function startRelay(workers: number, upstreamPort: number, socketDir?: string, metricsPortIn?: number): Promise<Relay> {
  const dir = testTempDir("llmha-ct-workers-");
  const socket = join(socketDir ?? dir, "relay.sock");
  const metricsPort = metricsPortIn ?? (await freePort());
  const env: NodeJS.ProcessEnv = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_"))),
    LLMHA_CONTINUE_SOCKET: socket,
    LLMHA_CONTINUE_UPSTREAM: `127.0.0.1:${upstreamPort}`,
    LLMHA_CONTINUE_METRICS_ADDR: `127.0.0.1:${metricsPort}`,
    LLMHA_CONTINUE_WORKERS: String(workers),
  };
  const child = spawn(process.execPath, ["--import", "tsx", CLI, "continue"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  cleanups.push(() => stopChild(child, { graceMs: 15_000 }));
  const workerPids = (): number[] =>
    readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  return { child, socket: (i) => relayWorkerSocket(socket, i, workers), metrics: `http://127.0.0.1:${metricsPort}`, log: () => out, workerPids };
}

/** One streamed completion on a connection of its own; resolves with its body, or "cut" when the connection died under it. */
function completion(socket: string): Promise<string> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model: "m", prompt: "p", max_tokens: 2, stream: true });
    const req = request({ socketPath: socket, method: "POST", path: "/v1/completions", agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res: IncomingMessage) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve(text));
      res.on("error", () => resolve("cut"));
      res.on("aborted", () => resolve("cut"));
    });
    req.on("error", () => resolve("cut"));
    req.end(body);
  });
}

const healthz = async (r: Relay): Promise<number> => (await fetch(`${r.metrics}/healthz`, { signal: AbortSignal.timeout(2000) }).catch(() => null))?.status ?? 0;
const metric = async (r: Relay, name: string): Promise<number> => {
  const text = await (await fetch(`${r.metrics}/metrics`)).text();
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce((a, m) => a + Number(m[1]), 0);
};

describe("llm-ha continue with several workers", () => {
  it("each worker relays on its own socket; the primary's metrics are theirs summed", async () => {
    const up = await upstream();
    const r = await startRelay(2, up.port);
    await waitFor("both workers listening", async () => (await healthz(r)) === 200, { timeoutMs: 60_000, everyMs: 100 });
    expect(r.workerPids()).toHaveLength(2);
    for (const i of [0, 1]) {
      expect(r.socket(i)).toMatch(new RegExp(`/relay-${i}\\.sock$`));
      // HAProxy runs as another user: each socket is open to all, as with one process.
      expect(statSync(r.socket(i)).mode & 0o777).toBe(0o777);
    }
    const answers = await Promise.all(Array.from({ length: 12 }, (_, n) => completion(r.socket(n % 2))));
    for (const a of answers) expect(a).toBe(EVENT(" a", false) + EVENT(" b", true) + "data: [DONE]\n\n");
    expect(await metric(r, "llmha_continue_requests_total")).toBe(12);
    expect(await metric(r, "llmha_continue_open_streams")).toBe(0);
    // Each worker logs that it listens, with its own share of the pool (992 / 2).
    expect(r.log().match(/"upstreamMaxSockets":496/g)).toHaveLength(2);
  }, 90_000);

  it("a worker that dies cuts its own streams only, and is replaced", async () => {
    const up = await upstream();
    const r = await startRelay(2, up.port);
    await waitFor("both workers listening", async () => (await healthz(r)) === 200, { timeoutMs: 60_000, everyMs: 100 });
    up.hold();
    const on0 = Array.from({ length: 4 }, () => completion(r.socket(0)));
    const on1 = Array.from({ length: 4 }, () => completion(r.socket(1)));
    await waitFor("8 streams open", async () => (await metric(r, "llmha_continue_open_streams")) === 8, { timeoutMs: 20_000, everyMs: 50 });
    const pid0 = Number(/"worker":0,"workerPid":(\d+)/.exec(r.log())?.[1]);
    const pid1 = Number(/"worker":1,"workerPid":(\d+)/.exec(r.log())?.[1]);
    expect(r.workerPids().sort()).toEqual([pid0, pid1].sort());
    process.kill(pid0, "SIGKILL");
    await waitFor("the primary sees a worker missing", async () => (await healthz(r)) === 503, { timeoutMs: 10_000, everyMs: 20 });
    expect(await metric(r, "llmha_continue_open_streams")).toBe(4);
    up.release();
    expect(await Promise.all(on0)).toEqual(["cut", "cut", "cut", "cut"]);
    for (const a of await Promise.all(on1)) expect(a.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(r.log()).toMatch(/worker 0 exited \(signal SIGKILL\); its open streams were cut; replacing it/);
    await waitFor("a new worker 0 in its place", async () => (await healthz(r)) === 200, { timeoutMs: 60_000, everyMs: 100 });
    const pids = r.workerPids();
    expect(pids).toHaveLength(2);
    expect(pids).toContain(pid1);
    expect(pids).not.toContain(pid0);
    for (const a of await Promise.all([0, 0, 1, 1].map((i) => completion(r.socket(i))))) expect(a.endsWith("data: [DONE]\n\n")).toBe(true);
  }, 120_000);

  it("SIGTERM to the primary stops every worker and exits 0", async () => {
    const up = await upstream();
    const r = await startRelay(3, up.port);
    await waitFor("three workers listening", async () => (await healthz(r)) === 200, { timeoutMs: 60_000, everyMs: 100 });
    const pids = r.workerPids();
    expect(pids).toHaveLength(3);
    const exited = new Promise<number | null>((resolve) => r.child.once("exit", (code) => resolve(code)));
    r.child.kill("SIGTERM");
    expect(await exited).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 90_000);

  it("a worker that cannot listen stops start-up: exit 1, the worker and the cause named", async () => {
    const up = await upstream();
    const dir = testTempDir("llmha-ct-workers-");
    const r = await startRelay(2, up.port, join(dir, "no-such-folder"));
    const code = await new Promise<number | null>((resolve) => r.child.once("exit", (c) => resolve(c)));
    expect(code).toBe(1);
    expect(r.log()).toMatch(/relay worker \d exited with code \d+ before it listened/);
    expect(r.log()).toContain("LLMHA_CONTINUE_SOCKET: cannot listen on");
  }, 90_000);
});

describe("llm-ha continue whose metrics address is taken", () => {
  it.each([1, 2])("exits 1 naming the setting, with %i worker(s), before any worker starts", async (workers) => {
    const up = await upstream();
    const taken = await countingServer((_req, res) => void res.end());
    cleanups.push(taken.close);
    const r = await startRelay(workers, up.port, undefined, taken.port);
    const code = await new Promise<number | null>((resolve) => r.child.once("exit", (c) => resolve(c)));
    expect(code).toBe(1);
    expect(r.log()).toContain(`llm-ha continue: LLMHA_CONTINUE_METRICS_ADDR: cannot listen on 127.0.0.1:${taken.port} (EADDRINUSE)`);
    expect(r.log()).not.toMatch(/\n\s+at /);
    expect(r.log()).not.toContain("worker 0");
  }, 60_000);
});

describe("LLMHA_CONTINUE_WORKERS", () => {
  it("names worker i's listener the same way in the relay and in HAProxy's config, which balances over them", () => {
    expect(relayWorkerSocket("/run/c/relay.sock", 0, 1)).toBe("/run/c/relay.sock");
    expect(relayWorkerSocket("/run/c/relay.sock", 1, 2)).toBe("/run/c/relay-1.sock");
    expect(relayWorkerSocket("/run/c.d/relay", 3, 4)).toBe("/run/c.d/relay-3");
    expect(relayWorkerAddress("unix@/run/c/relay.sock", 1, 2)).toBe("unix@/run/c/relay-1.sock");
    expect(relayWorkerAddress("127.0.0.1:9420", 2, 3)).toBe("127.0.0.1:9422");
    const t = { timeoutClientMs: 1000, timeoutServerMs: 1000 };
    const one = renderContinuation("p", { relay: "unix@/run/c/relay.sock", bind: "unix@/run/c/up.sock" }, t, 10);
    expect(one).toContain("  server relay unix@/run/c/relay.sock check inter 1s fall 2 rise 1");
    expect(one.join("\n")).not.toContain("leastconn");
    const two = renderContinuation("p", { relay: "unix@/run/c/relay.sock", bind: "unix@/run/c/up.sock", workers: 2 }, t, 10);
    expect(two.filter((l) => l.startsWith("  server ") || l.startsWith("  balance "))).toEqual([
      "  balance leastconn",
      "  server relay-0 unix@/run/c/relay-0.sock check inter 1s fall 2 rise 1",
      "  server relay-1 unix@/run/c/relay-1.sock check inter 1s fall 2 rise 1",
    ]);
    expect(() => renderContinuation("p", { relay: "unix@/run/c/relay.sock", bind: "unix@/run/c/up.sock", workers: 17 }, t, 10)).toThrow(/workers 17 of p must be an integer from 1 to 16/);
  });

  it("takes 1 to 16, and each worker's pool is its share of the listener's", () => {
    expect(loadContinueConfig([], {}).workers).toBe(1);
    expect(loadContinueConfig(["--workers", "4"], {}).workers).toBe(4);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_WORKERS: "0" })).toThrow(new ContinueConfigError('LLMHA_CONTINUE_WORKERS="0" must be an integer ≥ 1'));
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_WORKERS: "17" })).toThrow(/LLMHA_CONTINUE_WORKERS=17 must be at most 16/);
    expect(() => loadContinueConfig([], { LLMHA_CONTINUE_WORKERS: "two" })).toThrow(/LLMHA_CONTINUE_WORKERS="two" must be an integer/);
    expect(workerPool({ maxSockets: 992, maxFreeSockets: 992 }, 2)).toEqual({ maxSockets: 496, maxFreeSockets: 496 });
    expect(workerPool({ maxSockets: 5, maxFreeSockets: 0 }, 3)).toEqual({ maxSockets: 2, maxFreeSockets: 0 });
    expect(workerPool({ maxSockets: 1, maxFreeSockets: 1 }, 4)).toEqual({ maxSockets: 1, maxFreeSockets: 1 });
  });
});
