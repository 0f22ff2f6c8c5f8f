/**
 * The replay consumer: once the tier is below L4 it drains the queue through the L1 proxy
 * at a bounded rate (recovering nodes are not stampeded), stores each result in Redis and
 * commits the offset only after storing (at-least-once; a duplicate is skipped by id).
 * A request the fleet refuses is stored as failed with the reason; one that meets a fleet
 * still down (a 502/503/504, no connection) is tried again a bounded number of times.
 */
import type { Consumer, Kafka } from "kafkajs";
import type { Logger } from "../util/log";
import { sleep } from "../util/net";
import type { VerifiedCache } from "./cache";
import type { FallbackMetrics } from "./metrics";
import { normalizeRequest } from "./normalize";
import type { QueuedRequest } from "./queue";
import type { RequestRecord, ResultStore } from "./results";
import type { TierReader } from "./tier";

export interface ReplayOptions {
  kafka: Kafka;
  topic: string;
  groupId: string;
  /** Base URL of the L1 proxy (`http://127.0.0.1:8080`). */
  l1Url: string;
  /** Requests per second at most. */
  rps: number;
  /** Tries against a fleet that is still down before the request is stored as failed. */
  maxAttempts: number;
  /** Per replayed request. */
  timeoutMs: number;
  store: ResultStore;
  cache: VerifiedCache | null;
  tier: TierReader;
  metrics: FallbackMetrics;
  log: Logger;
}

/** A token bucket: `take()` resolves when one more request fits in the rate. */
export class RateLimiter {
  private next = 0;
  constructor(private readonly rps: number) {}
  async take(): Promise<void> {
    const now = performance.now();
    const gap = 1000 / this.rps;
    const at = Math.max(now, this.next);
    this.next = at + gap;
    if (at > now) await sleep(at - now);
  }
}

const TRANSIENT = new Set([502, 503, 504]);

export class Replayer {
  private consumer: Consumer | null = null;
  private stopping = false;
  private readonly limiter: RateLimiter;

  constructor(private readonly o: ReplayOptions) {
    this.limiter = new RateLimiter(o.rps);
  }

  async start(): Promise<void> {
    // A short session: a member that died (or a restarted member's old id) holds a rebalance up
    // for at most 10 s. A member waiting out L4 or a long replay keeps heartbeating.
    const c = this.o.kafka.consumer({ groupId: this.o.groupId, sessionTimeout: 10_000, heartbeatInterval: 1000, rebalanceTimeout: 30_000, allowAutoTopicCreation: true, retry: { retries: 10 } });
    this.consumer = c;
    await c.connect();
    await c.subscribe({ topic: this.o.topic, fromBeginning: true });
    await c.run({
      autoCommit: false,
      partitionsConsumedConcurrently: 1,
      eachMessage: async ({ topic, partition, message, heartbeat }) => {
        const next = (BigInt(message.offset) + 1n).toString();
        await this.handle(message.value?.toString("utf8") ?? "", heartbeat);
        // Commit after the result is stored: a crash before this replays the message, which is skipped by id.
        await c.commitOffsets([{ topic, partition, offset: next }]);
      },
    });
  }

  private async waitWhile(cond: () => Promise<boolean>, heartbeat: () => Promise<void>): Promise<void> {
    while (!this.stopping && (await cond())) {
      await sleep(500);
      // A rebalance (another AZ's fallback joining the group) surfaces here as an error: let it
      // out, so this member rejoins; the message is not committed and comes again (skipped by id if done).
      await heartbeat();
    }
    if (this.stopping) throw new Error("replay stopping");
  }

  private async handle(raw: string, heartbeat: () => Promise<void>): Promise<void> {
    let q: QueuedRequest;
    try {
      q = JSON.parse(raw) as QueuedRequest;
      if (typeof q.id !== "string" || typeof q.path !== "string" || typeof q.body !== "object") throw new Error("not a queued request");
    } catch (err) {
      this.o.log.warn({ err: (err as Error).message }, "replay: skipping a message that is not a queued request");
      return;
    }
    const { store, metrics, log } = this.o;
    // Idempotent by id: a result already stored (a redelivery) is not replayed again.
    let existing: RequestRecord | null = null;
    await this.waitWhile(async () => {
      try {
        existing = await store.get(q.id);
        return false;
      } catch {
        return true; // Redis down: the result could not be stored; wait.
      }
    }, heartbeat);
    const prior = existing as RequestRecord | null;
    if (prior && (prior.state === "done" || prior.state === "failed")) {
      metrics.replayed.inc({ result: "duplicate" });
      return;
    }
    const model = typeof q.body.model === "string" ? q.body.model : "";
    let attempts = 0;
    let final: RequestRecord & { state: "done" | "failed" };
    for (;;) {
      // Only while the fleet can serve again (the controller's tier is below L4 and readable).
      await this.waitWhile(async () => {
        const t = await this.o.tier.read();
        return !t.readable || t.level === "L4";
      }, heartbeat);
      await this.limiter.take();
      attempts += 1;
      // Heartbeats while the fleet answers (a generation can take minutes); a rebalance seen here
      // only means the commit after storing may fail, and the redelivery is skipped by id.
      const beat = setInterval(() => void heartbeat().catch(() => undefined), 1000);
      const t0 = performance.now();
      const r = await this.send(q).finally(() => clearInterval(beat));
      metrics.replayAttemptSeconds.observe({ result: r.ok ? "ok" : r.transient ? "retry" : "refused" }, (performance.now() - t0) / 1000);
      if (r.ok) {
        final = { id: q.id, state: "done", model, queuedAt: q.receivedAt, finishedAt: Date.now(), status: r.status, response: r.body, attempts };
        break;
      }
      if (!r.transient || attempts >= this.o.maxAttempts) {
        final = { id: q.id, state: "failed", model, queuedAt: q.receivedAt, finishedAt: Date.now(), status: r.status, reason: r.reason, attempts };
        break;
      }
      log.info({ id: q.id, attempts, reason: r.reason }, "replay: fleet not serving yet; trying again");
      const backoff = Math.min(8000, 500 * 2 ** (attempts - 1));
      const until = Date.now() + backoff;
      await this.waitWhile(async () => Date.now() < until, heartbeat);
    }
    await this.waitWhile(async () => {
      try {
        const wrote = await store.finish(final);
        metrics.replayed.inc({ result: wrote ? final.state : "duplicate" });
        if (wrote) metrics.replaySeconds.observe((Date.now() - q.receivedAt) / 1000);
        return false;
      } catch {
        return true;
      }
    }, heartbeat);
    if (final.state === "done" && this.o.cache) {
      // A verified answer now: the same request during the next outage is answered from the cache.
      const answer = answerText(q.kind, final.response);
      if (answer !== null) {
        try {
          await this.o.cache.put(normalizeRequest(q.kind, q.body), answer.text, { source: "replay", finishReason: answer.finish });
        } catch (err) {
          log.warn({ id: q.id, err: (err as Error).message }, "replay: result not cached");
        }
      }
    }
    log.info({ id: q.id, state: final.state, attempts, status: final.status }, "replayed");
  }

  private async send(q: QueuedRequest): Promise<{ ok: true; status: number; body: unknown } | { ok: false; transient: boolean; status?: number; reason: string }> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), this.o.timeoutMs);
    try {
      const res = await fetch(this.o.l1Url.replace(/\/+$/, "") + q.path, {
        method: "POST",
        headers: { "content-type": "application/json", "x-llmha-replay": q.id, "x-request-id": q.id },
        body: JSON.stringify({ ...q.body, stream: false, stream_options: undefined }),
        signal: ac.signal,
      });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // kept as text
      }
      // An answer from the fallback itself (the fleet went down again) is not the fleet's.
      const degraded = res.headers.get("x-llmha-degraded");
      if (res.ok && degraded === null) return { ok: true, status: res.status, body };
      if (res.ok) return { ok: false, transient: true, status: res.status, reason: `answered by the fallback (${degraded}), not the fleet` };
      const msg = (body as { error?: { message?: string } })?.error?.message ?? (typeof body === "string" ? body.slice(0, 200) : "");
      return { ok: false, transient: TRANSIENT.has(res.status), status: res.status, reason: `HTTP ${res.status}${msg ? `: ${msg}` : ""}` };
    } catch (err) {
      return { ok: false, transient: true, reason: ac.signal.aborted ? `no answer within ${this.o.timeoutMs} ms` : `L1 unreachable (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message})` };
    } finally {
      clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.consumer?.disconnect().catch(() => undefined);
  }
}

/** The answer text of an OpenAI response, for the cache. */
export function answerText(kind: "chat" | "completions", response: unknown): { text: string; finish: string } | null {
  const choice = (response as { choices?: Array<{ message?: { content?: unknown }; text?: unknown; finish_reason?: unknown }> })?.choices?.[0];
  const text = kind === "chat" ? choice?.message?.content : choice?.text;
  if (typeof text !== "string") return null;
  return { text, finish: typeof choice?.finish_reason === "string" ? choice.finish_reason : "stop" };
}
