/**
 * Fleet-layer numbers against a real redis-server on this machine:
 * - leader takeover after a crash (no release: the standby waits out the TTL) and after a
 *   graceful stop (release: the standby's next contend wins), at seed settings (20/7/5 s)
 *   and fast settings (3/1/1 s); every scenario runs in its own key prefix, all at once;
 * - registry scale: 5,000 simulated nodes heartbeating once a second (the real Lua script,
 *   one call per node, from two worker processes sharing a connection each), the leader's
 *   controller aggregating them every second, and redis-server's CPU from /proc.
 *
 * `npx tsx lab/bench/fleet.ts [--quick]` prints JSON; `runFleetBench()` is composed into `npm run bench`.
 */
import { spawn } from "node:child_process";
import { cpus, loadavg } from "node:os";
import type { Redis } from "ioredis";
import pino from "pino";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { startRedisServer, type RedisServerHandle } from "../engines/redis-server";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease, type LeaseSettings } from "../../agent/src/fleet/redis/lease";
import { heartbeatArgs, type NodeReport } from "../../agent/src/fleet/redis/registry";
import { heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import type { Decision } from "../../agent/src/types";
import { createLogger } from "../../agent/src/util/log";
import { sleep } from "../../agent/src/util/net";
import { measured, quantile } from "../../agent/src/util/stats";
import { procUsage } from "./proc";

const log = createLogger({ level: process.env.LLMHA_BENCH_LOG ?? "silent", destination: pino.destination({ fd: 2, sync: true }) });

const SEED: LeaseSettings = { ttlMs: 20_000, renewMs: 7_000, contendMs: 5_000, marginMs: 2_000, replicaWaitMs: 500 };
const FAST: LeaseSettings = { ttlMs: 3_000, renewMs: 1_000, contendMs: 1_000, marginMs: 500, replicaWaitMs: 500 };

function pct(xs: number[], p: number): number {
  return quantile(measured(xs), p / 100) ?? NaN;
}
const r1 = (x: number): number => Math.round(x * 10) / 10;

function summary(xs: number[]): { n: number; p50Ms: number; p99Ms: number; maxMs: number } {
  return { n: xs.length, p50Ms: r1(pct(xs, 50)), p99Ms: r1(pct(xs, 99)), maxMs: r1(Math.max(...xs)) };
}

// ---- takeover ---------------------------------------------------------------------------

interface Contender {
  client: RedisClient;
  lease: LeaderLease;
  acquiredAt: number | null;
}

async function contender(url: string, keys: RedisKeys, id: string, s: LeaseSettings): Promise<Contender> {
  const client = createRedisClient(url, { name: id, log });
  const lease = new LeaderLease({ redis: client.redis, keys, holderId: id, settings: s, log });
  const c: Contender = { client, lease, acquiredAt: null };
  lease.on("acquired", () => {
    c.acquiredAt = performance.now();
  });
  await client.whenReady(3000);
  lease.start();
  return c;
}

/** One takeover: a leader, a warm standby, then a crash or a graceful stop at a random moment. */
async function takeover(url: string, s: LeaseSettings, kind: "crash" | "graceful", tag: string): Promise<number> {
  const keys = new RedisKeys(`bench-${tag}-${Math.random().toString(36).slice(2, 8)}`);
  const a = await contender(url, keys, `${tag}-a`, s);
  while (!a.lease.isLeader) await sleep(10);
  const b = await contender(url, keys, `${tag}-b`, s);
  // a random phase of the renew and contend cycles
  await sleep(s.contendMs + Math.random() * Math.max(s.renewMs, s.contendMs));
  const t0 = performance.now();
  if (kind === "crash") {
    a.lease.abandon();
    a.client.redis.disconnect(false);
  } else {
    await a.lease.release();
    await a.client.close();
  }
  const limit = t0 + s.ttlMs + 2 * s.contendMs + 5000;
  while (b.acquiredAt === null && performance.now() < limit) await sleep(5);
  const took = b.acquiredAt === null ? NaN : b.acquiredAt - t0;
  await b.lease.release();
  await b.client.close();
  return took;
}

async function takeoverBench(url: string, reps: number): Promise<Record<string, unknown>> {
  const jobs: { settings: "seed" | "fast"; kind: "crash" | "graceful"; p: Promise<number> }[] = [];
  for (const [name, s] of [["seed", SEED], ["fast", FAST]] as const) {
    for (const kind of ["crash", "graceful"] as const) {
      for (let i = 0; i < reps; i++) jobs.push({ settings: name, kind, p: takeover(url, s, kind, `${name}-${kind}-${i}`) });
    }
  }
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, s] of [["seed", SEED], ["fast", FAST]] as const) {
    out[name] = { ttlMs: s.ttlMs, renewMs: s.renewMs, contendMs: s.contendMs, marginMs: s.marginMs };
    for (const kind of ["crash", "graceful"] as const) {
      const xs = await Promise.all(jobs.filter((j) => j.settings === name && j.kind === kind).map((j) => j.p));
      const ok = xs.filter(Number.isFinite);
      out[name][kind] = { ...summary(ok), failed: xs.length - ok.length, boundMs: kind === "crash" ? s.ttlMs + s.contendMs : s.contendMs };
    }
  }
  return out;
}

// ---- registry scale ---------------------------------------------------------------------

function decision(up: boolean): Decision {
  const now = Date.now();
  return up
    ? { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore: Math.random() }
    : {
        status: "UNHEALTHY", phase: "down", weight: 0, pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 1,
        reasons: [{ source: "probe", code: "PROBE_TIMEOUT", hard: false, effect: "unhealthy" }],
      };
}

/** Worker process: nodes [from, to) heartbeat once a second, spread over the second in 10 ms slices. */
async function worker(url: string, cluster: string, from: number, to: number, durationMs: number): Promise<void> {
  const keys = new RedisKeys(cluster);
  const client = createRedisClient(url, { name: `bench-worker-${from}`, log, commandTimeoutMs: 2000 });
  await client.whenReady(5000);
  const n = to - from;
  const slices = 100;
  const per = Math.ceil(n / slices);
  const lat: number[] = [];
  let errors = 0;
  const up = new Array<boolean>(n).fill(true);
  const t0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (let tick = 0; performance.now() - t0 < durationMs; tick++) {
    const slot = tick % slices;
    const due = t0 + tick * 10;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    for (let i = slot * per; i < Math.min(n, (slot + 1) * per); i++) {
      if (Math.random() < 0.002) up[i] = !up[i]; // some churn: status changes write events
      const id = `sim-${from + i}`;
      const report: NodeReport = { nodeId: id, az: `az-${(from + i) % 3}`, decision: decision(up[i]), gpus: 8, gpusExpected: 8, model: "m" };
      const { k, a } = heartbeatArgs(keys, report, 3000, 10_000);
      const s = performance.now();
      inflight.push(
        heartbeatScript(client.redis, k, a).then(
          () => void lat.push(performance.now() - s),
          () => void (errors += 1),
        ),
      );
    }
    if (inflight.length > 5000) await Promise.all(inflight.splice(0));
  }
  await Promise.all(inflight);
  await client.close();
  const line = JSON.stringify({ lat: lat.map((x) => Math.round(x * 100) / 100), errors, elapsedMs: performance.now() - t0 }) + "\n";
  // a pipe is written asynchronously: exit only once the result is out
  await new Promise<void>((resolve) => process.stdout.write(line, () => resolve()));
}

/** FCALL calls (llm-ha's functions) and their total server-side µs (`INFO commandstats`). */
async function evalStats(redis: Redis): Promise<{ calls: number; usec: number }> {
  const info = await redis.info("commandstats");
  const m = /cmdstat_fcall:calls=(\d+),usec=(\d+)/.exec(info);
  return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: 0 };
}

function runWorker(url: string, cluster: string, from: number, to: number, durationMs: number): Promise<{ lat: number[]; errors: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", __filename, "--worker", url, cluster, String(from), String(to), String(durationMs)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
    child.on("exit", (code) => {
      try {
        resolve(JSON.parse(out.trim().split("\n").pop() ?? "") as { lat: number[]; errors: number });
      } catch {
        reject(new Error(`bench worker exited ${code} without a result`));
      }
    });
  });
}

async function registryBench(srv: RedisServerHandle, nodes: number, durationMs: number): Promise<Record<string, unknown>> {
  const cluster = `bench-scale-${Math.random().toString(36).slice(2, 8)}`;
  const keys = new RedisKeys(cluster);
  const client = createRedisClient(srv.url, { name: "bench-leader", log, commandTimeoutMs: 5000 });
  await client.whenReady(5000);
  const lease = new LeaderLease({ redis: client.redis, keys, holderId: "bench-leader", settings: FAST, log });
  const writer = new FencedWriter(client.redis, keys, lease);
  const controller = new Controller({ redis: client.redis, keys, lease, writer, log, settings: { intervalMs: 1000 }, heartbeatTtlMs: 3000 });
  lease.start();
  while (!lease.isLeader) await sleep(10);

  const half = Math.floor(nodes / 2);
  const warm = 1500; // let every node register once before measuring
  const workers = [runWorker(srv.url, cluster, 0, half, durationMs + warm), runWorker(srv.url, cluster, half, nodes, durationMs + warm)];
  await sleep(warm);
  const cpu0 = procUsage(srv.pid).cpuS;
  const ev0 = await evalStats(client.redis);
  const load0 = loadavg()[0];
  const w0 = performance.now();
  const agg: number[] = [];
  const tickMs: number[] = [];
  let members = 0;
  while (performance.now() - w0 < durationMs - 500) {
    const t = performance.now();
    const e = await controller.tick();
    tickMs.push(performance.now() - t);
    if (controller.lastAggregationTimeMs !== null) agg.push(controller.lastAggregationTimeMs);
    if (e) members = e.azs.reduce((s, a) => s + a.nodes, 0);
    await sleep(Math.max(0, 1000 - (performance.now() - t)));
  }
  const cpuSeconds = procUsage(srv.pid).cpuS - cpu0;
  const ev1 = await evalStats(client.redis);
  const wallSeconds = (performance.now() - w0) / 1000;
  const results = await Promise.all(workers);
  const lat = results.flatMap((r) => r.lat);
  await lease.release();
  await client.close();
  const hb = summary(lat);
  const ag = summary(agg);
  return {
    nodes,
    nodesSeenByController: members,
    heartbeatPeriodMs: 1000,
    workers: 2,
    durationS: r1(durationMs / 1000),
    heartbeat: {
      ...hb,
      errors: results.reduce((s, r) => s + r.errors, 0),
      perSecond: Math.round(lat.length / ((durationMs + warm) / 1000)),
      note: "client-observed: includes the worker's own event-loop delay on a shared CPU",
    },
    redisUsecPerScriptCall: ev1.calls > ev0.calls ? r1((ev1.usec - ev0.usec) / (ev1.calls - ev0.calls)) : null,
    machine: { cpus: cpus().length, loadAvg1mStart: r1(load0), loadAvg1mEnd: r1(loadavg()[0]) },
    aggregation: { ...ag, note: "read every member (paged read-nodes-1.lua) + evaluate" },
    controllerPeriodMs: { p50: r1(pct(tickMs, 50)), max: r1(Math.max(...tickMs)), note: "sweep + aggregation + fenced publications" },
    redisCpuPercent: r1((cpuSeconds / wallSeconds) * 100),
    targets: { heartbeatP99Ms: 5, aggregationMs: 100 },
    meetsTargets: { heartbeatP99: hb.p99Ms <= 5, aggregation: ag.maxMs <= 100 },
  };
}

export async function runFleetBench(opts: { quick?: boolean } = {}): Promise<Record<string, unknown>> {
  const srv = await startRedisServer();
  try {
    const started = Date.now();
    // the takeover runs wait out TTLs (mostly idle): run them beside the scale test, which needs the CPU more
    const takeoverP = takeoverBench(srv.url, opts.quick ? 2 : 8);
    const registry = await registryBench(srv, 5000, opts.quick ? 6000 : 20_000);
    const takeoverResult = await takeoverP;
    return {
      redis: "redis-server 7 on 127.0.0.1, no persistence",
      takeover: takeoverResult,
      registry,
      quick: Boolean(opts.quick),
      elapsedS: r1((Date.now() - started) / 1000),
      note: "takeover = crash/stop of the holder → standby's acquisition; crash waits out the TTL (≤ TTL + contend), graceful ≤ one contend period",
    };
  } finally {
    await srv.stop();
  }
}

if (require.main === module) {
  if (process.argv[2] === "--worker") {
    const [url, cluster, from, to, dur] = process.argv.slice(3);
    worker(url, cluster, Number(from), Number(to), Number(dur)).then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`bench worker: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  } else {
    runFleetBench({ quick: process.argv.includes("--quick") }).then(
      (r) => {
        process.stdout.write(JSON.stringify(r, null, 2) + "\n");
        process.exit(0);
      },
      (err: unknown) => {
        process.stderr.write(`fleet bench failed: ${(err as Error).stack ?? String(err)}\n`);
        process.exit(1);
      },
    );
  }
}

