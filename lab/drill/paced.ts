/**
 * Paced HTTP load for the drill's edge scenarios: requests at a fixed rate, each recorded with
 * when it started (drill clock), how long it took and its status. `pacedInChild` runs the same
 * loop in a process of its own (lab/drill/flood-child.ts): a flood generated in the drill's own
 * event loop would slow the legitimate requests it measures there (seen: p50 ×1.5 from that alone).
 */
import { spawn } from "node:child_process";
import { Agent, request } from "node:http";
import { setPriority } from "node:os";
import { join } from "node:path";
import { DRILL_MODEL } from "./settings";

export interface Sent {
  t: number;
  ms: number;
  status: number;
  retryAfter: boolean;
}

/** The edge scenarios' request: a one-token completion (also the raw flood's, raw-flood.ts). */
export const EDGE_BODY = JSON.stringify({ model: DRILL_MODEL, prompt: "edge", max_tokens: 1 });

export function post(url: string, headers: Record<string, string | string[]>, agent: Agent | false, now: () => number, req0: { path: string; body: string } = { path: "/v1/completions", body: EDGE_BODY }): Promise<Sent> {
  const t = now();
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request(`${url}${req0.path}`, { method: "POST", agent, headers: { "content-type": "application/json", ...headers } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ t, ms: performance.now() - t0, status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] !== undefined }));
      res.on("error", () => resolve({ t, ms: performance.now() - t0, status: 0, retryAfter: false }));
    });
    req.setTimeout(5000, () => req.destroy());
    req.on("error", () => resolve({ t, ms: performance.now() - t0, status: 0, retryAfter: false }));
    req.end(req0.body);
  });
}

/** Sends at `perS` requests a second (fire and forget, paced) until stopped; what `headers()` gives at each send. */
export function paced(url: () => string, headers: () => Record<string, string | string[]>, perS: number, now: () => number): { records: Sent[]; stop(): Promise<void> } {
  const records: Sent[] = [];
  const pending = new Set<Promise<void>>();
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const tickMs = 50;
  let owed = 0;
  const timer = setInterval(() => {
    owed += (perS * tickMs) / 1000;
    for (; owed >= 1; owed--) {
      const p = post(url(), headers(), agent, now).then((s) => void records.push(s));
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
  }, tickMs);
  return {
    records,
    async stop() {
      clearInterval(timer);
      await Promise.allSettled([...pending]);
      agent.destroy();
    },
  };
}

/** What the flood child is told (one JSON argument). */
export interface FloodOrder {
  urls: string[];
  headers: Record<string, string>;
  perS: number;
  /** `Date.now()` at the drill clock's 0: records carry drill times. */
  epochMs: number;
}

/**
 * A flood child (lab/drill/flood-child.ts) with its order; resolves once it is ready (its first
 * line). `go()` starts it; `stop()` closes its stdin and resolves with what it printed after that
 * first line. `lowPriority`: at nice 19, as an attacker's CPU is on its own host.
 */
export async function floodChild(order: object, lowPriority = false): Promise<{ go(): void; stop(): Promise<string> }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(__dirname, "flood-child.ts"), JSON.stringify(order)], { stdio: ["pipe", "pipe", "inherit"] });
  if (lowPriority && child.pid !== undefined) {
    try {
      setPriority(child.pid, 19);
    } catch {
      // Not allowed here: it runs at the drill's priority.
    }
  }
  let out = "";
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  await new Promise<void>((resolve) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      if (out.includes("\n")) resolve();
    });
    void closed.then(() => resolve());
  });
  return {
    go() {
      child.stdin.write("go\n");
    },
    async stop() {
      child.stdin.end();
      await closed;
      return out.slice(out.indexOf("\n") + 1);
    },
  };
}

/**
 * `paced` in a child process, round-robin over `urls`; resolves once the process is ready
 * (its first line); `go()` starts the sending, `stop()` ends it and returns its records.
 */
export async function pacedInChild(o: FloodOrder): Promise<{ go(): void; stop(): Promise<Sent[]> }> {
  const child = await floodChild(o);
  return {
    go: () => child.go(),
    async stop() {
      try {
        return JSON.parse(await child.stop()) as Sent[];
      } catch {
        return [];
      }
    },
  };
}
