/**
 * Queuing one request, at most once: the tenant's `Idempotency-Key` is bound to one request id
 * before anything is produced (a repeat gets that request's state or result, never a second
 * run); the record is `accepting` while the broker has not acknowledged, `pending` once it has;
 * a request answered 503 is cancelled in Redis first, so a late acknowledgement is never
 * replayed. See `results.ts` for the states.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { IDEMPOTENCY_HEADER, RESULT_ROUTE_PREFIX } from "../../../../contracts/edge";
import type { Logger } from "../../util/log";
import { errorBody, HttpError, sendJson } from "./http";
import type { FallbackMetrics } from "./metrics";
import type { RequestKind } from "./normalize";
import { QueueUnavailableError, type QueuedRequest, type RequestQueue } from "./queue";
import type { RequestRecord, ResultStore } from "./results";

export interface AcceptDeps {
  queue: RequestQueue;
  store: ResultStore | null;
  metrics: FallbackMetrics;
  log: Logger;
  /** Called with the id once the broker acknowledged (the service remembers what it queued). */
  remember(id: string, tenant: string): void;
}

export interface AcceptRequest {
  tenant: string;
  kind: RequestKind;
  path: QueuedRequest["path"];
  body: Record<string, unknown>;
  model: string;
}

/** The outcome the service answers: `queued` (202 sent here), `repeat` (answered here), or why it is a 503. */
export type AcceptOutcome = { kind: "answered" } | { kind: "unavailable"; reason: string };

/** The client's idempotency key, checked: 1–255 visible ASCII characters. */
export function idempotencyKeyOf(req: IncomingMessage): string | null {
  const v = req.headers[IDEMPOTENCY_HEADER];
  if (v === undefined) return null;
  if (typeof v !== "string" || !/^[\x21-\x7e]{1,255}$/.test(v)) throw new HttpError(400, `${IDEMPOTENCY_HEADER} must be 1–255 visible ASCII characters`, "invalid_idempotency_key");
  return v;
}

export function queuedBody(id: string, state = "queued"): { body: unknown; headers: Record<string, string> } {
  const location = `${RESULT_ROUTE_PREFIX}${id}`;
  return { body: { id, object: "llmha.request", state, location }, headers: { location, "x-llmha-degraded": "queued", "x-llmha-request-id": id } };
}

/** A repeat of an idempotency key: the bound request's state (202), its result (the fleet's answer), or 409 while it is being accepted. */
function answerRepeat(res: ServerResponse, rec: RequestRecord | null, id: string): void {
  const h = { "x-llmha-request-id": id, "x-llmha-idempotent-replay": "true" };
  if (rec === null || rec.state === "accepting") {
    return sendJson(res, 409, errorBody("a request with this idempotency key is being accepted; try again", "idempotency_in_progress"), { ...h, "retry-after": "1" });
  }
  if (rec.state === "pending" || rec.state === "running") {
    const q = queuedBody(id);
    return sendJson(res, 202, q.body, { ...q.headers, ...h });
  }
  if (rec.state === "done") return sendJson(res, rec.status ?? 200, rec.response, { ...h, "x-llmha-degraded": "replayed" });
  const status = rec.status !== undefined && rec.status >= 400 && rec.status < 500 ? rec.status : 502;
  sendJson(res, status, errorBody(`the queued request failed: ${rec.reason ?? "failed"}`, "queued_request_failed", "api_error"), h);
}

/**
 * A repeat of a key already bound (to a request that was not cancelled) is answered here, before
 * the cache or a provider could answer it differently; true when answered.
 */
export async function answerIfRepeat(store: ResultStore | null, tenant: string, idemKey: string | null, res: ServerResponse): Promise<boolean> {
  if (idemKey === null || !store) return false;
  const id = await store.boundRequest(tenant, idemKey).catch(() => null);
  if (id === null) return false;
  const prior = await store.get(id).catch(() => null);
  if (prior?.state === "cancelled") return false;
  answerRepeat(res, prior, id);
  return true;
}

/** Queues `r` (or answers the repeat of its idempotency key). */
export async function acceptQueued(d: AcceptDeps, r: AcceptRequest, idemKey: string | null, res: ServerResponse): Promise<AcceptOutcome> {
  const id = `req_${randomUUID().replace(/-/g, "")}`;
  const receivedAt = Date.now();
  const rec: Omit<RequestRecord, "state"> = { id, tenant: r.tenant, model: r.model, queuedAt: receivedAt };
  if (idemKey !== null) {
    // Without Redis a key cannot be honoured: refuse rather than risk a second run.
    if (!d.store) return { kind: "unavailable", reason: "idempotency keys need the result store (Redis), which is not configured" };
    let bound: string;
    for (let i = 0; ; i++) {
      try {
        bound = await d.store.bindIdempotencyKey(r.tenant, idemKey, id);
      } catch {
        return { kind: "unavailable", reason: "the result store (Redis) cannot be reached to check the idempotency key" };
      }
      if (bound === id) break;
      const prior = await d.store.get(bound).catch(() => null);
      // A cancelled request (answered 503) never runs: the retry is a new request under the same key.
      if (prior?.state === "cancelled" && i === 0) {
        await d.store.releaseIdempotencyKey(r.tenant, idemKey, bound).catch(() => undefined);
        continue;
      }
      answerRepeat(res, prior, bound);
      return { kind: "answered" };
    }
  }
  let recorded = false;
  if (d.store) {
    recorded = await d.store.accepting(rec).catch((err: unknown) => {
      d.log.warn({ id, err: (err as Error).message }, "fallback: accepting record not written (Redis); queued without one");
      return false;
    });
  }
  const cancel = async (reason: string): Promise<AcceptOutcome> => {
    // Cancelled before the 503 goes out: a late acknowledgement finds it cancelled and the replay skips it.
    const stillOurs = await cancelRecord(d, rec, reason);
    if (!stillOurs) return queued();
    if (idemKey !== null) await d.store?.releaseIdempotencyKey(r.tenant, idemKey, id).catch(() => undefined);
    return { kind: "unavailable", reason };
  };
  const queued = (): AcceptOutcome => {
    d.remember(id, r.tenant);
    d.metrics.requests.inc({ outcome: "queued" });
    const q = queuedBody(id);
    sendJson(res, 202, q.body, q.headers);
    return { kind: "answered" };
  };
  try {
    await d.queue.enqueue({ id, kind: r.kind, path: r.path, body: r.body, receivedAt, tenant: r.tenant });
  } catch (err) {
    d.metrics.queueErrors.inc();
    const reason = err instanceof QueueUnavailableError ? err.message : String(err);
    d.log.warn({ id, err: reason }, "fallback: queue unavailable");
    return cancel(`the queue is unavailable (${reason})`);
  }
  if (recorded) {
    const ok = await d.store!.confirm(rec).catch(() => false);
    if (!ok) return cancel("the queued request could not be confirmed in the result store (Redis)");
  }
  return queued();
}

/**
 * Cancels the record; false when the replay already took it (it was queued after all). Redis
 * unreachable: the cancellation is retried in the background for a minute (a replay cannot
 * claim anything while Redis is down either).
 */
async function cancelRecord(d: AcceptDeps, rec: Omit<RequestRecord, "state">, reason: string): Promise<boolean> {
  if (!d.store) return true;
  const store = d.store;
  try {
    return await store.cancel(rec, reason);
  } catch {
    const until = Date.now() + 60_000;
    const retry = (): void => {
      store.cancel(rec, reason).catch(() => {
        if (Date.now() < until) setTimeout(retry, 1000).unref();
        else d.log.error({ id: rec.id }, "fallback: cancellation of a request answered 503 not written (Redis down for a minute)");
      });
    };
    setTimeout(retry, 1000).unref();
    return true;
  }
}
