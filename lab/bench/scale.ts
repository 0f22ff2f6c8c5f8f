/**
 * Fleet scale (`npm run bench -- --only scale`): one leader over N simulated agents, measured at
 * each size on a fresh redis-server with the production ACL roles.
 *
 * Per size: the agents (two processes, lab/bench/scale-agents.ts, as `llmha-agent`) register and
 * heartbeat once a second with the real heartbeat function, split across three AZs; the leader
 * is the agent's own `LeaderLease` + `Controller` in this process (as `llmha-controller`), with
 * an inventory listing the N nodes (the stack's controller runs with `LLMHA_INVENTORY`), at its
 * default period (1 s) and a fast lease (TTL 3 s, renewed every 1 s: many renewals to count);
 * one process serves the agent's real `GET /az/health`, read 10 times a second. After a steady
 * window, faults: every node of one AZ reports UNHEALTHY from its next heartbeat on (a GPU lost
 * on each), then heals; the AZ rotates.
 *
 * Figures: the leader's decision (the registry first below the DOWN threshold → the DOWN state
 * published, fenced), fault → DOWN, redis-server's CPU (/proc, over the whole measured time),
 * its commands per second (`INFO stats`), lease renewals and any missed (a renewal failed or the
 * term lost), the leader's per-period read + evaluation (p99), `/az/health` p99, heartbeat p99.
 * After the window, apart from it: an operator's `llm-ha status` in its own process (as
 * `llmha-reader`), its whole read ten times back to back (p99), the Redis CPU each read costs,
 * the leader's reads in the meantime, and how many lines its text view has by default and with
 * every node listed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { request } from "node:http";
import pino from "pino";
import { Controller } from "../../agent/src/fleet/controller/controller";
import { DEFAULT_CONTROLLER_SETTINGS, type Evaluation } from "../../agent/src/fleet/controller/state";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease, type LeaseSettings } from "../../agent/src/fleet/redis/lease";
import type { Inventory, InventoryNode } from "../../agent/src/fleet/inventory/inventory";
import { createLogger } from "../../agent/src/util/log";
import { sleep } from "../../agent/src/util/net";
import { measured, quantile } from "../../agent/src/util/stats";
import { startRedisServer } from "../engines/redis-server";
import { labRedisAcl } from "../engines/redis-acl";
import { procUsage } from "./proc";
import { azName } from "./scale-agents";
import { downCrossingAt, growthTable, renderGrowthTable, renderScaleSvg, withinTargets, type ScaleRow } from "./scale-table";

const log = createLogger({ level: process.env.LLMHA_BENCH_LOG ?? "silent", destination: pino.destination({ fd: 2, sync: true }) });
const CLUSTER = "scale";
const AZS = 3;
const WORKERS = 2;
/** Back-to-back reads of an operator's `llm-ha status` after the measured window (its own process). */
const STATUS_READS = 10;
/** Fast lease: renewed every second, so a window of tens of seconds holds tens of renewals. */
const LEASE: LeaseSettings = { ttlMs: 3000, renewMs: 1000, contendMs: 1000, marginMs: 500, replicaWaitMs: 500 };

const pct = (xs: number[], p: number): number => quantile(measured(xs), p / 100) ?? NaN;
const r1 = (x: number): number => Math.round(x * 10) / 10;

export interface ScaleOptions {
  sizes: number[];
  /** Steady heartbeating before the faults, seconds. */
  steadyS: number;
  /** AZ faults per size (each AZ's nodes report UNHEALTHY). */
  faults: number;
  /** Then one more: an AZ falls silent (its heartbeats stop; DOWN once their hashes expire). Default false. */
  silentFault?: boolean;
  log: (l: string) => void;
  /** The leader's period (ms). Default the controller's default (1 s). */
  leaderPeriodMs?: number;
  /** The leader's early look (controller/early.ts): on by default, as the controller runs; false: the decision waits for the next period (the figure before it). */
  early?: boolean;
  /** Where to write the plot (SVG), if anywhere. */
  svgOut?: string;
}

interface Child {
  proc: ChildProcess;
  events: { event: string; [k: string]: unknown }[];
  waitFor(event: string, timeoutMs: number, after?: number): Promise<{ event: string; [k: string]: unknown }>;
  send(o: unknown): void;
}

function child(args: string[]): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", join(__dirname, "scale-agents.ts"), ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const events: Child["events"] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: proc.stdout! }).on("line", (l) => {
    try {
      events.push(JSON.parse(l) as Child["events"][number]);
    } catch {
      return;
    }
    for (const w of waiters.splice(0)) w();
  });
  proc.on("exit", () => {
    for (const w of waiters.splice(0)) w();
  });
  return {
    proc,
    events,
    send: (o) => void proc.stdin!.write(JSON.stringify(o) + "\n"),
    async waitFor(event, timeoutMs, after = 0) {
      const limit = Date.now() + timeoutMs;
      for (;;) {
        const e = events.slice(after).find((x) => x.event === event);
        if (e) return e;
        if (proc.exitCode !== null) throw new Error(`scale bench child exited ${proc.exitCode} before "${event}"`);
        if (Date.now() > limit) throw new Error(`scale bench child: no "${event}" within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
  };
}

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.setTimeout(2000, () => req.destroy(new Error("timeout")));
    req.end();
  });
}

async function commandsProcessed(redis: import("ioredis").Redis): Promise<number> {
  const info = await redis.info("stats");
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
}

/** One fleet size, start to finish, on its own redis-server. */
export async function runScaleSize(nodes: number, o: Omit<ScaleOptions, "sizes">): Promise<ScaleRow & Record<string, unknown>> {
  const acl = labRedisAcl(CLUSTER);
  const dir = mkdtempSync(join(tmpdir(), "llmha-scale-"));
  const srv = await startRedisServer({ acl, dir });
  const children: Child[] = [];
  const keys = new RedisKeys(CLUSTER);
  const client = createRedisClient(srv.urlAs("llmha-controller"), { name: "scale-leader", log, commandTimeoutMs: 5000 });
  const admin = createRedisClient(srv.url, { name: "scale-observer", log });
  const lease = new LeaderLease({ redis: client.redis, keys, holderId: "scale-leader", settings: LEASE, log });
  try {
    const list: InventoryNode[] = Array.from({ length: nodes }, (_, i) => ({ nodeId: `sim-${i}`, az: azName(i, AZS), gpus: 8 }));
    const inventory: Inventory = { source: "bench", list: async () => list };
    const published: { at: number; e: Evaluation; aggMs: number | null }[] = [];
    const writer = new FencedWriter(client.redis, keys, lease);
    const controller = new Controller({
      redis: client.redis, keys, lease, writer, log, inventory, heartbeatTtlMs: 3000, settings: { intervalMs: o.leaderPeriodMs ?? DEFAULT_CONTROLLER_SETTINGS.intervalMs },
      ...(o.early === false ? { early: false as const } : {}),
      onPublished: (e) => void published.push({ at: Date.now(), e, aggMs: controller.lastAggregationTimeMs }),
    });
    const renewals: number[] = [];
    const renewedAt: number[] = [];
    const lost: string[] = [];
    lease.on("renewed", (ms) => {
      renewals.push(ms);
      renewedAt.push(performance.now());
    });
    lease.on("lost", (r) => void lost.push(r));
    await client.whenReady(5000);
    controller.start();
    lease.start();
    const per = Math.ceil(nodes / WORKERS);
    for (let w = 0; w < WORKERS; w++) children.push(child(["--agents", srv.urlAs("llmha-agent"), CLUSTER, String(w * per), String(Math.min(nodes, (w + 1) * per)), String(AZS)]));
    await Promise.all(children.map((c) => c.waitFor("ready", 30_000)));
    const health = child(["--az-health", srv.urlAs("llmha-agent"), CLUSTER, azName(0, AZS)]);
    children.push(health);
    const port = Number((await health.waitFor("listening", 30_000)).port);
    // Every AZ OK in the leader's view before anything is measured.
    const okBy = Date.now() + 20_000;
    while (!published.at(-1)?.e.azs.every((a) => a.state === "OK" && a.nodesIn === a.nodes) || (published.at(-1)?.e.azs.length ?? 0) < AZS) {
      if (Date.now() > okBy) throw new Error(`${nodes} nodes: the leader did not see every AZ OK within 20 s: ${JSON.stringify(published.at(-1)?.e.azs ?? null)}`);
      await sleep(100);
    }
    o.log(`${nodes} nodes: registered, every AZ OK; measuring`);

    const cpu0 = procUsage(srv.pid).cpuS;
    const cmd0 = await commandsProcessed(admin.redis);
    const w0 = performance.now();
    const from = published.length;
    const renew0 = renewals.length;
    const azHealthMs: number[] = [];
    const azCodes = new Map<number, number>();
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const s = performance.now();
        const code = await get(port, "/az/health").catch(() => 0);
        azHealthMs.push(performance.now() - s);
        azCodes.set(code, (azCodes.get(code) ?? 0) + 1);
        await sleep(Math.max(0, 100 - (performance.now() - s)));
      }
    })();
    await sleep(o.steadyS * 1000);

    const faults: { az: string; kind: "unhealthy" | "silent"; decisionMs: number | null; faultToDownMs: number | null; recoverMs: number | null }[] = [];
    const total = o.faults + (o.silentFault ? 1 : 0);
    for (let f = 0; f < total; f++) {
      const az = azName(f, AZS);
      const kind: "unhealthy" | "silent" = f < o.faults ? "unhealthy" : "silent";
      // A random phase against the leader's period and the agents' heartbeat slices.
      await sleep(Math.random() * 1000);
      const mark = children.slice(0, WORKERS).map((c) => c.events.length);
      const since = published.length;
      const t0 = Date.now();
      for (const c of children.slice(0, WORKERS)) c.send({ cmd: "fault", az, kind });
      let down: number | null = null;
      while (Date.now() - t0 < 10_000 && down === null) {
        down = published.slice(since).find((p) => p.e.azs.find((a) => a.az === az)?.state === "DOWN")?.at ?? null;
        if (down === null) await sleep(5);
      }
      const acks = (await Promise.all(children.slice(0, WORKERS).map((c, i) => c.waitFor("faulted", 10_000, mark[i])))).flatMap((e) => e.acks as number[]);
      const cross = downCrossingAt(acks, Math.ceil(nodes / AZS), DEFAULT_CONTROLLER_SETTINGS.downBelow);
      for (const c of children.slice(0, WORKERS)) c.send({ cmd: "heal" });
      const h0 = Date.now();
      const since2 = published.length;
      let ok: number | null = null;
      while (Date.now() - h0 < 15_000 && ok === null) {
        ok = published.slice(since2).find((p) => p.e.azs.find((a) => a.az === az)?.state === "OK")?.at ?? null;
        if (ok === null) await sleep(20);
      }
      const row = { az, kind, decisionMs: down !== null && cross !== null ? down - cross : null, faultToDownMs: down !== null ? down - t0 : null, recoverMs: ok !== null ? ok - h0 : null };
      faults.push(row);
      o.log(`${nodes} nodes: fault ${f + 1}/${total} (${az}, ${kind}): decision ${row.decisionMs} ms after the registry crossed, DOWN ${row.faultToDownMs} ms after the fault; OK again ${row.recoverMs} ms after the heal`);
      await sleep(1000);
    }
    polling = false;
    await poller;
    const wallS = (performance.now() - w0) / 1000;
    const cpuS = procUsage(srv.pid).cpuS - cpu0;
    const cmds = (await commandsProcessed(admin.redis)) - cmd0;
    const renewRtt = renewals.slice(renew0);
    const agg = published.slice(from).map((p) => p.aggMs).filter((x): x is number => x !== null);
    const periodGapMs = published.slice(from).map((p, i, a) => (i ? p.at - a[i - 1].at : 0)).slice(1);
    // After the window: an operator's reads share the one Redis with the leader, measured apart.
    const reader = child(["--status", srv.urlAs("llmha-reader"), CLUSTER, String(STATUS_READS)]);
    children.push(reader);
    await reader.waitFor("ready", 30_000);
    const statusFrom = published.length;
    const statusCpu0 = procUsage(srv.pid).cpuS;
    const statusT0 = performance.now();
    reader.send({ cmd: "go" });
    const status = (await reader.waitFor("status", 120_000)) as unknown as { readMs: number[]; lines: number; linesAll: number };
    // Redis CPU per read beyond what the agents and the leader kept it busy with (the window's rate).
    const statusRedisMs = ((procUsage(srv.pid).cpuS - statusCpu0) * 1000 - (cpuS / wallS) * (performance.now() - statusT0)) / STATUS_READS;
    const leaderDuring = published.slice(statusFrom).map((p) => p.aggMs).filter((x): x is number => x !== null);
    for (const c of children.slice(0, WORKERS)) c.send({ cmd: "stop" });
    const done = await Promise.all(children.slice(0, WORKERS).map((c) => c.waitFor("done", 30_000)));
    const lat = done.flatMap((d) => d.lat as number[]);
    const reported = faults.filter((f) => f.kind === "unhealthy");
    const decisions = reported.map((f) => f.decisionMs).filter((x): x is number => x !== null);
    const toDown = reported.map((f) => f.faultToDownMs).filter((x): x is number => x !== null);
    const silent = faults.find((f) => f.kind === "silent");
    // A renewal is missed when the term was lost, or when one came more than half a period late
    // (the next one after `renewMs` plus its round trip; the fence is at TTL − margin).
    const gaps = renewedAt.slice(renew0).map((t, i, a) => (i ? t - a[i - 1] : 0)).slice(1);
    const late = gaps.filter((g) => g > 1.5 * LEASE.renewMs).length;
    const lostInWindow = lost.filter((r) => r !== "released");
    const missed = lostInWindow.length + late;
    return {
      nodes,
      decisionP50Ms: decisions.length ? r1(pct(decisions, 50)) : NaN,
      decisionMaxMs: decisions.length === reported.length ? r1(Math.max(...decisions)) : Infinity,
      faultToDownMaxMs: toDown.length === reported.length ? r1(Math.max(...toDown)) : Infinity,
      ...(silent ? { silentToDownMs: silent.faultToDownMs ?? Infinity } : {}),
      redisCpuPercent: r1((cpuS / wallS) * 100),
      redisOpsPerSec: Math.round(cmds / wallS),
      leaseRenewals: renewRtt.length,
      leaseMissed: missed,
      registryReadP99Ms: r1(pct(agg, 99)),
      azHealthP99Ms: r1(pct(azHealthMs, 99)),
      heartbeatP99Ms: r1(pct(lat, 99)),
      statusReadP99Ms: r1(pct(status.readMs, 99)),
      statusLines: status.lines,
      detail: {
        faults,
        windowS: r1(wallS),
        heartbeats: { n: lat.length, p50Ms: r1(pct(lat, 50)), errors: done.reduce((s, d) => s + Number(d.errors), 0), lateSlices: done.reduce((s, d) => s + Number(d.missedSlots), 0) },
        lease: { ...LEASE, renewals: renewRtt.length, late, lost: lostInWindow, renewGapMaxMs: r1(Math.max(0, ...gaps)), renewRttP99Ms: r1(pct(renewRtt, 99)), renewRttMaxMs: r1(Math.max(0, ...renewRtt)) },
        leader: { periods: agg.length, readP50Ms: r1(pct(agg, 50)), readMaxMs: r1(Math.max(0, ...agg)), periodGapMaxMs: r1(Math.max(0, ...periodGapMs)) },
        azHealth: { n: azHealthMs.length, p50Ms: r1(pct(azHealthMs, 50)), codes: Object.fromEntries(azCodes) },
        redisCpuSeconds: r1(cpuS),
        // Redis CPU per read (beyond the window's rate of the agents' and the leader's work), and the leader's reads in the meantime (null: no period fell in it).
        status: { reads: STATUS_READS, p50Ms: r1(pct(status.readMs, 50)), redisCpuMsPerRead: r1(statusRedisMs), leaderReadMaxMsDuring: leaderDuring.length ? r1(Math.max(...leaderDuring)) : null, linesEveryNode: status.linesAll },
      },
    };
  } finally {
    for (const c of children) {
      c.proc.stdin?.end();
      if (c.proc.exitCode === null) c.proc.kill("SIGTERM");
    }
    await lease.release().catch(() => undefined);
    await client.close().catch(() => undefined);
    await admin.close().catch(() => undefined);
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runScaleBench(o: ScaleOptions): Promise<Record<string, unknown>> {
  const rows: (ScaleRow & Record<string, unknown>)[] = [];
  for (const n of o.sizes) {
    const started = Date.now();
    rows.push(await runScaleSize(n, o));
    o.log(`${n} nodes done in ${r1((Date.now() - started) / 1000)} s`);
  }
  const table = growthTable(rows);
  process.stderr.write(`\nFleet scale: one leader, ${AZS} AZs, heartbeats 1 s, leader period ${o.leaderPeriodMs ?? DEFAULT_CONTROLLER_SETTINGS.intervalMs} ms, early look ${o.early === false ? "off" : "on"}\n${renderGrowthTable(table)}\n`);
  if (o.svgOut) {
    const { writeFileSync } = await import("node:fs");
    writeFileSync(o.svgOut, renderScaleSvg(table, `Fleet scale: one leader over N nodes (${new Date().toISOString().slice(0, 16)} UTC)`));
    o.log(`plot written to ${o.svgOut}`);
  }
  return {
    sizes: rows,
    growth: table.map((e) => ({ figure: e.figure, unit: e.unit, target: e.target, exponent: e.exponent, superlinear: e.superlinear, values: e.values })),
    withinTargets: withinTargets(table),
    setup: { azs: AZS, agentProcesses: WORKERS, heartbeatMs: 1000, leaderPeriodMs: o.leaderPeriodMs ?? DEFAULT_CONTROLLER_SETTINGS.intervalMs, earlyLook: o.early !== false, lease: LEASE, steadyS: o.steadyS, faultsPerSize: o.faults, silentFault: Boolean(o.silentFault), redisUsers: "llmha-agent (agents, /az/health), llmha-controller (leader)" },
  };
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const sizes = argv.includes("--sizes") ? argv[argv.indexOf("--sizes") + 1].split(",").map(Number) : [500, 1000, 2000];
  runScaleBench({ sizes, steadyS: 10, faults: 3, log: (l) => void process.stderr.write(`[scale] ${l}\n`), svgOut: argv.includes("--svg") ? argv[argv.indexOf("--svg") + 1] : undefined }).then(
    (r) => {
      process.stdout.write(JSON.stringify(r, null, 2) + "\n");
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`scale bench failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
