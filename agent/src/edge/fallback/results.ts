/**
 * Queued requests in Redis: one record per request id (JSON, with a TTL) and one mapping per
 * tenant's idempotency key. Every change of state is one Redis function (functions.ts), so the fallback that
 * answers the client and the replay consumer (of any AZ) never disagree:
 *
 * ```
 * accepting ──ack + confirm──▶ pending ──claim──▶ running ──▶ done | failed
 *     └──no ack (503) / not confirmed in time──▶ cancelled        (never run)
 * ```
 *
 * `accepting` is written before the message is produced; `pending` only after the broker's
 * acknowledgement, right before the 202. A 503 cancels first, so a late acknowledgement finds
 * the record cancelled and the replay skips it; a replay that finds `accepting` waits out the
 * producer's window and then cancels it itself. `running` holds a lease: a redelivery while it
 * lasts waits, one after it (the replaying fallback died mid-request) stores `failed` instead of
 * running the request a second time — at most once per request id and per idempotency key.
 *
 * | key (under `llmha:<cluster>:fallback:`) | type | holds |
 * |---|---|---|
 * | `req:<id>` | string | the record (JSON, metadata only), TTL `LLMHA_FALLBACK_RESULT_TTL_S` |
 * | `body:<id>` | string | the fleet's response body (JSON) of a `done` record, written in the same function call, same TTL; only the fallback's Redis role reads it (records of older versions carry it inside as `response`) |
 * | `idem:<tenant>:<sha256 of the key>` | string | the request id the tenant's `Idempotency-Key` names, same TTL |
 */
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { callFunction } from "../../fleet/redis/functions";
import { RedisKeys } from "../../fleet/redis/keys";
import { fallbackLibrary } from "../../fleet/redis/fallback-functions";

export type RequestState = "accepting" | "pending" | "running" | "cancelled" | "done" | "failed";
export type FinalState = "done" | "failed";

export interface RequestRecord {
  id: string;
  state: RequestState;
  /** The tenant that queued it: the only one its result is shown to (absent on records of older versions: the anonymous tenant). */
  tenant?: string;
  model: string;
  queuedAt: number;
  finishedAt?: number;
  /** HTTP status the fleet answered with (done, or failed with a status). */
  status?: number;
  /** The fleet's response body (done). */
  response?: unknown;
  /** Why it failed or was cancelled. */
  reason?: string;
  attempts?: number;
  /** `running`: epoch ms until which the replaying member holds it. */
  leaseUntil?: number;
}


/** The tenant of a request that came without one (no edge in front). */
export const ANONYMOUS_TENANT = "_anonymous";

export class ResultStore {
  readonly prefix: string;
  readonly bodyPrefix: string;
  private readonly idemPrefix: string;
  private readonly r: Redis;

  constructor(redis: Redis, cluster: string, readonly ttlS = 86_400) {
    const keys = new RedisKeys(cluster);
    this.prefix = keys.fallbackRequests;
    this.bodyPrefix = keys.fallbackBodies;
    this.idemPrefix = keys.fallbackIdempotency;
    this.r = redis;
  }

  /** The record with its body (`response`) put back in: from `body:<id>`, or inside the record (older versions). */
  async get(id: string): Promise<RequestRecord | null> {
    // One transaction: the record and its body as one function call left them.
    const out = await this.r.multi().get(this.prefix + id).get(this.bodyPrefix + id).exec();
    const [raw, body] = (out ?? []).map(([err, v]) => {
      if (err) throw err;
      return v as string | null;
    });
    if (raw === undefined) throw new Error("Redis aborted the read of a queued request's record");
    if (raw === null) return null;
    const rec = JSON.parse(raw) as RequestRecord;
    if (body !== null && rec.response === undefined) rec.response = JSON.parse(body) as unknown;
    return rec;
  }

  /** The state the record had and whether it moved to `rec` (its `response` goes to the body key). */
  private async move(rec: RequestRecord, from: ReadonlyArray<RequestState | "none">): Promise<{ found: RequestState | "none"; moved: boolean }> {
    const { response, ...meta } = rec;
    const args: Array<string | number> = [from.join(","), JSON.stringify(meta), this.ttlS];
    if (response !== undefined) args.push(JSON.stringify(response));
    const out = String(await callFunction(this.r, fallbackLibrary(), "move", [this.prefix + rec.id, this.bodyPrefix + rec.id], args));
    const i = out.lastIndexOf(":");
    return { found: out.slice(0, i) as RequestState | "none", moved: out.slice(i + 1) === "1" };
  }

  /** Before producing: the record exists and is not yet queued. */
  async accepting(rec: Omit<RequestRecord, "state">): Promise<boolean> {
    return (await this.move({ ...rec, state: "accepting" }, ["none"])).moved;
  }

  /** After the broker's ack, before the 202; false when it was cancelled meanwhile (answer 503 then). */
  async confirm(rec: Omit<RequestRecord, "state">): Promise<boolean> {
    return (await this.move({ ...rec, state: "pending" }, ["accepting"])).moved;
  }

  /**
   * Never to be run: the client was (or is about to be) told 503. True when cancelled now or
   * before; false when it is already queued or further (then it is answered as queued).
   */
  async cancel(rec: Omit<RequestRecord, "state">, reason: string): Promise<boolean> {
    const r = await this.move({ ...rec, state: "cancelled", reason, finishedAt: Date.now() }, ["accepting", "none"]);
    return r.moved || r.found === "cancelled";
  }

  /**
   * The replay takes it (from `pending`, or no record: queued while Redis was down) for
   * `leaseMs`; false when another state is there. `from: ["running"]` renews a lease it holds.
   */
  async claim(rec: Omit<RequestRecord, "state">, leaseMs: number, from: readonly RequestState[] = ["pending"]): Promise<boolean> {
    return (await this.move({ ...rec, state: "running", leaseUntil: Date.now() + leaseMs }, from[0] === "pending" ? [...from, "none"] : from)).moved;
  }

  /** Gives a claim back (`running` → `pending`) while nothing of it ran: a member that takes over runs it. */
  async release(rec: Omit<RequestRecord, "state">): Promise<boolean> {
    return (await this.move({ ...rec, state: "pending" }, ["running"])).moved;
  }

  /** Stores the final state over a running (or pending: interrupted) record; false when it had one, or was cancelled. */
  async finish(rec: RequestRecord & { state: FinalState }): Promise<boolean> {
    return (await this.move(rec, ["running", "pending", "accepting", "none"])).moved;
  }

  private idemKey(tenant: string, key: string): string {
    return `${this.idemPrefix}${tenant}:${createHash("sha256").update(key).digest("hex")}`;
  }

  /** Maps the tenant's idempotency key to `id` unless it maps to one already; returns the id it maps to. */
  async bindIdempotencyKey(tenant: string, key: string, id: string): Promise<string> {
    const k = this.idemKey(tenant, key);
    const set = await this.r.set(k, id, "EX", this.ttlS, "NX");
    return set === "OK" ? id : ((await this.r.get(k)) ?? id);
  }

  /** The request id the tenant's idempotency key names, or null. */
  async boundRequest(tenant: string, key: string): Promise<string | null> {
    return this.r.get(this.idemKey(tenant, key));
  }

  /** Frees the key of a cancelled request (the client's retry is a new request), if it still names `id`. */
  async releaseIdempotencyKey(tenant: string, key: string, id: string): Promise<void> {
    const k = this.idemKey(tenant, key);
    if ((await this.r.get(k)) === id) await this.r.del(k);
  }
}
