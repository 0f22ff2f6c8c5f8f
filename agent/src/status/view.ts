/**
 * What `llm-ha status` shows, read from Redis in a few round trips: the registry snapshot
 * (the controller's own `readSnapshot`), each node's heartbeat time and load score, the
 * leader's lease and fencing tokens, the published AZ states, tier, standby desired state
 * and suspect checks, and the last events. `FleetView` is also the `--json` document
 * (docs/status.md): add fields freely, bump `STATUS_JSON_VERSION` when one changes meaning.
 *
 * Ages are measured against Redis's clock (`TIME`): heartbeat scores and stream ids are
 * Redis time, and the leader's `updatedAt` fields come from hosts kept close to it, while
 * the operator's laptop may be minutes off.
 */
import type { Redis } from "ioredis";
import { DEFAULT_CONTROLLER_SETTINGS, AZ_STATES, TIER_LEVELS, type AzState, type TierLevel } from "../controller/state";
import type { RedisKeys } from "../redis/keys";
import { parseLeaseValue } from "../redis/lease";
import { readSnapshot, type NodeView } from "../redis/registry";

export const STATUS_JSON_VERSION = 1;

/** Redis answered the read with an error (or aborted it). */
export class StatusReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StatusReadError";
  }
}

export interface LeaderView {
  /** Holder id of the lease (`<nodeId>/<pid>`), null when no one leads. */
  holder: string | null;
  /** Fencing token of the current lease. */
  token: number | null;
  /** Milliseconds before the lease expires unless renewed. */
  ttlMs: number | null;
  /** Highest token Redis has accepted a write from (`fence:last`): lower ones are refused. */
  highestToken: number | null;
  highestHolder: string | null;
}

export interface TierView {
  level: TierLevel;
  reason: string;
  token: number | null;
  updatedAt: number | null;
  ageMs: number | null;
  /** Not refreshed by a leader for longer than the controller's stale limit (30 s). */
  stale: boolean;
}

export interface AzPublished {
  state: AzState;
  healthyCapacity: number;
  totalCapacity: number;
  nodes: number;
  nodesIn: number;
  /** Epoch ms the AZ entered this state. */
  since: number | null;
  updatedAt: number | null;
  ageMs: number | null;
  token: number | null;
  stale: boolean;
}

export interface NodeRow {
  id: string;
  az: string;
  /** `EXPIRED`: the node stopped heartbeating (its capacity still counts toward the AZ until forgotten). */
  status: NodeView["status"];
  phase: NodeView["phase"];
  /** Share of the HAProxy weight, 0–100. */
  weight: number;
  /** Lower is better (the `az:<az>:available` score); null when expired. */
  loadScore: number | null;
  gpus: number;
  gpusExpected: number;
  /** Soft reason codes: acted on, pending `fall`, or suppressed as suspect. */
  soft: string[];
  /** Hard reason codes: act at once. */
  hard: string[];
  model: string | null;
  alive: boolean;
  takesTraffic: boolean;
  /** Redis time (epoch ms) of the last heartbeat, null when unknown. */
  lastHeartbeatAt: number | null;
  heartbeatAgeMs: number | null;
}

export interface AzRow {
  az: string;
  /** The leader's publication (`az:<az>:state`); null when none (no leader yet, or a standby AZ scaled to zero). */
  published: AzPublished | null;
  /** This AZ is the standby AZ the leader may wake. */
  standby: boolean;
  nodes: NodeRow[];
}

export interface StandbyView {
  az: string;
  /** The leader's desired state: true = keep the standby AZ awake. */
  wake: boolean;
  reason: string;
  token: number | null;
  updatedAt: number | null;
  ageMs: number | null;
}

export interface ActionView {
  /** `standby.wake`, `standby.release`, `shift.start`, `shift.cancel`. */
  action: string;
  az: string;
  /** `applied`, `already`, `dry-run`, `refused-stale`, `failed`. */
  outcome: string;
  detail: string;
  reason: string;
  token: number | null;
  at: number | null;
  ageMs: number | null;
}

export interface ActuationView {
  /** `aws`, `local`, `dry-run`: what the leader acts through. */
  actuator: string;
  /** The last standby action (wake / release). */
  standby: ActionView | null;
  /** The last zonal-shift action, and when the shift ends unless renewed. */
  shift: (ActionView & { expiresAt: number | null }) | null;
  /** The AZ the leader wants traffic shifted away from, if any. */
  shiftAz: string | null;
}

export interface SuspectView {
  /** Soft checks the blast-radius cap marked suspect: nodes failing only these are kept in. */
  codes: string[];
  /** Live nodes failing each soft check within the window. */
  counts: Record<string, number>;
  updatedAt: number | null;
  ageMs: number | null;
}

export const EVENT_TONES = ["ok", "warn", "bad", "info"] as const;
export type EventTone = (typeof EVENT_TONES)[number];

export interface EventRow {
  /** Stream id (`<ms>-<seq>`). */
  id: string;
  at: number;
  ageMs: number;
  /** `node`, `az`, `tier`, `standby`, `suspect`, `shift`, `action`, or whatever a newer writer uses. */
  type: string;
  /** One line for a person. */
  summary: string;
  /** ok = something recovered, warn = degraded, bad = out or down, info = neither. */
  tone: EventTone;
  /** Fencing token the leader wrote it with, if any. */
  token: number | null;
  /** Every field as written. */
  fields: Record<string, string>;
}

export interface FleetView {
  version: typeof STATUS_JSON_VERSION;
  cluster: string;
  /** The Redis URL with the password replaced. */
  redis: string;
  /** Redis time of the read (epoch ms); every age is measured from it. */
  now: number;
  leader: LeaderView;
  tier: TierView | null;
  standby: StandbyView | null;
  /** What the leader last asked of the cloud (the `actuation` hash); null when it never acted. */
  actuation: ActuationView | null;
  suspect: SuspectView | null;
  azs: AzRow[];
  events: EventRow[];
  /** Nothing of this cluster is in Redis (no members, AZs, lease, tier or events). */
  empty: boolean;
}

export interface ReadFleetViewOptions {
  /** How many of the newest events. Default 10. */
  events?: number;
  /** Shown as `redis` (pass it through `safeUrl`). Default "". */
  url?: string;
  /** Published states older than this are flagged stale. Default the controller's 30000 ms. */
  staleAfterMs?: number;
}

function num(v: string | null | undefined): number | null {
  if (v === null || v === undefined || v === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
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

  const snap = await readSnapshot(redis, keys);
  const ids = snap.nodes.map((n) => n.nodeId);
  const azNames = new Set([...azSet, ...snap.nodes.map((n) => n.az)]);
  if (standbyH.az) azNames.add(standbyH.az);
  const azList = [...azNames].sort((a, b) => collator.compare(a, b));

  const p = redis.pipeline();
  for (const az of azList) p.hgetall(keys.azState(az));
  if (ids.length) p.zmscore(keys.nodes, ...ids);
  for (const n of snap.nodes) p.hmget(keys.node(n.nodeId), "loadScore", "model");
  const second = ((await p.exec()) ?? []) as Reply<unknown>[];
  for (const [err] of second) if (err) throw err;
  const azStates = second.slice(0, azList.length).map(([, v]) => v as Record<string, string>);
  const beats = ids.length ? (second[azList.length][1] as (string | null)[]) : [];
  const extras = second.slice(azList.length + (ids.length ? 1 : 0)).map(([, v]) => v as (string | null)[]);

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
      ? { az: standbyH.az, wake: standbyH.wake === "1", reason: standbyH.reason ?? "", token: num(standbyH.token), updatedAt: standbyAt, ageMs: ageOf(now, standbyAt) }
      : null,
    actuation: actuationView(r[10] as Record<string, string>, now),
    suspect: suspectH.updatedAt
      ? { codes: suspectH.codes ? suspectH.codes.split(",") : [], counts: parseCounts(suspectH.counts), updatedAt: suspectAt, ageMs: ageOf(now, suspectAt) }
      : null,
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

const BAD = new Set(["UNHEALTHY", "UNREACHABLE", "EXPIRED", "DOWN", "L3", "L4", "failed", "refused-stale"]);
const WARN = new Set(["DEGRADED", "UNKNOWN", "L1", "L2"]);
const GOOD = new Set(["HEALTHY", "OK", "L0"]);

function toneOf(word: string): EventTone {
  if (BAD.has(word)) return "bad";
  if (WARN.has(word)) return "warn";
  if (GOOD.has(word)) return "ok";
  return "info";
}

function arrow(from: string | undefined, to: string): string {
  return from ? `${from} → ${to}` : to;
}

/** The AZ named by a leader event's key (`llmha:<cluster>:az:<az>:state`). */
function azOfKey(key: string | undefined, keys: RedisKeys): string {
  const m = /^az:(.*):state$/.exec((key ?? "").slice(keys.prefix.length));
  return m ? m[1] : (key ?? "?");
}

/** One stream entry as a line a person reads, by type. Exported for the tests. */
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

function actuationView(h: Record<string, string>, now: number): ActuationView | null {
  if (!h.actuator) return null;
  const shift = actionOf(h, "shift", now);
  return {
    actuator: h.actuator,
    standby: actionOf(h, "standby", now),
    shift: shift ? { ...shift, expiresAt: num(h["shift.expiresAt"]) } : null,
    shiftAz: h.shiftAz || null,
  };
}

export function eventRow(id: string, flat: string[], now: number, keys: RedisKeys): EventRow {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
  const at = Number(id.split("-")[0]);
  const codes = (label: string, s: string | undefined): string => (s ? ` ${label} ${s.split(/[,;]/).filter(Boolean).join(",")}` : "");
  let summary: string;
  let tone: EventTone;
  switch (f.type) {
    case "node": {
      const where = f.az ? ` (${f.az})` : "";
      if (f.status === "EXPIRED") summary = `node ${f.node}${where} expired: no heartbeat`;
      else if (f.status === "FORGOTTEN") summary = `node ${f.node}${where} forgotten: capacity no longer counted`;
      else if (f.status === "REMOVED") summary = `node ${f.node}${where} left (graceful shutdown)`;
      else summary = `node ${f.node}${where} ${arrow(f.from, f.status)}${codes("hard", f.hard)}${codes("soft", f.soft)}`;
      tone = f.status === "REMOVED" || f.status === "FORGOTTEN" ? "info" : toneOf(f.status);
      break;
    }
    case "az": {
      const cap = f.totalCapacity ? ` (${f.healthyCapacity}/${f.totalCapacity} GPUs)` : "";
      summary = `AZ ${azOfKey(f.key, keys)} ${arrow(f.from, f.state)}${cap}`;
      tone = toneOf(f.state);
      break;
    }
    case "tier":
      summary = `tier ${arrow(f.from, f.level)}: ${f.reason ?? ""}`;
      tone = toneOf(f.level);
      break;
    case "standby":
      summary = `standby ${f.az} ${f.wake === "1" ? "wake" : f.from === "1" ? "back to schedule" : "asleep"}: ${f.reason ?? ""}`;
      tone = f.wake === "1" ? "warn" : f.from === "1" ? "ok" : "info";
      break;
    case "suspect":
      summary = f.codes ? `suspect checks: ${f.codes} (nodes failing only these kept in)` : f.from ? `suspect checks cleared (were ${f.from})` : "suspect checks: none";
      tone = f.codes ? "warn" : f.from ? "ok" : "info";
      break;
    case "shift":
      summary = f.shiftAz ? `zonal shift away from ${f.shiftAz}: ${f.shiftReason ?? ""}` : `zonal shift away from ${f.from || "?"} ended: ${f.shiftReason ?? ""}`;
      tone = f.shiftAz ? "bad" : "ok";
      break;
    case "action":
      summary = `action ${f.action} ${f.az} ${f.outcome} (${f.actuator})${f.detail ? `: ${f.detail}` : ""}`;
      tone = f.outcome === "failed" || f.outcome === "refused-stale" ? "bad" : "info";
      break;
    default:
      summary = Object.entries(f).map(([k, v]) => `${k}=${v}`).join(" ");
      tone = "info";
  }
  return { id, at, ageMs: Math.max(0, now - at), type: f.type ?? "?", summary, tone, token: num(f.token), fields: f };
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
