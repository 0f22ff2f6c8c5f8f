/**
 * Canary answers and expectations in Redis (keys in `redis/keys.ts`): each agent writes
 * its latest answers, the leader learns and publishes the expectations (fenced, as the `models`
 * hash), an operator records one (`llm-ha canary record`), and each agent reads the one for the
 * model its server serves.
 */
import type { Redis } from "ioredis";
import { findBoundRecords, readRecordField } from "../../fleet/redis/bound-records";
import type { FencedWriter } from "../../fleet/redis/fenced";
import type { RedisKeys } from "../../fleet/redis/keys";
import type { CanaryAnswer, CanaryTolerance } from "./answers";
import { learnExpectations, type Expectation, type NodeAnswers } from "./learn";

/** Fields of the expectation hashes are `m:<model key>`; the rest are the fenced writer's own. */
const FIELD = "m:";

/** A stored value that is not what it should be (named, so a bad write shows where it came from). */
export class CanaryStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CanaryStoreError";
  }
}

/** JSON has no NaN: a logprob written as null comes back NaN (it was not finite). */
function reviveAnswer(a: CanaryAnswer): CanaryAnswer {
  return { ...a, logprobs: a.logprobs ? a.logprobs.map((x) => (typeof x === "number" ? x : Number.NaN)) : null };
}

function reviveAll(m: Record<string, CanaryAnswer>): Record<string, CanaryAnswer> {
  return Object.fromEntries(Object.entries(m).map(([k, a]) => [k, reviveAnswer(a)]));
}

function parseExpectations(h: Record<string, string>): Record<string, Expectation> {
  const out: Record<string, Expectation> = {};
  for (const [f, v] of Object.entries(h)) {
    if (!f.startsWith(FIELD)) continue;
    try {
      const e = JSON.parse(v) as Expectation;
      out[f.slice(FIELD.length)] = { ...e, answers: reviveAll(e.answers) };
    } catch {
      // An unreadable entry is no expectation: the fleet learns it again.
    }
  }
  return out;
}

/** An agent's latest answers, per prompt id, for the model key its server serves. */
export async function publishAnswers(redis: Redis, keys: RedisKeys, n: NodeAnswers, recordKey?: string): Promise<void> {
  const v = JSON.stringify({ az: n.az, model: n.model, at: n.at, answers: n.answers });
  // With node identities, in the node's own record (field `canary`): no other node can write them.
  if (recordKey) await redis.hset(recordKey, "canary", v);
  else await redis.hset(keys.canaryAnswers, n.nodeId, v);
}

/** The expectation for one model key, or null when none is learned or recorded. */
export async function readExpectation(redis: Redis, keys: RedisKeys, model: string): Promise<Expectation | null> {
  const v = await redis.hget(keys.canaryExpect, FIELD + model);
  return v ? (parseExpectations({ [FIELD + model]: v })[model] ?? null) : null;
}

/** Every published expectation (status, the CLI). */
export async function readExpectations(redis: Redis, keys: RedisKeys): Promise<Record<string, Expectation>> {
  return parseExpectations(await redis.hgetall(keys.canaryExpect));
}

/** Every node's answers written within `maxAgeMs` (older ones are a node gone or a model changed). */
export async function readNodeAnswers(redis: Redis, keys: RedisKeys, now: number, maxAgeMs: number): Promise<NodeAnswers[]> {
  // With node identities, each node's answers are in its own record (field `canary`), found by the
  // digest the leader publishes; the shared hash, which any node may write, is not read.
  const bound = await findBoundRecords(redis, keys);
  if (!bound) return parseNodeAnswers(await redis.hgetall(keys.canaryAnswers), now, maxAgeMs);
  const ids = [...bound.keys.keys()];
  const answers = await readRecordField(redis, ids.map((id) => bound.keys.get(id)!), "canary");
  const own: Record<string, string> = {};
  ids.forEach((id, i) => {
    if (answers[i] !== null) own[id] = answers[i]!;
  });
  return parseNodeAnswers(own, now, maxAgeMs);
}

function parseNodeAnswers(h: Record<string, string>, now: number, maxAgeMs: number): NodeAnswers[] {
  const out: NodeAnswers[] = [];
  for (const [nodeId, v] of Object.entries(h)) {
    try {
      const x = JSON.parse(v) as Omit<NodeAnswers, "nodeId">;
      if (now - x.at <= maxAgeMs) out.push({ ...x, nodeId, answers: reviveAll(x.answers) });
    } catch {
      // Skipped: the node writes it again next round.
    }
  }
  return out;
}

/**
 * Who may vote: the leader's inventory (node id → its AZ). Answers under any other id are no
 * vote, pruned from `canary:answers`, and named in `outsiders` unless `formerly` listed them (a
 * node deleted since: its answers are leftovers, not a forgery).
 */
export interface CanaryVoters {
  nodes: ReadonlyMap<string, string>;
  formerly?: ReadonlySet<string>;
  /**
   * With node identities: each voter's record key (null: not enrolled, no vote). Its answers
   * are read there (field `canary`), never from `canary:answers`, where any node may write.
   */
  recordKey?: (nodeId: string) => string | null;
}

/**
 * The leader's step: learn from the fleet's recent answers and publish every expectation, fenced.
 * With `voters` only the inventory's nodes vote, one each, in their inventory AZ: answers written
 * under made-up ids (any agent may write a field of the hash) neither steer an expectation nor cap it.
 */
export async function publishExpectations(
  redis: Redis,
  keys: RedisKeys,
  writer: FencedWriter,
  tol: CanaryTolerance,
  now: number,
  maxAgeMs: number,
  voters?: CanaryVoters,
): Promise<{ accepted: boolean; expectations: Record<string, Expectation>; outsiders: string[] }> {
  const [raw, prev, rec] = await Promise.all([redis.hgetall(keys.canaryAnswers), redis.hgetall(keys.canaryExpect), redis.hgetall(keys.canaryRecorded)]);
  let nodes = parseNodeAnswers(raw, now, maxAgeMs);
  const outsiders: string[] = [];
  if (voters?.recordKey) {
    const ids = [...voters.nodes.keys()];
    const at = ids.map((id) => voters.recordKey!(id));
    const p = redis.pipeline();
    for (const k of at) if (k) p.hget(k, "canary");
    const got = (await p.exec()) ?? [];
    let i = 0;
    const own: Record<string, string> = {};
    ids.forEach((id, j) => {
      if (!at[j]) return;
      const v = got[i++]?.[1];
      if (typeof v === "string") own[id] = v;
    });
    nodes = parseNodeAnswers(own, now, maxAgeMs).map((n) => ({ ...n, az: voters.nodes.get(n.nodeId)! }));
    // Every field of the shared hash is someone else's word now: out; the ids the inventory does not list are named.
    if (Object.keys(raw).length) await redis.hdel(keys.canaryAnswers, ...Object.keys(raw));
    for (const id of Object.keys(raw)) if (!voters.nodes.has(id) && !voters.formerly?.has(id)) outsiders.push(id);
  }
  if (voters && !voters.recordKey) {
    nodes = nodes.filter((n) => voters.nodes.has(n.nodeId)).map((n) => ({ ...n, az: voters.nodes.get(n.nodeId)! }));
    const stale = Object.keys(raw).filter((id) => !voters.nodes.has(id));
    for (const id of stale) if (!voters.formerly?.has(id)) outsiders.push(id);
    if (stale.length) await redis.hdel(keys.canaryAnswers, ...stale);
  }
  const expectations = learnExpectations(nodes, parseExpectations(prev), parseExpectations(rec), tol, now);
  const fields = Object.fromEntries(Object.entries(expectations).map(([m, e]) => [FIELD + m, JSON.stringify(e)]));
  if (Object.keys(fields).length === 0) return { accepted: true, expectations, outsiders };
  const r = await writer.hset(keys.canaryExpect, { ...fields, updatedAt: now });
  return { accepted: r.accepted, expectations, outsiders };
}

/**
 * An operator's record (`llm-ha canary record`): the answers of one node (`from`), or the fleet's
 * current majority, become the expectation of `model`. Returns what was recorded.
 */
export async function recordExpectation(redis: Redis, keys: RedisKeys, model: string, answers: Record<string, CanaryAnswer>, now: number): Promise<Expectation> {
  if (Object.keys(answers).length === 0) throw new CanaryStoreError(`no canary answers to record for ${model}: no node serving it has answered canaries yet`);
  const e: Expectation = { source: "operator", at: now, answers, nodes: 0, agreeing: 0, disagreeing: [], capped: false };
  // The leader publishes it (fenced) with its next step.
  await redis.hset(keys.canaryRecorded, FIELD + model, JSON.stringify(e));
  return e;
}
