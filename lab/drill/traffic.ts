/**
 * Steady client traffic on loopback: a few workers per client, each sending one small
 * completion, waiting for it, pausing, and again, until closed. Every failure is recorded
 * with its time. The main client picks its address from the latest DNS answer.
 */
import { Loop } from "../../agent/src/util/loop";
import type { FailedRequest, Timeline } from "./timeline";

export interface TrafficClient {
  /** Name in the report, e.g. `llm-ha` or `baseline_default`. */
  name: string;
  /** Base URL of the next request, or null to skip (no address known yet). */
  target(): string | null;
  /** Parallel workers. */
  workers: number;
  /**
   * Sends one request to `target` (the `n`-th of this worker); resolves the failure reason (or
   * the failure with where a cut stream ran) or null. Default: one 1-token completion with
   * `fetch` and the drill's time limit.
   */
  send?(target: string, n: number): Promise<string | Pick<FailedRequest, "why" | "place"> | null>;
  /** Headers of the default request (the tenant's `Authorization`). */
  headers?: Record<string, string>;
}

export interface TrafficOptions {
  clients: TrafficClient[];
  timeline: Timeline;
  /** ms since the drill started. */
  now(): number;
  model: string;
  /** Pause between one worker's requests. Default 25 ms. */
  gapMs?: number;
  /** Request time limit. */
  timeoutMs: number;
}

export interface Traffic {
  stop(): Promise<void>;
}

async function once(url: string, model: string, timeoutMs: number, extra: Record<string, string> = {}): Promise<string | null> {
  try {
    const r = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...extra },
      body: JSON.stringify({ model, prompt: "ping", max_tokens: 1 }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await r.text();
    if (!r.ok) return `HTTP ${r.status}`;
    if (!body.includes("choices")) return "bad body";
    return null;
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return e.name === "TimeoutError" ? "timeout" : (e.cause?.code ?? e.name);
  }
}

export function startTraffic(o: TrafficOptions): Traffic {
  const loops: Loop[] = [];
  const inFlight = new Set<Promise<void>>();
  for (const c of o.clients) {
    o.timeline.sent[c.name] ??= 0;
    for (let w = 0; w < c.workers; w++) {
      let n = 0;
      const loop = new Loop(
        o.gapMs ?? 25,
        async () => {
          const url = c.target();
          if (url === null) return;
          const t = o.now();
          o.timeline.sent[c.name]++;
          const p = (c.send ? c.send(url, n++) : once(url, o.model, o.timeoutMs, c.headers)).then((why) => {
            if (why) o.timeline.failures.push({ t, end: o.now(), client: c.name, ...(typeof why === "string" ? { why } : why) });
          });
          inFlight.add(p);
          await p;
          inFlight.delete(p);
        },
        () => undefined,
      );
      loop.start(w * 7);
      loops.push(loop);
    }
  }
  return {
    async stop() {
      for (const l of loops) l.stop();
      await Promise.allSettled([...inFlight]);
    },
  };
}
