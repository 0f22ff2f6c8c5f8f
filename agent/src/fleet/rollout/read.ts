/**
 * The leader's reads for a rollout period (runner.ts): the request, the `rollout` hash, and what
 * the gates need of each live node's record (`perf`, what it serves) and of the canaries (the
 * expectation for the new model key, which nodes answered on it). Records are read through the
 * inventory's record keys where there is one (node identities), as the repair round does.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../redis/keys";
import type { RegistrySnapshot } from "../redis/registry";
import { modelKey, normalizeDtype } from "../../node/evaluator/model-sameness";
import { readExpectation } from "../../node/canary/store";
import type { RolloutRequest, RolloutState } from "./types";
import { parsePerf, serves, type CanaryEvidence, type RolloutNode } from "./view";

/** Where each node's record is (null: none to read) and whether only those records are trusted (node identities). */
export interface RecordKeys {
  recordKey(nodeId: string): string | null;
  identities?: boolean;
  /** The inventory's nodes, with their cloud host (instance id) where known. */
  current?: readonly { nodeId: string; instanceId?: string | null }[] | null;
}

export function parseState(raw: string | undefined | null): RolloutState | null {
  if (!raw) return null;
  try {
    const s = JSON.parse(raw) as RolloutState;
    return s && typeof s.id === "string" && Array.isArray(s.steps) && typeof s.phase === "string" ? s : null;
  } catch {
    return null;
  }
}

const OPS: readonly string[] = ["start", "pause", "resume", "abort", "promote"];

/** A request as written (JSON); null when absent or not a request (named in `bad`). */
export function parseRequest(raw: string | null | undefined): { req: RolloutRequest | null; bad: string | null } {
  if (!raw) return { req: null, bad: null };
  try {
    const r = JSON.parse(raw) as RolloutRequest;
    if (!r || typeof r !== "object" || !OPS.includes(r.op) || typeof r.id !== "string" || r.id === "") return { req: null, bad: `not a rollout request (needs op ${OPS.join("|")} and an id): ${raw.slice(0, 120)}` };
    return { req: r, bad: null };
  } catch {
    return { req: null, bad: `not JSON: ${raw.slice(0, 120)}` };
  }
}

/** What identifies one request: acted on once (`pause` and `start` of one rollout share its id). */
export function requestKey(r: RolloutRequest): string {
  return `${r.op}:${r.id}:${r.at ?? ""}`;
}

/** Each live node as the gates see it: status from the snapshot, what it serves and its perf from its record. */
export async function readNodes(redis: Redis, keys: RedisKeys, snap: RegistrySnapshot, rk: RecordKeys | null): Promise<{ nodes: RolloutNode[]; models: Map<string, string> }> {
  const alive = snap.nodes.filter((n) => n.alive);
  const at = alive.map((n) => (rk ? rk.recordKey(n.nodeId) : keys.node(n.nodeId)));
  const p = redis.pipeline();
  for (const k of at) if (k) p.hmget(k, "perf", "modelRevision", "model", "modelDtype", "maxContext");
  const got = (await p.exec()) ?? [];
  let i = 0;
  const models = new Map<string, string>();
  const nodes = alive.map((n, j): RolloutNode => {
    const row = at[j] ? ((got[i++]?.[1] ?? []) as (string | null)[]) : [];
    const [perfRaw, rev, model, dtype, ctx] = row;
    const perf = parsePerf(perfRaw);
    const revision = rev || perf?.revision || "";
    if (model) models.set(n.nodeId, modelKey({ id: model, revision: revision || null, dtype: normalizeDtype(dtype), maxContext: ctx ? Number(ctx) || null : null }));
    return {
      nodeId: n.nodeId, az: n.az, alive: true, status: n.status, takesTraffic: n.takesTraffic,
      gpus: Math.min(n.gpus, n.gpusExpected || n.gpus), revision, hard: n.hard, perf,
    };
  });
  return { nodes, models };
}

/** The canary evidence for the new revision: its model key, the leader's expectation for it, and who answered on it. */
export async function readCanary(redis: Redis, keys: RedisKeys, state: RolloutState, nodes: readonly RolloutNode[], models: ReadonlyMap<string, string>, rk: RecordKeys | null): Promise<CanaryEvidence> {
  const onNew = nodes.filter((n) => serves(n, state.to.revision));
  const key = onNew.map((n) => models.get(n.nodeId)).find((k): k is string => !!k) ?? null;
  if (!key) return { modelKey: null, expectation: null, answered: [] };
  const expectation = await readExpectation(redis, keys, key);
  const ids = onNew.map((n) => n.nodeId);
  let raw: (string | null)[];
  if (rk?.identities) {
    const p = redis.pipeline();
    const at = ids.map((id) => rk.recordKey(id));
    for (const k of at) if (k) p.hget(k, "canary");
    const got = (await p.exec()) ?? [];
    let i = 0;
    raw = at.map((k) => (k ? ((got[i++]?.[1] as string | null) ?? null) : null));
  } else raw = ids.length ? await redis.hmget(keys.canaryAnswers, ...ids) : [];
  const answered = ids.filter((_, i) => {
    try {
      return raw[i] ? (JSON.parse(raw[i]!) as { model?: string }).model === key : false;
    } catch {
      return false;
    }
  });
  return { modelKey: key, expectation, answered };
}

/** The revision most serving nodes report (ties: the smaller name); null when none reports one. */
export function majorityRevision(nodes: readonly RolloutNode[]): string | null {
  const count = new Map<string, number>();
  for (const n of nodes) if (n.alive && n.takesTraffic && n.revision) count.set(n.revision, (count.get(n.revision) ?? 0) + 1);
  return [...count.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]?.[0] ?? null;
}
