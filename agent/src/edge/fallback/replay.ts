/**
 * The replay consumer: once the tier is below L4 it drains the queue through the L1 proxy
 * at a bounded rate and concurrency (recovering nodes are not stampeded, one slow request does
 * not hold the others up), stores each result in Redis and commits the offset only after
 * storing. Delivery is at least once; execution at most once: a request is claimed in Redis
 * before it is sent (`results.ts`), so a redelivery, a request answered 503 (cancelled) or one
 * whose replaying member died mid-request is never sent again.
 * A request the fleet refuses is stored as failed with the reason; one that meets a fleet
 * still down (a 502/503/504, no connection) is tried again a bounded number of times.
 */
import type { Consumer, Kafka } from "kafkajs";
import type { Logger } from "../../util/log";
import { sleep } from "../../util/net";
import type { VerifiedCache } from "./cache";
import type { FallbackMetrics } from "./metrics";
import { normalizeRequest } from "./normalize";
import type { QueuedRequest } from "./queue";
import { ANONYMOUS_TENANT, type RequestRecord, type ResultStore } from "./results";
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
  /** Per attempt of a replayed request. */
  timeoutMs: number;
  /** Per replayed request, all attempts and backoff together: past it the request is stored failed. */
  deadlineMs: number;
  /** Requests replayed at once by this member (one per partition at most). */
  concurrency: number;
  /** Consumer-group session: how long a member that died holds its partitions. */
  sessionTimeoutMs: number;
  /** How long after `receivedAt` a record may stay `accepting` (the producer waiting for the ack) before the replay cancels it. */
  acceptWindowMs: number;
  /** Tenants whose done results are cached for themselves. */
  cacheReplayedTenants: readonly string[];
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

/** Kafka error types after which kafkajs's runner rejoins the group itself (runner.js), when it sees them unwrapped. */
const REJOIN_TYPES = new Set(["REBALANCE_IN_PROGRESS", "NOT_COORDINATOR_FOR_GROUP", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]);

/**
 * The group error inside `err`, if it is one the runner rejoins on. A commit goes through
 * kafkajs's retrier, which wraps such a (non-retriable) error in `KafkaJSNonRetriableError`;
 * thrown out of `eachMessage` like that, the runner no longer recognises it and the consumer
 * stops for good ("Crash: … The group is rebalancing"), where the bare error makes it rejoin.
 */
export function groupRejoinError(err: unknown): Error | null {
  for (let e = err as { type?: unknown; cause?: unknown; originalError?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (typeof e.type === "string" && REJOIN_TYPES.has(e.type)) return e as unknown as Error;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return null;
}

/** Runs a group call inside `eachMessage`; a rejoin error leaves unwrapped, so the runner rejoins. */
async function inGroup<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw groupRejoinError(err) ?? err;
  }
}

export class Replayer {
  private consumer: Consumer | null = null;
  private stopping = false;
  private readonly limiter: RateLimiter;
  /**
   * How long a claimed request stays this member's without a renewal (renewed every third).
   * The group's session: a member that died has lost its partitions that long after its last
   * heartbeat, and the member that takes them over finds the requests it had claimed already
   * free to be given up as interrupted. (A 30 s lease held the drill's queue up for 26 s after a
   * kill -9: the survivor waited out the dead member's claim on the head of a partition.)
   */
  private readonly leaseMs: number;

  constructor(private readonly o: ReplayOptions) {
    this.limiter = new RateLimiter(o.rps);
    this.leaseMs = Math.max(1000, o.sessionTimeoutMs);
  }

  async start(): Promise<void> {
    // A short session: a member that died (kill -9, a node lost) holds a rebalance up for at most
    // `sessionTimeoutMs` (kafkajs has no static membership). A member waiting out L4 or a long
    // replay keeps heartbeating, every third of the session; kafkajs heartbeats only between
    // fetches, so an idle fetch waits no longer than that either (its default, 5 s, would let the
    // session lapse on an empty topic).
    const session = this.o.sessionTimeoutMs;
    const third = Math.max(100, Math.floor(session / 3));
    const c = this.o.kafka.consumer({
      groupId: this.o.groupId, sessionTimeout: session, heartbeatInterval: third, maxWaitTimeInMs: third, rebalanceTimeout: 30_000,
      allowAutoTopicCreation: true, retry: { retries: 10 },
    });
    this.consumer = c;
    // kafkajs stops for good on an error it deems fatal (this member evicted while the brokers
    // were frozen: "The coordinator is not aware of this member"; a commit refused because a dead
    // member's eviction started a rebalance; it has left the group by then): start a new member,
    // after 1 s — rejoining at once (100 ms) held the drill's replay up for 27 s once, the mock
    // broker still waiting out that rebalance — and again until one runs.
    c.on(c.events.CRASH, (e) => {
      if (e.payload.restart || this.stopping) return;
      this.o.log.warn({ err: e.payload.error.message }, "replay: consumer stopped; starting a new member");
      void (async () => {
        // Until a new member runs (the brokers may still be down): a replay that stays stopped loses nothing but waits forever.
        let failed = c;
        for (let delay = 1000; !this.stopping; delay = Math.min(delay * 2, 5000)) {
          await sleep(delay);
          if (this.stopping || this.consumer !== failed) return; // stopped, or another restart took over
          try {
            return await this.start();
          } catch (err) {
            this.o.log.error({ err: (err as Error).message, retryInMs: Math.min(delay * 2, 5000) }, "replay: consumer did not restart");
            failed = this.consumer ?? failed;
            await failed.disconnect().catch(() => undefined);
          }
        }
      })();
    });
    await c.connect();
    await c.subscribe({ topic: this.o.topic, fromBeginning: true });
    await c.run({
      autoCommit: false,
      partitionsConsumedConcurrently: this.o.concurrency,
      eachMessage: async ({ topic, partition, message, heartbeat }) => {
        const next = (BigInt(message.offset) + 1n).toString();
        this.o.metrics.replayInFlight.inc();
        try {
          await this.handle(message.value?.toString("utf8") ?? "", () => inGroup(heartbeat));
        } finally {
          this.o.metrics.replayInFlight.dec();
        }
        // Commit after the result is stored: a crash before this replays the message, which is
        // skipped by id; so is a commit refused by a rebalance, which makes this member rejoin.
        await inGroup(() => c.commitOffsets([{ topic, partition, offset: next }]));
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
    const tenant = q.tenant ?? ANONYMOUS_TENANT;
    const model = typeof q.body.model === "string" ? q.body.model : "";
    const base = { id: q.id, tenant, model, queuedAt: q.receivedAt };
    // Redis down: nothing can be claimed or stored; wait.
    const read = async (): Promise<RequestRecord | null> => {
      let rec: RequestRecord | null = null;
      await this.waitWhile(async () => {
        try {
          rec = await store.get(q.id);
          return false;
        } catch {
          return true;
        }
      }, heartbeat);
      return rec;
    };
    // 1. Take the request, at most once.
    for (;;) {
      const rec = await read();
      if (rec?.state === "done" || rec?.state === "failed") return void metrics.replayed.inc({ result: "duplicate" });
      if (rec?.state === "cancelled") {
        log.info({ id: q.id }, "replay: cancelled (answered 503); not run");
        return void metrics.replayed.inc({ result: "cancelled" });
      }
      if (rec?.state === "accepting") {
        // The producer has not confirmed: it is waiting for the ack, or answered 503 and its
        // cancellation is on the way, or died. Past its window it never will: cancel.
        if (Date.now() < q.receivedAt + this.o.acceptWindowMs) await this.pause(250, heartbeat);
        else await store.cancel(base, "not confirmed by the fallback that queued it").catch(() => undefined);
        continue;
      }
      if (rec?.state === "running") {
        // Another member has it (a rebalance), or had it and died: wait for its lease, then give up on it.
        if (Date.now() < (rec.leaseUntil ?? 0)) {
          await this.pause(500, heartbeat);
          continue;
        }
        const wrote = await store.finish({ ...rec, state: "failed", finishedAt: Date.now(), reason: "interrupted: the fallback replaying it stopped; not run again (at most once)" }).catch(() => false);
        if (wrote) metrics.replayed.inc({ result: "interrupted" });
        return;
      }
      // Pending (or no record: queued while Redis was down). Wait for the fleet, then claim.
      await this.waitWhile(async () => {
        const t = await this.o.tier.read();
        return !t.readable || t.level === "L4";
      }, heartbeat);
      await this.limiter.take();
      const claimed = await store.claim(base, this.leaseMs).catch(() => false);
      if (claimed) break;
    }
    // The lease is renewed while this member works on it: a redelivery elsewhere waits.
    const renew = setInterval(() => void store.claim(base, this.leaseMs, ["running"]).catch(() => undefined), this.leaseMs / 3);
    try {
      await this.run(q, base, heartbeat);
    } finally {
      clearInterval(renew);
    }
  }

  private async run(q: QueuedRequest, base: Omit<RequestRecord, "state">, heartbeat: () => Promise<void>): Promise<void> {
    const { store, metrics, log } = this.o;
    const tenant = base.tenant ?? ANONYMOUS_TENANT;
    // 2. Send it, retrying a fleet that is still down, within the request's deadline.
    const deadline = Date.now() + this.o.deadlineMs;
    let attempts = 0;
    let final: RequestRecord & { state: "done" | "failed" };
    for (;;) {
      attempts += 1;
      // Heartbeats while the fleet answers (a generation can take minutes); a rebalance seen here
      // only means the commit after storing may fail, and the redelivery finds the result.
      const beat = setInterval(() => void heartbeat().catch(() => undefined), 1000);
      const t0 = performance.now();
      const r = await this.send(q, Math.max(100, Math.min(this.o.timeoutMs, deadline - Date.now()))).finally(() => clearInterval(beat));
      metrics.replayAttemptSeconds.observe({ result: r.ok ? "ok" : r.transient ? "retry" : "refused" }, (performance.now() - t0) / 1000);
      if (r.ok) {
        final = { ...base, state: "done", finishedAt: Date.now(), status: r.status, response: r.body, attempts };
        break;
      }
      const backoff = Math.min(8000, 500 * 2 ** (attempts - 1));
      if (!r.transient || attempts >= this.o.maxAttempts || Date.now() + backoff >= deadline) {
        const why = r.transient && attempts < this.o.maxAttempts ? `${r.reason}; deadline of ${this.o.deadlineMs} ms reached` : r.reason;
        final = { ...base, state: "failed", finishedAt: Date.now(), status: r.status, reason: why, attempts };
        break;
      }
      log.info({ id: q.id, attempts, reason: r.reason }, "replay: fleet not serving yet; trying again");
      // Nothing ran: the claim goes back while this member waits, so one that takes over after a
      // crash runs it instead of giving it up as interrupted.
      const released = r.notRun === true && (await store.release(base).catch(() => false));
      await this.pause(backoff, heartbeat);
      // Only while the fleet can serve again.
      await this.waitWhile(async () => {
        const t = await this.o.tier.read();
        return !t.readable || t.level === "L4";
      }, heartbeat);
      await this.limiter.take();
      // Taken back (released above, or renewed): another member may have it now, or it is final.
      if (!(await store.claim(base, this.leaseMs, released ? ["pending"] : ["running"]).catch(() => false))) return;
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
    // The answer goes to its requester only; cached for that tenant alone, and only when it opted in.
    if (final.state === "done" && this.o.cache && this.o.cacheReplayedTenants.includes(tenant)) {
      const answer = answerText(q.kind, final.response);
      if (answer !== null) {
        try {
          await this.o.cache.put(normalizeRequest(q.kind, q.body), answer.text, { source: "replay", finishReason: answer.finish, scope: tenant });
        } catch (err) {
          log.warn({ id: q.id, err: (err as Error).message }, "replay: result not cached");
        }
      }
    }
    log.info({ id: q.id, state: final.state, attempts, status: final.status }, "replayed");
  }

  private async pause(ms: number, heartbeat: () => Promise<void>): Promise<void> {
    const until = Date.now() + ms;
    await this.waitWhile(async () => Date.now() < until, heartbeat);
  }

  /** `notRun`: the failure shows no model server got the request (the proxy's 502/503, the fallback's own answer, no connection). */
  private async send(q: QueuedRequest, timeoutMs: number): Promise<{ ok: true; status: number; body: unknown } | { ok: false; transient: boolean; notRun?: boolean; status?: number; reason: string }> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutMs);
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
      if (res.ok) return { ok: false, transient: true, notRun: true, status: res.status, reason: `answered by the fallback (${degraded}), not the fleet` };
      const msg = (body as { error?: { message?: string } })?.error?.message ?? (typeof body === "string" ? body.slice(0, 200) : "");
      return { ok: false, transient: TRANSIENT.has(res.status), notRun: res.status === 502 || res.status === 503, status: res.status, reason: `HTTP ${res.status}${msg ? `: ${msg}` : ""}` };
    } catch (err) {
      return { ok: false, transient: true, notRun: !ac.signal.aborted, reason: ac.signal.aborted ? `no answer within ${timeoutMs} ms` : `L1 unreachable (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message})` };
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
