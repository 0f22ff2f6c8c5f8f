/**
 * What the public edge costs per request: one HAProxy with two identical proxies
 * in front of the same upstream — `plain` without the edge, `edge` with the allow-list, a
 * key lookup (SHA-256 + map), the per-key stick table and the header rewrites — driven by
 * the same keep-alive client in alternating rounds, so drift of a shared machine falls on
 * both. The upstream is a HAProxy of its own answering 200 itself (no Node server's jitter in
 * the figure, and none of its CPU in the proxy's).
 *
 * Two measures, because on a small shared machine one client cannot tell them apart:
 * - latency added per request: one request in flight (nothing queued behind another), p50/p99;
 * - throughput: the proxy's requests per second of its own CPU (utime + stime of the HAProxy
 *   process over each round), which is what bounds an L1 pod with its own cores. The closed-
 *   loop rate of the shared client is reported beside it; there the client, both HAProxy
 *   processes and the upstream share two cores, so it measures the machine, not the rules.
 */
import { Agent, request } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHaproxy, startHaproxyWith } from "../engines/haproxy";
import { freePort, waitFor } from "../../agent/src/util/net";
import { procUsage } from "./proc";
import { quantile } from "../../agent/src/util/stats";
import { edgeMapLine } from "../../contracts/haproxy-edge";
import { hashKey, newKey } from "../../agent/src/edge/keys/keys";

export interface EdgeBenchOptions {
  rounds: number;
  secondsPerRound: number;
  /** Requests in flight in the throughput rounds (the latency rounds keep one). */
  concurrency: number;
  log(line: string): void;
}

interface Side {
  n: number;
  rps: number;
  p50Ms: number | null;
  p99Ms: number | null;
  errors: number;
}

interface Round {
  ms: number[];
  errors: number;
  elapsedS: number;
  /** CPU seconds the proxy's HAProxy used over the round. */
  proxyCpuS: number;
}

async function drive(url: string, headers: Record<string, string>, seconds: number, concurrency: number, proxyPid: number): Promise<Round> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const ms: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const body = '{"model":"m","prompt":"x","max_tokens":1}';
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = request(url, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": String(body.length), ...headers } }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode === 200) ms.push(performance.now() - t0);
          else errors++;
          resolve();
        });
      });
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end(body);
    });
  const t0 = performance.now();
  const cpu0 = procUsage(proxyPid).cpuS;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  const proxyCpuS = procUsage(proxyPid).cpuS - cpu0;
  agent.destroy();
  return { ms, errors, elapsedS: (performance.now() - t0) / 1000, proxyCpuS };
}

/** Requests per CPU second of the proxy over rounds. */
function perCpuS(samples: Round[]): number | null {
  const cpu = samples.reduce((a, s) => a + s.proxyCpuS, 0);
  return cpu > 0 ? Math.round(samples.reduce((a, s) => a + s.ms.length, 0) / cpu) : null;
}

function side(samples: Round[]): Side {
  const ms = samples.flatMap((s) => s.ms).sort((a, b) => a - b);
  const secs = samples.reduce((a, s) => a + s.elapsedS, 0);
  const r = (v: number | null): number | null => (v === null ? null : Math.round(v * 1000) / 1000);
  return { n: ms.length, rps: Math.round(ms.length / secs), p50Ms: r(quantile(ms, 0.5)), p99Ms: r(quantile(ms, 0.99)), errors: samples.reduce((a, s) => a + s.errors, 0) };
}

export async function runEdgeBench(o: EdgeBenchOptions): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "llmha-bench-edge-"));
  const upstreamPort = await freePort();
  const upstream = await startHaproxyWith(
    (sock) =>
      [
        "global",
        "  maxconn 4096",
        "  nbthread 1",
        `  stats socket ${sock} mode 600 level admin`,
        "defaults",
        "  mode http",
        "  timeout client 30s",
        "  timeout server 30s",
        "  timeout connect 1s",
        "frontend upstream",
        `  bind 127.0.0.1:${upstreamPort}`,
        `  http-request return status 200 content-type application/json string '{"choices":[{"text":"ok"}]}'`,
      ].join("\n") + "\n",
  );
  const { id, key } = newKey();
  const mapPath = join(dir, "keys.map");
  writeFileSync(mapPath, edgeMapLine(hashKey(key), { id, tenant: "bench", rps: 1_000_000, concurrency: 1_000_000 }) + "\n");
  const [plainPort, edgePort, agentPort] = [await freePort(), await freePort(), await freePort()];
  const servers = { kind: "static" as const, local: [{ name: "up", address: "127.0.0.1", port: upstreamPort, agentPort, httpPort: agentPort }], backup: [] };
  const hp = await startHaproxy({
    maxconn: 4096,
    // One thread each, as many as the cores a proxy has to itself here: two threads of each
    // HAProxy beside the client on two cores spin on the stick table's lock while its holder
    // is preempted (measured: the edge's requests per CPU second fell to about half).
    nbthread: 1,
    proxies: [
      { name: "plain", bind: `127.0.0.1:${plainPort}`, health: "agent", servers, tuning: { serverMaxconn: 1024 } },
      { name: "edge", bind: `127.0.0.1:${edgePort}`, health: "agent", servers, tuning: { serverMaxconn: 1024 }, edge: { keysMap: mapPath } },
    ],
  });
  try {
    await waitFor("upstream UP in both proxies", async () => (await hp.stats()).filter((r) => r.server === "up" && r.status.startsWith("UP")).length === 2, { timeoutMs: 10_000, everyMs: 50 });
    const urls = { plain: `http://127.0.0.1:${plainPort}/v1/completions`, edge: `http://127.0.0.1:${edgePort}/v1/completions` };
    const headers = { authorization: `Bearer ${key}` };
    const lat = { plain: [] as Round[], edge: [] as Round[] };
    const thr = { plain: [] as Round[], edge: [] as Round[] };
    for (const url of Object.values(urls)) await drive(url, headers, 1, o.concurrency, hp.pid); // warm-up
    for (let i = 0; i < o.rounds; i++) {
      // the order alternates too, so a drift within a pair falls on both sides
      const order = i % 2 === 0 ? (["plain", "edge"] as const) : (["edge", "plain"] as const);
      for (const k of order) lat[k].push(await drive(urls[k], headers, o.secondsPerRound / 2, 1, hp.pid));
      for (const k of order) thr[k].push(await drive(urls[k], headers, o.secondsPerRound / 2, o.concurrency, hp.pid));
      o.log(`edge round ${i + 1}/${o.rounds}`);
    }
    const d = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : Math.round((b - a) * 1000) / 1000);
    const ratio = (a: number | null, b: number | null): number | null => (a && b !== null ? Math.round((b / a) * 1000) / 1000 : null);
    const latency = { plain: { ...side(lat.plain), perProxyCpuS: perCpuS(lat.plain) }, edge: { ...side(lat.edge), perProxyCpuS: perCpuS(lat.edge) } };
    const throughput = {
      plain: { ...side(thr.plain), perProxyCpuS: perCpuS(thr.plain) },
      edge: { ...side(thr.edge), perProxyCpuS: perCpuS(thr.edge) },
    };
    return {
      what: "one HAProxy 2.6 with two proxies over the same upstream (a HAProxy of its own answering 200), a keep-alive client; plain = no edge, edge = allow-list + key hash lookup + per-key limits + header rewrites; alternating rounds",
      rounds: o.rounds,
      secondsPerRound: o.secondsPerRound,
      latency: { inFlight: 1, ...latency, addedP50Ms: d(latency.plain.p50Ms, latency.edge.p50Ms), addedP99Ms: d(latency.plain.p99Ms, latency.edge.p99Ms) },
      throughput: {
        inFlight: o.concurrency,
        ...throughput,
        perProxyCpuRatio: ratio(throughput.plain.perProxyCpuS, throughput.edge.perProxyCpuS),
        sharedMachineRatio: ratio(throughput.plain.rps, throughput.edge.rps),
      },
      addedP50Ms: d(latency.plain.p50Ms, latency.edge.p50Ms),
      throughputRatio: ratio(throughput.plain.perProxyCpuS, throughput.edge.perProxyCpuS),
      goals: { addedP50Ms: 0.2, throughputRatio: 0.9 },
    };
  } finally {
    await hp.stop();
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
