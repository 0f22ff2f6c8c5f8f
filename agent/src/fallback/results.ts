/**
 * Results of queued requests, in Redis under `llmha:<cluster>:fallback:req:<id>` (JSON, with a
 * TTL): `pending` when queued, then `done` (the fleet's answer) or `failed` (with the reason).
 * A final state is never overwritten: a message delivered twice is answered once.
 */
import type { Redis } from "ioredis";

export type RequestState = "pending" | "done" | "failed";

export interface RequestRecord {
  id: string;
  state: RequestState;
  model: string;
  queuedAt: number;
  finishedAt?: number;
  /** HTTP status the fleet answered with (done, or failed with a status). */
  status?: number;
  /** The fleet's response body (done). */
  response?: unknown;
  /** Why it failed. */
  reason?: string;
  attempts?: number;
}

/** Sets a final state unless one is already there; returns 1 when written, 0 when it was final already. */
const FINISH_LUA = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and (rec.state == 'done' or rec.state == 'failed') then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
`;

type ResultsRedis = Redis & { llmhaFinish(key: string, value: string, ttlS: number): Promise<number> };

export class ResultStore {
  readonly prefix: string;
  private readonly r: ResultsRedis;

  constructor(redis: Redis, cluster: string, readonly ttlS = 86_400) {
    this.prefix = `llmha:${cluster}:fallback:req:`;
    if (!("llmhaFinish" in redis)) redis.defineCommand("llmhaFinish", { numberOfKeys: 1, lua: FINISH_LUA });
    this.r = redis as ResultsRedis;
  }

  async get(id: string): Promise<RequestRecord | null> {
    const raw = await this.r.get(this.prefix + id);
    return raw === null ? null : (JSON.parse(raw) as RequestRecord);
  }

  /** Records a queued request (never over a final state). */
  async pending(rec: Omit<RequestRecord, "state">): Promise<void> {
    await this.r.set(this.prefix + rec.id, JSON.stringify({ ...rec, state: "pending" }), "EX", this.ttlS, "NX");
  }

  /** Stores the final state; false when the id already had one (a duplicate delivery). */
  async finish(rec: RequestRecord & { state: "done" | "failed" }): Promise<boolean> {
    return (await this.r.llmhaFinish(this.prefix + rec.id, JSON.stringify(rec), this.ttlS)) === 1;
  }
}
