/**
 * What the proxy scenarios measure beside the timeline: an endpoint polled for its answer
 * time (`/healthz`, `/az/health` under overload), each backup server's requests against its
 * fair share (the L2 spread, from `show stat` totals sample by sample), the per-server
 * `maxconn` of a running proxy's configuration, whether an inference process is alive, and a
 * fake server's requests in flight. The pure parts take plain data, so tests build it by hand.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import type { SimNode } from "../../sim/sim-node";
import { l1Full, l1Removed, type L1Sample, type Sample } from "../timeline";
import { pidAlive } from "../../cli-process";

/** One answer of a polled endpoint: its time, or the time limit when it failed. */
export interface Poll {
  t: number;
  ms: number;
  /** HTTP status; null when no answer came within the limit. */
  status: number | null;
  /** Whether the answer carried `Retry-After`. */
  retryAfter: boolean;
  /**
   * How long the poller's own process had been stalled (waiting for a CPU, its timers late) when
   * it read this answer (ms): an answer that arrived in the stall sat unread that long at most. A
   * figure judged against a bound subtracts it (`answeredMs`): a busy neighbour delays the
   * measuring process, not the proxy.
   */
  lagMs: number;
}

/** A poll's time less the poller's own lateness while it was open: what the endpoint took, as near as one process can tell. */
export function answeredMs(p: Poll): number {
  return Math.max(0, p.ms - p.lagMs);
}

/** What to poll: a GET by default, or a POST of a JSON body (a completion). */
export interface PollTarget {
  url: string;
  /** Request headers (the tenant's `Authorization`). */
  headers?: Record<string, string>;
  body?: unknown;
}

/**
 * The poller, as a script for a process of its own: each target is asked every `everyMs` on a
 * fresh connection (as Route53 or PowerDNS would) and one line per answer is printed: `index
 * epochMs ms status retryAfter lagMs` (status 0: no answer within `timeoutMs`). A 5 ms timer
 * measures the process's own lateness (each tick's delay past its due time); `lagMs` is the
 * stall that ended when the answer was read. It exits when its stdin closes.
 */
const POLL_SCRIPT = `
const http = require("node:http");
const [everyMs, timeoutMs] = process.argv.slice(1, 3).map(Number);
const targets = JSON.parse(process.argv[3]);
const TICK = 5;
const late = [];
let due = Date.now() + TICK;
setInterval(() => {
  const now = Date.now();
  late.push([now, Math.max(0, now - due)]);
  if (late.length > 4000) late.splice(0, 2000);
  due = now + TICK;
}, TICK);
// The stall that ended when the answer was read: the lateness of the ticks that ran right around
// that moment (an answer that arrived during a stall is read when the stall ends). A stall earlier
// in the wait delayed nothing and is not counted.
const stallAt = (t0, t1) => {
  let m = 0;
  for (let i = late.length - 1; i >= 0 && late[i][0] >= t1 - TICK; i--) if (late[i][0] <= t1 + TICK && late[i][1] > m) m = late[i][1];
  return Math.min(m, t1 - t0);
};
const one = (x) => new Promise((done) => {
  const t0 = Date.now();
  let settled = false;
  const end = (status, ra) => { if (!settled) { settled = true; const t1 = Date.now(); setTimeout(() => done([t0, t1 - t0, status, ra ? 1 : 0, stallAt(t0, t1)]), TICK + 1); } };
  const body = x.body === undefined ? null : JSON.stringify(x.body);
  const headers = { ...(x.headers || {}), ...(body === null ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) }) };
  const req = http.request(x.url, { method: body === null ? "GET" : "POST", agent: false, headers }, (res) => {
    res.resume();
    res.on("end", () => end(res.statusCode, res.headers["retry-after"] !== undefined));
    res.on("error", () => end(0, false));
  });
  req.on("error", () => end(0, false));
  req.end(body ?? undefined);
  setTimeout(() => { req.destroy(); end(0, false); }, timeoutMs);
});
targets.forEach(async (x, i) => {
  for (;;) {
    const [t, ms, st, ra, lag] = await one(x);
    process.stdout.write([i, t, ms, st, ra, lag].join(" ") + "\\n");
    await new Promise((r) => setTimeout(r, everyMs));
  }
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

/**
 * Polls each target every `everyMs` from a process of its own, so that the load the drill itself
 * generates (hundreds of clients in its event loop) does not add to the times; a poll without
 * an answer within `timeoutMs` counts as `timeoutMs`. `polls[i]` holds the answers of `targets[i]`.
 */
export function pollEndpoints(targets: readonly PollTarget[], now: () => number, everyMs = 100, timeoutMs = 2000): { polls: Poll[][]; stop(): Promise<void> } {
  const offset = Date.now() - now();
  const polls: Poll[][] = targets.map(() => []);
  const child = spawn(process.execPath, ["-e", POLL_SCRIPT, String(everyMs), String(timeoutMs), JSON.stringify(targets)], { stdio: ["pipe", "pipe", "ignore"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const [i, t, ms, st, ra, lag] = line.split(" ").map(Number);
    polls[i]?.push({ t: t - offset, ms: st === 0 ? timeoutMs : ms, status: st === 0 ? null : st, retryAfter: ra === 1, lagMs: Number.isFinite(lag) ? lag : 0 });
  });
  return {
    polls,
    async stop() {
      child.stdin?.end();
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** The slowest answer (a failed poll counts as its limit), null when nothing was polled. */
export function slowest(polls: readonly Poll[]): number | null {
  return polls.length ? Math.max(...polls.map((p) => p.ms)) : null;
}

/** One backup server's requests over the judged intervals against its fair share. */
export interface ServerShare {
  row: string;
  requests: number;
  /** An equal part of every judged interval's requests when it was in rotation. */
  fair: number;
}

/** A row in rotation at full weight, out of it, or in between (warmup, slowstart: its share is not equal yet). */
function rotation(s: L1Sample | undefined): "in" | "out" | "partial" {
  if (!s || l1Removed(s) || !s.status.startsWith("UP")) return "out";
  return l1Full(s) ? "in" : "partial";
}

/**
 * Each row's requests and fair share over [from, to], judged interval by interval (between two
 * samples): an interval counts when no row changed state in it and none was in between (coming
 * up, slowstart); its requests are then shared equally among the rows in rotation.
 */
export function sharesOf(samples: readonly Sample[], rows: readonly string[], from: number, to: number): { shares: ServerShare[]; judgedMs: number } {
  const win = samples.filter((s) => s.t >= from && s.t <= to);
  const shares = rows.map((row) => ({ row, requests: 0, fair: 0 }));
  let judgedMs = 0;
  for (let i = 1; i < win.length; i++) {
    const [a, b] = [win[i - 1], win[i]];
    const st = rows.map((k) => rotation(a.l1[k]));
    if (st.some((x, j) => x === "partial" || x !== rotation(b.l1[rows[j]]))) continue;
    const n = st.filter((x) => x === "in").length;
    if (n === 0) continue;
    const delta = rows.map((k) => Math.max(0, (b.l1[k]?.total ?? 0) - (a.l1[k]?.total ?? 0)));
    const all = delta.reduce((x, y) => x + y, 0);
    judgedMs += b.t - a.t;
    shares.forEach((o, j) => {
      o.requests += delta[j];
      if (st[j] === "in") o.fair += all / n;
    });
  }
  return { shares, judgedMs };
}

/** Fair shares smaller than this many requests are too few to judge. */
export const MIN_FAIR_REQUESTS = 20;

/** The highest requests / fair share among the rows with enough of a share; null when none has. */
export function spreadRatio(shares: readonly ServerShare[]): number | null {
  const judged = shares.filter((s) => s.fair >= MIN_FAIR_REQUESTS);
  return judged.length ? Math.max(...judged.map((s) => s.requests / s.fair)) : null;
}

/** The `maxconn` of a proxy's server lines in its configuration file; null when they have none. */
export function serverMaxconnOf(configPath: string): number | null {
  const m = /^\s*server(?:-template)?\s.*\bmaxconn (\d+)/m.exec(readFileSync(configPath, "utf8"));
  return m ? Number(m[1]) : null;
}

/** Whether the node's inference process is running (it may have exited on its own). */
export function inferenceAlive(n: SimNode): boolean {
  const pid = n.inferencePid;
  return pid !== null && pidAlive(pid);
}

/** Completions the node's fake inference server has not answered yet (null when it did not say). */
export function inFlightOf(n: SimNode): Promise<number | null> {
  return n.inFlight();
}

/** Counts of each value, most frequent first: `HTTP 502 ×3, stream cut ×1`. */
export function tally(values: readonly string[]): string {
  const m = new Map<string, number>();
  for (const v of values) m.set(v, (m.get(v) ?? 0) + 1);
  return [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([v, n]) => `${v} ×${n}`)
    .join(", ");
}
