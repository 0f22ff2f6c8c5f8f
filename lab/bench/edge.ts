/**
 * What the public edge costs per request (issue 25): one HAProxy with two identical proxies
 * in front of the same upstream — `plain` without the edge, `edge` with the allow-list, a
 * key lookup (SHA-256 + map), the per-key stick table and the header rewrites — driven by
 * the same keep-alive client in alternating rounds, so drift of a shared machine falls on
 * both. The upstream is a third HAProxy frontend answering 200 itself (no Node server's
 * jitter in the figure).
 */
import { Agent, request } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHaproxy, startHaproxyWith } from "../engines/haproxy";
import { freePort, waitFor } from "../../agent/src/util/net";
import { quantile } from "../../agent/src/util/stats";
import { edgeMapLine } from "../../contracts/haproxy-edge";
import { hashKey, newKey } from "../../agent/src/edge/keys/keys";

export interface EdgeBenchOptions {
  rounds: number;
  secondsPerRound: number;
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

async function drive(url: string, headers: Record<string, string>, seconds: number, concurrency: number): Promise<{ ms: number[]; errors: number; elapsedS: number }> {
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
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  agent.destroy();
  return { ms, errors, elapsedS: (performance.now() - t0) / 1000 };
}

function side(samples: { ms: number[]; errors: number; elapsedS: number }[]): Side {
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
    proxies: [
      { name: "plain", bind: `127.0.0.1:${plainPort}`, health: "agent", servers, tuning: { serverMaxconn: 1024 } },
      { name: "edge", bind: `127.0.0.1:${edgePort}`, health: "agent", servers, tuning: { serverMaxconn: 1024 }, edge: { keysMap: mapPath } },
    ],
  });
  try {
    await waitFor("upstream UP in both proxies", async () => (await hp.stats()).filter((r) => r.server === "up" && r.status.startsWith("UP")).length === 2, { timeoutMs: 10_000, everyMs: 50 });
    const plain: Awaited<ReturnType<typeof drive>>[] = [];
    const edge: Awaited<ReturnType<typeof drive>>[] = [];
    for (const port of [plainPort, edgePort]) await drive(`http://127.0.0.1:${port}/v1/completions`, { authorization: `Bearer ${key}` }, 1, o.concurrency); // warm-up
    for (let i = 0; i < o.rounds; i++) {
      plain.push(await drive(`http://127.0.0.1:${plainPort}/v1/completions`, { authorization: `Bearer ${key}` }, o.secondsPerRound, o.concurrency));
      edge.push(await drive(`http://127.0.0.1:${edgePort}/v1/completions`, { authorization: `Bearer ${key}` }, o.secondsPerRound, o.concurrency));
      o.log(`edge round ${i + 1}/${o.rounds}`);
    }
    const p = side(plain);
    const e = side(edge);
    const d = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : Math.round((b - a) * 1000) / 1000);
    return {
      what: "one HAProxy 2.6, the same upstream (HAProxy answering 200), a keep-alive client; plain = no edge, edge = allow-list + key hash lookup + per-key limits + header rewrites; alternating rounds",
      concurrency: o.concurrency,
      rounds: o.rounds,
      secondsPerRound: o.secondsPerRound,
      plain: p,
      edge: e,
      addedP50Ms: d(p.p50Ms, e.p50Ms),
      addedP99Ms: d(p.p99Ms, e.p99Ms),
      throughputRatio: p.rps ? Math.round((e.rps / p.rps) * 1000) / 1000 : null,
      goals: { addedP50Ms: 0.2, throughputRatio: 0.9 },
    };
  } finally {
    await hp.stop();
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
