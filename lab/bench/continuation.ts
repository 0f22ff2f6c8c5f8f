/**
 * What `llm-ha continue` costs an answer nobody cut: the same streams through one HAProxy, once
 * straight to the server and once through the relay (its own process, the built CLI as the image
 * runs it), in alternating rounds of the same run. Added latency per request (to the first chunk)
 * and per chunk (server send → client arrival), the relay's CPU per 1,000 tokens/s relayed, and
 * its memory per open stream. The server is a stub that streams on a clock, so its own timing
 * does not blur the figures.
 */
import { spawn } from "node:child_process";
import { createServer, request, type Server } from "node:http";
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startHaproxy } from "../engines/haproxy";
import { stopChild } from "../engines/child";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { treeUsage } from "./proc";
import { builtCli } from "./built";

export interface ContinuationBenchOptions {
  /** Streams open at once. */
  streams: number;
  /** Chunks (tokens) per stream, `chunkMs` apart. */
  chunks: number;
  chunkMs: number;
  /** Rounds per mode, alternating. */
  rounds: number;
  /**
   * Arrivals. `cold` (default): the streams arrive over half a stream's length onto idle
   * proxies, every one on a new connection. `steady`: they keep arriving at `streams` per
   * stream length for two lengths, so from the first length on `streams` are open at once and a
   * new one can take the idle connection a finished one left, as in a pod under constant
   * load; only those arriving from then on are measured.
   */
  arrivals?: "cold" | "steady";
  /** HAProxy's threads. Default none: one per CPU, as `nbthread` unset does. */
  nbthread?: number;
  /**
   * The continuation listener's leg (and several workers' own): `unix` (default, as the L1 pod
   * runs them: Unix sockets in a volume both containers mount) or `tcp` (loopback TCP). One relay
   * is HAProxy's SOCKS4 hop, on loopback TCP either way.
   */
  sockets?: "unix" | "tcp";
  /**
   * Bytes of each request's prompt. Default 1: the relay's cost per token. Real prompts run to
   * KiBs and the relay holds each open stream's request: set this to see what that costs it.
   */
  promptBytes?: number;
  /**
   * Relay processes (`LLMHA_CONTINUE_WORKERS`), each on its own socket behind HAProxy's
   * `leastconn`. Default 1, as the L1 pod runs it unless `llm-ha:haproxy.relayWorkers` says more.
   * CPU and memory are the whole relay's: the primary and its workers.
   */
  workers?: number;
  log: (l: string) => void;
}

const pct = (xs: number[], p: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

/** Per path, ms to each stream's first chunk (`ttfb`) and each chunk's lag from the server's send. */
type Paths = Record<"plain" | "relayed", { ttfb: number[]; lag: number[] }>;
const paths = (): Paths => ({ plain: { ttfb: [], lag: [] }, relayed: { ttfb: [], lag: [] } });
/** The rounds' samples pooled, per path. */
const pooled = (rounds: readonly Paths[]): Paths => {
  const all = paths();
  for (const r of rounds) for (const path of ["plain", "relayed"] as const) for (const what of ["ttfb", "lag"] as const) all[path][what].push(...r[path][what]);
  return all;
};

/** p50 and p99 of one measure on each path, and what the relay added. */
function compare(r: Paths, what: "ttfb" | "lag"): Record<string, number> {
  const q = (path: keyof Paths, p: number): number => pct(r[path][what], p);
  const at = (p: number) => ({ [`plainP${p}`]: r3(q("plain", p)), [`relayedP${p}`]: r3(q("relayed", p)), [`addedP${p}`]: r3(q("relayed", p) - q("plain", p)) });
  return { ...at(50), ...at(99) };
}

/** One figure against its goal: what the relay added at `p`, beside the direct path's own figure (ms). */
export interface ContinuationGoal {
  figure: string;
  goalAddedMs: number;
  addedMs: number;
  directMs: number;
  relayedMs: number;
  met: boolean;
  /**
   * Under load: the same figure in each round alone (its plain and relayed halves), in round
   * order. The verdict is the pooled figure's; these show how far it moves from round to round
   * on the same machine, which a single figure near its goal cannot.
   */
  roundsAddedMs?: number[];
}

function goal(figure: string, c: Record<string, number>, p: 50 | 99, goalAddedMs: number, rounds?: Record<string, number>[]): ContinuationGoal {
  const addedMs = c[`addedP${p}`];
  return { figure, goalAddedMs, addedMs, directMs: c[`plainP${p}`], relayedMs: c[`relayedP${p}`], met: addedMs <= goalAddedMs, ...(rounds ? { roundsAddedMs: rounds.map((r) => r[`addedP${p}`]) } : {}) };
}

const signed = (x: number): string => `${x >= 0 ? "+" : ""}${x}`;

/** The goals as lines a reader can take in (stderr), one per figure. */
export function goalLines(name: string, goals: ContinuationGoal[]): string[] {
  return goals.map((g) => {
    const rounds = g.roundsAddedMs && g.roundsAddedMs.length > 1 ? `; rounds ${g.roundsAddedMs.map(signed).join(", ")} ms` : "";
    return `${name}: ${g.figure}: ${signed(g.addedMs)} ms added (goal ≤ ${g.goalAddedMs} ms; direct ${g.directMs} ms, relayed ${g.relayedMs} ms${rounds}) met: ${g.met}`;
  });
}

/** A server streaming `chunks` completion chunks, each stamped with its send time. */
async function stubServer(chunks: number, chunkMs: number): Promise<Server> {
  const s = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.method !== "POST") return void res.writeHead(200).end("ok");
      res.writeHead(200, { "content-type": "text/event-stream" });
      // `?chunks=N&ms=M` (the one-in-flight series) overrides the round's stream shape.
      const q = new URL(req.url ?? "/", "http://stub").searchParams;
      const n = Number(q.get("chunks") ?? chunks);
      const gap = Number(q.get("ms") ?? chunkMs);
      let i = 0;
      const tick = (): void => {
        if (res.destroyed) return;
        const last = i === n - 1;
        res.write(`data: {"id":"cmpl-b","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" tok","finish_reason":${last ? '"length"' : "null"}}],"t":${performance.now()}}\n\n`);
        if (last) return void res.end("data: [DONE]\n\n");
        i++;
        setTimeout(tick, gap);
      };
      tick();
    });
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return s;
}

/** A prompt of `bytes` ASCII bytes: words, as a real prompt's text would be. */
export function promptOf(bytes: number): string {
  if (bytes <= 1) return "p";
  const words = "the quick brown fox jumps over a lazy dog and keeps on running ";
  return words.repeat(Math.ceil(bytes / words.length)).slice(0, bytes);
}

/** One stream: ms to the first chunk, and each chunk's ms from the server's send to its arrival. */
function oneStream(port: number, query = "", prompt = promptOf(1)): Promise<{ ttfb: number; lags: number[] }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const body = JSON.stringify({ model: "m", prompt, max_tokens: 64, stream: true });
    const req = request({ host: "127.0.0.1", port, method: "POST", path: `/v1/completions${query}`, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      let ttfb = -1;
      const lags: number[] = [];
      let tail = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        const now = performance.now();
        if (ttfb < 0) ttfb = now - t0;
        tail += d;
        for (let i = tail.indexOf("\n\n"); i >= 0; i = tail.indexOf("\n\n")) {
          const m = /"t":([\d.]+)/.exec(tail.slice(0, i));
          if (m) lags.push(now - Number(m[1]));
          tail = tail.slice(i + 2);
        }
      });
      res.on("end", () => resolve({ ttfb, lags }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * One loopback round trip between two processes (a byte out, its echo back) at one in flight,
 * `gapMs` apart: the price of a hop on this machine, which every process on a path pays.
 */
async function loopbackRoundTrip(samples: number, gapMs: number): Promise<{ p50: number; p99: number }> {
  const code = `const s=require("net").createServer((c)=>{c.setNoDelay(true);c.on("data",(d)=>c.write(d))});s.listen(0,"127.0.0.1",()=>console.log(s.address().port))`;
  const echo = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      echo.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
      echo.once("exit", () => reject(new Error("the echo process exited before listening")));
    });
    const c = connect(port, "127.0.0.1");
    c.setNoDelay(true);
    await new Promise<void>((r) => c.once("connect", () => r()));
    const rtt: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      await new Promise<void>((r) => {
        c.once("data", () => r());
        c.write("x");
      });
      rtt.push(performance.now() - t0);
      await sleep(gapMs);
    }
    c.destroy();
    return { p50: r3(pct(rtt, 50)), p99: r3(pct(rtt, 99)) };
  } finally {
    await stopChild(echo);
  }
}

export async function runContinuationBench(o: ContinuationBenchOptions): Promise<Record<string, unknown>> {
  const workers = o.workers ?? 1;
  const stub = await stubServer(o.chunks, o.chunkMs);
  const stubPort = (stub.address() as AddressInfo).port;
  const [plain, relayed, relayPort, upstream] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const built = builtCli(o.log);
  const args = built ? [built, "continue"] : ["--import", "tsx", join(__dirname, "..", "..", "agent", "src", "cli.ts"), "continue"];
  const servers = { kind: "static" as const, local: [{ name: "stub", address: "127.0.0.1", port: stubPort, agentPort: await freePort(), httpPort: 1 }], backup: [] };
  // Enough connections for the streams on both paths; the stub takes them all.
  const tuning = { serverMaxconn: o.streams * 2, frontendMaxconn: o.streams * 2 + 16 };
  // The relay's pool sized to the listener it sends to, as infra sizes it in the L1 pod (at the
  // default 992, 1,000 streams open at once queued in the relay for a stream to end: +22 ms p50).
  const unix = (o.sockets ?? "unix") === "unix" ? await mkdtemp(join(tmpdir(), "llmha-ct-")) : null;
  // One relay is HAProxy's SOCKS4 hop on loopback TCP; several take a Unix socket each.
  const addr = unix
    ? { relay: workers > 1 ? `unix@${unix}/relay.sock` : `127.0.0.1:${relayPort}`, bind: `unix@${unix}/upstream.sock` }
    : { relay: `127.0.0.1:${relayPort}`, bind: `127.0.0.1:${upstream}` };
  const env = {
    ...process.env,
    LLMHA_CONTINUE_PORT: String(relayPort),
    ...(unix && workers > 1 ? { LLMHA_CONTINUE_SOCKET: `${unix}/relay.sock` } : {}),
    LLMHA_CONTINUE_UPSTREAM: addr.bind,
    LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS: String(tuning.frontendMaxconn),
    LLMHA_CONTINUE_METRICS_ADDR: "off",
    LLMHA_CONTINUE_WORKERS: String(workers),
    LLMHA_LOG_LEVEL: "warn",
  };
  const child = spawn(process.execPath, args, { env, stdio: "ignore" });
  const hp = await startHaproxy({
    maxconn: o.streams * 6 + 200,
    ...(o.nbthread ? { nbthread: o.nbthread } : {}),
    proxies: [
      { name: "plain", bind: `127.0.0.1:${plain}`, health: "agent", tuning, servers },
      { name: "relayed", bind: `127.0.0.1:${relayed}`, health: "agent", tuning, servers, continuation: { ...addr, workers } },
    ],
  });
  // The stub in each servers backend (the relayed one too with one relay), and the relay's own rows.
  const rowsUp = (workers > 1 ? 2 : 3) + workers;
  try {
    await waitFor("relay and stub UP", async () => (await hp.stats()).filter((r) => r.status.startsWith("UP")).length === rowsUp, { timeoutMs: 60_000, everyMs: 100 });
    const idle = treeUsage(child.pid as number);
    const prompt = promptOf(o.promptBytes ?? 1);
    /** Each round's samples; the figures pool them, and each round alone shows the spread. */
    const byRound: Paths[] = [];
    let relayCpuS = 0;
    let relayWallS = 0;
    let relayTokens = 0;
    let openRss = 0;
    for (let round = 0; round < o.rounds; round++) {
      const own = paths();
      byRound.push(own);
      for (const mode of ["plain", "relayed"] as const) {
        const before = treeUsage(child.pid as number);
        const t0 = performance.now();
        const port = mode === "plain" ? plain : relayed;
        // Cold: streams start spread over half a stream's length, as clients arrive: from then on
        // every stream is open at once, at a steady arrival rate (1,000 streams of 10 s: 200 a
        // second). A thousand connections opened in the same millisecond measure the client's own
        // connect burst instead (p99 ~0.5 s on both paths).
        const streamMs = o.chunks * o.chunkMs;
        const steady = o.arrivals === "steady";
        const arrivals = steady ? o.streams * 2 : o.streams;
        const overMs = steady ? 2 * streamMs : streamMs / 2;
        const all = Array.from({ length: arrivals }, (_, i) => {
          const at = (i * overMs) / arrivals;
          return sleep(at).then(async () => ({ ...(await oneStream(port, "", prompt)), at }));
        });
        // With every stream open: the relay's memory with them all.
        const sample = sleep(steady ? 1.5 * streamMs : overMs + streamMs / 4).then(() => (mode === "relayed" ? (openRss = Math.max(openRss, treeUsage(child.pid as number).rss)) : 0));
        const done = await Promise.all(all);
        await sample;
        for (const d of done) {
          if (steady && d.at < streamMs) continue;
          own[mode].ttfb.push(d.ttfb);
          own[mode].lag.push(...d.lags);
        }
        if (mode === "relayed") {
          relayCpuS += treeUsage(child.pid as number).cpuS - before.cpuS;
          relayWallS += (performance.now() - t0) / 1000;
          relayTokens += done.reduce((a, d) => a + d.lags.length, 0);
        }
      }
      o.log(`continuation: round ${round + 1}/${o.rounds} (${o.streams} streams × ${o.chunks} chunks each way)`);
    }
    // One request in flight (no queue anywhere): what the relay's two extra hops and its own work
    // cost a request and a chunk, alternating, short streams of 4 chunks 5 ms apart.
    const one = paths();
    for (let i = 0; i < 200; i++) {
      for (const mode of ["plain", "relayed"] as const) {
        const d = await oneStream(mode === "plain" ? plain : relayed, "?chunks=4&ms=5");
        one[mode].ttfb.push(d.ttfb);
        one[mode].lag.push(...d.lags);
        await sleep(5);
      }
    }
    const hop = await loopbackRoundTrip(400, 5);
    const tokensPerS = relayTokens / relayWallS;
    const res = pooled(byRound);
    const perRequestMs = compare(res, "ttfb");
    const perChunkMs = compare(res, "lag");
    const oneInFlight = { perRequestMs: compare(one, "ttfb"), perChunkMs: compare(one, "lag") };
    const load = `${o.streams} streams (${o.arrivals ?? "cold"})`;
    return {
      // Each figure beside its goal and the direct path's (HAProxy alone) of the same run.
      goals: [
        goal("per request p50, one in flight", oneInFlight.perRequestMs, 50, 1),
        goal(`per request p50, ${load}`, perRequestMs, 50, 1, byRound.map((r) => compare(r, "ttfb"))),
        goal("per chunk p50, one in flight", oneInFlight.perChunkMs, 50, 1),
        goal("per chunk p99, one in flight", oneInFlight.perChunkMs, 99, 5),
        goal(`per chunk p99, ${load}`, perChunkMs, 99, 5, byRound.map((r) => compare(r, "lag"))),
      ],
      streams: o.streams,
      chunksPerStream: o.chunks,
      chunkMs: o.chunkMs,
      rounds: o.rounds,
      arrivals: o.arrivals ?? "cold",
      sockets: o.sockets ?? "unix",
      nbthread: o.nbthread ?? null,
      perRequestMs,
      perChunkMs,
      oneInFlight,
      // A request crosses four more process hops through the relay (HAProxy → relay → HAProxy, each
      // way), a chunk two: this is what one round trip (two hops) costs here.
      loopbackRoundTripMs: hop,
      relayTokensPerS: Math.round(tokensPerS),
      // Cores the relay used per 1,000 tokens/s relayed.
      relayCoresPer1000TokensPerS: r3(relayCpuS / relayWallS / (tokensPerS / 1000)),
      relayWorkers: workers,
      relayIdleRssMiB: r3(idle.rss / 2 ** 20),
      relayBytesPerOpenStream: Math.round((openRss - idle.rss) / o.streams),
    };
  } finally {
    await hp.stop();
    await stopChild(child);
    await new Promise<void>((r) => stub.close(() => r()));
    if (unix) await rm(unix, { recursive: true, force: true });
  }
}
