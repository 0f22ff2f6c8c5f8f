/**
 * The fleet-scale bench's child processes (lab/bench/scale.ts), so that N agents are not N
 * Node processes on two cores:
 *
 * - `--agents URL CLUSTER FROM TO AZS`: simulated agents `sim-FROM` … `sim-(TO-1)`, node i in
 *   AZ `i mod AZS`, each heartbeating once a second with the agents' real function
 *   (`heartbeat-7.lua` through `heartbeatScript`, as the `llmha-agent` ACL user), spread over
 *   the second in 10 ms slices, on one connection. Commands arrive as JSON lines on stdin:
 *   `{"cmd":"fault","az":"az-b","kind":"unhealthy"|"silent"}` (from each node's next
 *   heartbeat on it reports UNHEALTHY, or stops heartbeating), `{"cmd":"heal"}`,
 *   `{"cmd":"stop"}`. Events go out as JSON lines on stdout: `ready` once every node has
 *   registered; `faulted` with the epoch-ms ack time of each faulted node's first unhealthy
 *   report; `done` with the heartbeat latencies.
 * - `--az-health URL CLUSTER AZ`: the agent's real HTTP reporter (`startHttpServer`) serving
 *   `GET /az/health` from `readAzHealth`, as every agent does; prints its port.
 * - `--status URL CLUSTER READS`: an operator's `llm-ha status` (its own process, as on the
 *   operator's machine): `ready` once connected; on `{"cmd":"go"}` the whole view read READS
 *   times back to back, as the command reads it, then `status` with each read's ms and the lines
 *   of the default text view and of the view listing every node.
 */
import { createInterface } from "node:readline";
import pino from "pino";
import type { Decision } from "../../agent/src/types";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { heartbeatArgs, type NodeReport } from "../../agent/src/fleet/redis/registry";
import { heartbeatScript } from "../../agent/src/fleet/redis/scripts";
import { readAzHealth } from "../../agent/src/fleet/controller/az-health";
import { startHttpServer } from "../../agent/src/node/reporters/http";
import { readFleetView } from "../../agent/src/ops/status/view";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { createLogger } from "../../agent/src/util/log";
import { sleep } from "../../agent/src/util/net";
import { Registry } from "prom-client";

const log = createLogger({ level: "silent", destination: pino.destination({ fd: 2, sync: true }) });

export const azName = (i: number, azs: number): string => `az-${String.fromCharCode(97 + (i % azs))}`;

function decision(up: boolean, now: number): Decision {
  return up
    ? { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 0.5 }
    : {
        status: "UNHEALTHY", phase: "down", weight: 0, pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 1,
        reasons: [{ source: "gpu", code: "GPU_LOST", hard: true, effect: "unhealthy" }],
      };
}

function emit(o: unknown): Promise<void> {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(o) + "\n", () => resolve()));
}

async function agents(url: string, cluster: string, from: number, to: number, azs: number): Promise<void> {
  const keys = new RedisKeys(cluster);
  const client = createRedisClient(url, { name: `scale-agents-${from}`, log, commandTimeoutMs: 5000 });
  if (!(await client.whenReady(10_000))) throw new Error(`Redis at ${client.safeUrl} not ready in 10 s`);
  const n = to - from;
  const mode: ("ok" | "unhealthy" | "silent")[] = new Array(n).fill("ok");
  const registered = new Array<boolean>(n).fill(false);
  let registeredCount = 0;
  let pendingAcks = new Set<number>();
  let acks: number[] = [];
  let faultAz: string | null = null;
  let stopping = false;
  const lat: number[] = [];
  let errors = 0;
  let missedSlots = 0;

  createInterface({ input: process.stdin }).on("line", (line) => {
    const c = JSON.parse(line) as { cmd: string; az?: string; kind?: "unhealthy" | "silent" };
    if (c.cmd === "fault" && c.az) {
      faultAz = c.az;
      pendingAcks = new Set();
      acks = [];
      for (let i = 0; i < n; i++) {
        if (azName(from + i, azs) !== c.az) continue;
        mode[i] = c.kind ?? "unhealthy";
        if (mode[i] === "unhealthy") pendingAcks.add(i);
      }
      if (pendingAcks.size === 0) void emit({ event: "faulted", az: c.az, acks: [] });
    } else if (c.cmd === "heal") {
      mode.fill("ok");
      faultAz = null;
    } else if (c.cmd === "stop") {
      stopping = true;
    }
  });

  const slices = 100;
  const per = Math.ceil(n / slices);
  const t0 = performance.now();
  const inflight = new Set<Promise<void>>();
  for (let tick = 0; !stopping; tick++) {
    const due = t0 + tick * 10;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -10) missedSlots += 1;
    const slot = tick % slices;
    for (let i = slot * per; i < Math.min(n, (slot + 1) * per); i++) {
      if (mode[i] === "silent") continue;
      const id = `sim-${from + i}`;
      const up = mode[i] === "ok";
      const report: NodeReport = { nodeId: id, az: azName(from + i, azs), decision: decision(up, Date.now()), gpus: up ? 8 : 0, gpusExpected: 8, model: "m" };
      const { k, a } = heartbeatArgs(keys, report, 3000, 10_000);
      const s = performance.now();
      const faultedNow = !up && pendingAcks.has(i) && faultAz === report.az;
      const p: Promise<void> = heartbeatScript(client.redis, k, a).then(
        () => {
          lat.push(performance.now() - s);
          if (!registered[i]) {
            registered[i] = true;
            registeredCount += 1;
            if (registeredCount === n) void emit({ event: "ready" });
          }
          if (faultedNow && pendingAcks.delete(i)) {
            acks.push(Date.now());
            if (pendingAcks.size === 0) void emit({ event: "faulted", az: report.az, acks });
          }
        },
        () => void (errors += 1),
      ).finally(() => inflight.delete(p));
      inflight.add(p);
    }
    if (inflight.size > 5000) await Promise.all([...inflight]);
  }
  await Promise.all([...inflight]);
  await client.close();
  await emit({ event: "done", lat: lat.map((x) => Math.round(x * 100) / 100), errors, missedSlots, elapsedMs: performance.now() - t0 });
}

async function azHealthServer(url: string, cluster: string, az: string): Promise<void> {
  const keys = new RedisKeys(cluster);
  const client = createRedisClient(url, { name: "scale-az-health", log, commandTimeoutMs: 2000 });
  if (!(await client.whenReady(10_000))) throw new Error(`Redis at ${client.safeUrl} not ready in 10 s`);
  const now = Date.now();
  const server = await startHttpServer("127.0.0.1", 0, {
    nodeId: "az-health-agent",
    az,
    decision: () => decision(true, now),
    draining: () => false,
    alive: () => true,
    gpus: () => [],
    model: () => null,
    probe: () => ({ lastLatencyMs: null, p50Ms: null, p95Ms: null, inFlightMs: null, last: null }),
    azHealth: () => readAzHealth(client.redis, keys, az, { connected: client.connected }),
    metrics: new Registry(),
  });
  const addr = server.address();
  await emit({ event: "listening", port: typeof addr === "object" && addr ? addr.port : 0 });
  createInterface({ input: process.stdin }).on("close", () => {
    server.close();
    void client.close().then(() => process.exit(0));
  });
}

async function statusReads(url: string, cluster: string, reads: number): Promise<void> {
  const keys = new RedisKeys(cluster);
  const client = createRedisClient(url, { name: "scale-status", log, commandTimeoutMs: 10_000 });
  if (!(await client.whenReady(10_000))) throw new Error(`Redis at ${client.safeUrl} not ready in 10 s`);
  await emit({ event: "ready" });
  await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once("line", () => resolve()));
  const readMs: number[] = [];
  let view = null;
  for (let i = 0; i < reads; i++) {
    const s = performance.now();
    view = await readFleetView(client.redis, keys, { events: 10, url: "bench" });
    readMs.push(Math.round((performance.now() - s) * 10) / 10);
  }
  await client.close();
  const v = view as NonNullable<typeof view>;
  await emit({ event: "status", readMs, lines: renderFleetView(v).length, linesAll: renderFleetView(v, { nodes: "all" }).length });
}

const MODES: Record<string, (a: string[]) => Promise<void>> = {
  "--agents": (a) => agents(a[0], a[1], Number(a[2]), Number(a[3]), Number(a[4])),
  "--az-health": (a) => azHealthServer(a[0], a[1], a[2]),
  "--status": (a) => statusReads(a[0], a[1], Number(a[2])),
};

if (require.main === module) {
  const [mode, ...args] = process.argv.slice(2);
  const run = MODES[mode]?.(args) ?? Promise.reject(new Error(`unknown mode ${mode}`));
  run.then(
    () => {
      if (mode !== "--az-health") process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`scale bench child: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
