/**
 * What `llm-ha status` shows, read from Redis in a few round trips: the registry snapshot
 * (the controller's own `readSnapshot`; with node identities, each node's record found by the
 * digest the leader publishes: bound-records.ts), each node's heartbeat time and load score, the
 * leader's lease and fencing tokens, the published AZ states, tier, standby desired state
 * and suspect checks, the rollout (`rollout`, `rollout:request`), and the last events. `FleetView` is also the `--json` document
 * (docs/status.md): add fields freely, bump `STATUS_JSON_VERSION` when one changes meaning.
 *
 * Ages are measured against Redis's clock (`TIME`): heartbeat scores and stream ids are
 * Redis time, and the leader's `updatedAt` fields come from hosts kept close to it, while
 * the operator's laptop may be minutes off.
 */
import { repairsView } from "./repairs";
import { rolloutView } from "./rollout";
import type { Redis } from "ioredis";
import { DEFAULT_CONTROLLER_SETTINGS, AZ_STATES, TIER_LEVELS, type AzState, type TierLevel } from "../../fleet/controller/state";
import type { RedisKeys } from "../../fleet/redis/keys";
import { parseLeaseValue } from "../../fleet/redis/lease";
import { findBoundRecords } from "../../fleet/redis/bound-records";
import { readSnapshot } from "../../fleet/redis/registry";
import { FENCE_FIELDS } from "../../fleet/redis/snapshot";
import { eventRow, num } from "./events";
import { STATUS_JSON_VERSION, type FallbackView, type ModelsView, type ActionView, type ActuationView, type AzPublished, type AzRow, type FleetView, type NodeRow, type PracticeView, type ReadFleetViewOptions } from "./types";

/** Where `llm-ha fallback` publishes its queue (agent/src/edge/fallback/command.ts): {depth, topic, updatedAt}. */
export function fallbackQueueKey(cluster: string): string {
  return `llmha:${cluster}:fallback:queue`;
}
/** The fallback samples every 2 s: a depth older than this is no longer being sampled. */
export const FALLBACK_QUEUE_STALE_MS = 10_000;

/** Redis answered the read with an error (or aborted it). */
export class StatusReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StatusReadError";
  }
}


function ageOf(now: number, t: number | null): number | null {
  return t === null ? null : Math.max(0, now - t);
}

const collator = new Intl.Collator("en", { numeric: true });

type Reply<T> = [Error | null, T];

/** Reads the whole view. Throws when Redis does not answer (the command reports it). */
export async function readFleetView(redis: Redis, keys: RedisKeys, o: ReadFleetViewOptions = {}): Promise<FleetView> {
  const staleAfterMs = o.staleAfterMs ?? DEFAULT_CONTROLLER_SETTINGS.staleAfterMs;
  const first = await redis
    .multi()
    .time()
    .get(keys.leader)
    .pttl(keys.leader)
    .hgetall(keys.fenceLast)
    .hgetall(keys.tier)
    .hgetall(keys.standbyWake)
    .hgetall(keys.suspect)
    .smembers(keys.azs)
    .xrevrange(keys.events, "+", "-", "COUNT", o.events ?? 10)
    .exists(keys.members, keys.azs, keys.leader, keys.tier, keys.events, keys.fenceLast)
    .hgetall(keys.actuation)
    .hgetall(fallbackQueueKey(keys.cluster))
    .hgetall(`${keys.prefix}practice`)
    .hgetall(`${keys.prefix}models`)
    .get(keys.practiceRequest)
    .hgetall(keys.inventory)
    .hgetall(keys.members)
    .hgetall(keys.repairPlan)
    .hgetall(keys.repairActive)
    .hgetall(keys.rollout)
    .get(keys.rolloutRequest)
    .exec();
  if (!first) throw new StatusReadError("the status read was aborted");
  for (const [err] of first) if (err) throw err;
  const r = first.map(([, v]) => v);
  const [sec, usec] = r[0] as [string, string];
  const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  const lease = parseLeaseValue((r[1] as string | null) ?? "");
  const pttl = r[2] as number;
  const fence = r[3] as Record<string, string>;
  const tierH = r[4] as Record<string, string>;
  const standbyH = r[5] as Record<string, string>;
  const suspectH = r[6] as Record<string, string>;
  const azSet = r[7] as string[];
  const rawEvents = r[8] as [string, string[]][];
  const present = r[9] as number;

  // With node identities, each node's record is the key whose suffix matches its published digest.
  const bound = await findBoundRecords(redis, keys);
  const recordKey = (id: string): string | null => (bound ? bound.keys.get(id) ?? null : keys.node(id));
  // With an inventory the leader reads (its fenced hash), the nodes and AZs are the inventory's,
  // not what agents write in `members` and `azs`: a member it does not list is counted, not shown.
  const listed = Object.entries(r[15] as Record<string, string>).filter(([id]) => !FENCE_FIELDS.includes(id));
  const inventoryAzs = new Set(listed.map(([, v]) => v.split("|")[0]).filter(Boolean));
  const from = listed.length ? { members: keys.inventory, knownAzs: inventoryAzs } : undefined;
  // A set, not a scan of the list per member: at 5,000 nodes that scan was 12 million comparisons a read.
  const listedIds = new Set(listed.map(([id]) => id));
  const notListed = from ? Object.keys(r[16] as Record<string, string>).filter((id) => !listedIds.has(id)).sort() : [];
  const snap = await readSnapshot(redis, keys, 1000, bound ? recordKey : undefined, from);
  const ids = snap.nodes.map((n) => n.nodeId);
  const azNames = new Set([...(from ? inventoryAzs : azSet), ...snap.nodes.map((n) => n.az)]);
  if (standbyH.az) azNames.add(standbyH.az);
  const azList = [...azNames].sort((a, b) => collator.compare(a, b));

  const p = redis.pipeline();
  for (const az of azList) p.hgetall(keys.azState(az));
  // The last heartbeat of a live node is in `nodes`, of a dead one in `dead`.
  if (ids.length) p.zmscore(keys.nodes, ...ids);
  if (ids.length) p.zmscore(keys.dead, ...ids);
  // A node with no record key (not enrolled) is not alive: what is read for it here is not shown.
  for (const n of snap.nodes) p.hmget(recordKey(n.nodeId) ?? keys.node(n.nodeId), "loadScore", "model", "modelRevision", "modelDtype", "maxContext");
  const second = ((await p.exec()) ?? []) as Reply<unknown>[];
  for (const [err] of second) if (err) throw err;
  const azStates = second.slice(0, azList.length).map(([, v]) => v as Record<string, string>);
  const live = ids.length ? (second[azList.length][1] as (string | null)[]) : [];
  const dead = ids.length ? (second[azList.length + 1][1] as (string | null)[]) : [];
  const beats = ids.map((_, i) => live[i] ?? dead[i] ?? null);
  const extras = second.slice(azList.length + (ids.length ? 2 : 0)).map(([, v]) => v as (string | null)[]);

  const nodes: NodeRow[] = snap.nodes.map((n, i) => {
    const beat = num(beats[i]);
    return {
      id: n.nodeId,
      az: n.az,
      status: n.status,
      phase: n.phase,
      weight: n.weight,
      loadScore: n.alive ? num(extras[i]?.[0]) : null,
      gpus: n.gpus,
      gpusExpected: n.gpusExpected,
      soft: n.soft,
      hard: n.hard,
      model: n.alive ? extras[i]?.[1] || null : null,
      modelRevision: n.alive ? extras[i]?.[2] || null : null,
      modelDtype: n.alive ? extras[i]?.[3] || null : null,
      maxContext: n.alive ? num(extras[i]?.[4]) : null,
      alive: n.alive,
      takesTraffic: n.takesTraffic,
      lastHeartbeatAt: beat,
      heartbeatAgeMs: ageOf(now, beat),
    };
  });

  const azs: AzRow[] = azList.map((az, i) => {
    const h = azStates[i];
    const updatedAt = num(h.updatedAt);
    const published: AzPublished | null = (AZ_STATES as readonly string[]).includes(h.state)
      ? {
          state: h.state as AzState,
          healthyCapacity: num(h.healthyCapacity) ?? 0,
          totalCapacity: num(h.totalCapacity) ?? 0,
          nodes: num(h.nodes) ?? 0,
          nodesIn: num(h.nodesIn) ?? 0,
          since: num(h.since),
          updatedAt,
          ageMs: ageOf(now, updatedAt),
          token: num(h.token),
          stale: !(now - (updatedAt ?? 0) <= staleAfterMs),
        }
      : null;
    return {
      az,
      published,
      standby: standbyH.az === az,
      nodes: nodes.filter((n) => n.az === az).sort((a, b) => collator.compare(a.id, b.id)),
    };
  });

  const tierAt = num(tierH.updatedAt);
  const standbyAt = num(standbyH.updatedAt);
  const suspectAt = num(suspectH.updatedAt);
  return {
    version: STATUS_JSON_VERSION,
    cluster: keys.cluster,
    redis: o.url ?? "",
    now,
    leader: {
      holder: lease?.holder ?? null,
      token: lease?.token ?? null,
      ttlMs: lease && pttl >= 0 ? pttl : null,
      highestToken: num(fence.token),
      highestHolder: fence.holder || null,
    },
    tier: (TIER_LEVELS as readonly string[]).includes(tierH.level)
      ? {
          level: tierH.level as TierLevel,
          reason: tierH.reason ?? "",
          token: num(tierH.token),
          updatedAt: tierAt,
          ageMs: ageOf(now, tierAt),
          stale: !(now - (tierAt ?? 0) <= staleAfterMs),
        }
      : null,
    standby: standbyH.az
      ? { az: standbyH.az, wake: standbyH.wake === "1", reason: standbyH.reason ?? "", token: num(standbyH.token), updatedAt: standbyAt, ageMs: ageOf(now, standbyAt), ...(standbyH.capacity === "unavailable" ? { unavailable: standbyH.capacityReason ?? "" } : {}), ...(standbyH.capacity === "backoff" ? { backoff: standbyH.capacityReason ?? "" } : {}) }
      : null,
    actuation: actuationView(r[10] as Record<string, string>, now),
    fallback: fallbackView(tierH.level, r[11] as Record<string, string>, now),
    ...practiceView(r[12] as Record<string, string>, r[14] as string | null),
    models: modelsView(r[13] as Record<string, string>, now, staleAfterMs),
    rollout: rolloutView(r[19] as Record<string, string>, r[20] as string | null, now),
    repairs: repairsView(r[17] as Record<string, string>, now, staleAfterMs, r[18] as Record<string, string>),
    suspect: suspectH.updatedAt
      ? { codes: suspectH.codes ? suspectH.codes.split(",") : [], counts: parseCounts(suspectH.counts), updatedAt: suspectAt, ageMs: ageOf(now, suspectAt) }
      : null,
    ...(bound ? { identities: { enrolled: bound.keys.size, unboundRecords: bound.unbound.count, unboundNodes: bound.unbound.nodes.slice(0, 20) } } : {}),
    ...(from ? { inventory: { nodes: listed.length, notListed: notListed.length, notListedNodes: notListed.slice(0, 20).map((id) => id.slice(0, 64)) } } : {}),
    azs,
    events: rawEvents.map(([id, flat]) => eventRow(id, flat, now, keys)),
    empty: present === 0,
  };
}

function parseCounts(s: string | undefined): Record<string, number> {
  try {
    const v: unknown = JSON.parse(s ?? "{}");
    if (!v || typeof v !== "object") return {};
    return Object.fromEntries(Object.entries(v).filter(([, n]) => typeof n === "number")) as Record<string, number>;
  } catch {
    return {};
  }
}

/** The leader's last action of one kind, from the `actuation` hash. */
function actionOf(h: Record<string, string>, slot: "standby" | "shift", now: number): ActionView | null {
  const action = h[`${slot}.action`];
  if (!action) return null;
  const at = num(h[`${slot}.at`]);
  return {
    action,
    az: h[`${slot}.az`] ?? "",
    outcome: h[`${slot}.outcome`] ?? "",
    detail: h[`${slot}.detail`] ?? "",
    reason: h[`${slot}.reason`] ?? "",
    token: num(h[`${slot}.token`]),
    at,
    ageMs: ageOf(now, at),
  };
}

function fallbackView(level: string | undefined, q: Record<string, string>, now: number): FallbackView {
  const at = num(q.updatedAt);
  const depth = num(q.depth);
  return {
    l4: (TIER_LEVELS as readonly string[]).includes(level ?? "") ? level === "L4" : null,
    queue: q.topic || q.depth !== undefined
      ? { depth: depth !== null && depth >= 0 ? depth : null, topic: q.topic ?? "", updatedAt: at, ageMs: ageOf(now, at), stale: !(now - (at ?? 0) <= FALLBACK_QUEUE_STALE_MS) }
      : null,
  };
}

function actuationView(h: Record<string, string>, now: number): ActuationView | null {
  if (!h.actuator) return null;
  const shift = actionOf(h, "shift", now);
  return {
    actuator: h.actuator,
    standby: actionOf(h, "standby", now),
    shift: shift ? { ...shift, expiresAt: num(h["shift.expiresAt"]) } : null,
    shiftAz: h.shiftAz || null,
    ...(h["standby.phase"]
      ? { wake: { phase: h["standby.phase"], step: h["standby.step"] ?? "", groups: h["standby.groups"] ?? "", failure: h["standby.failure"] ?? "", servedMs: num(h["standby.servedMs"]) } }
      : {}),
  };
}

/** The leader's `models` hash: `outliers` is `node=model,…`, `differs` a JSON object node → `revision+dtype`. */
function modelsView(h: Record<string, string>, now: number, staleAfterMs: number): ModelsView | null {
  if (!h || h.updatedAt === undefined) return null;
  let differs: Record<string, unknown> = {};
  try {
    const d: unknown = JSON.parse(h.differs ?? "{}");
    if (d && typeof d === "object" && !Array.isArray(d)) differs = d as Record<string, unknown>;
  } catch {
    differs = {};
  }
  const outliers = (h.outliers ?? "").split(",").filter(Boolean).map((pair) => {
    const at = pair.indexOf("=");
    const nodeId = at < 0 ? pair : pair.slice(0, at);
    const d = differs[nodeId];
    return { nodeId, model: at < 0 ? "" : pair.slice(at + 1), differs: typeof d === "string" && d ? d.split("+") : [] };
  });
  const at = num(h.updatedAt);
  return {
    majority: h.majority || null,
    agreeing: num(h.agreeing),
    outliers,
    outlierCount: num(h.outlierCount) ?? outliers.length,
    outlierAzs: (h.outlierAzs ?? "").split(",").filter(Boolean),
    updatedAt: at,
    ageMs: ageOf(now, at),
    stale: !(now - (at ?? 0) <= staleAfterMs),
  };
}

/**
 * The `practice` hash and an operator's request (`practice:request`): the request is pending
 * until the leader acts on it, which moves `firedAt` to it (or past it).
 */
function practiceView(h: Record<string, string>, request: string | null): { practice?: PracticeView } {
  const asked = num(request);
  const requestedAt = asked !== null && asked > (num(h.firedAt) ?? 0) ? asked : null;
  if (Object.keys(h ?? {}).length === 0 && requestedAt === null) return {};
  return { practice: { outcome: h.lastOutcome || null, at: num(h.lastAt), wakeMs: num(h.lastWakeMs), reason: h.lastReason ?? "", runningSince: num(h.startedAt), requestedAt } };
}


/**
 * Other llm-ha clusters in this Redis (from their key names), for the "empty cluster"
 * message. Bounded: at most `maxCalls` SCAN calls, so a huge keyspace costs little.
 */
export async function findClusters(redis: Redis, o: { maxCalls?: number; limit?: number } = {}): Promise<string[]> {
  const found = new Set<string>();
  let cursor = "0";
  let calls = 0;
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", "llmha:*", "COUNT", 1000);
    for (const k of batch) {
      const m = /^llmha:([^:]+):/.exec(k);
      if (m) found.add(m[1]);
    }
    cursor = next;
    calls += 1;
  } while (cursor !== "0" && calls < (o.maxCalls ?? 50) && found.size < (o.limit ?? 20));
  return [...found].sort((a, b) => collator.compare(a, b)).slice(0, o.limit ?? 20);
}
