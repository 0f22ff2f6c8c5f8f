/**
 * The registry as the controller (and `llm-ha status`) reads it: every member node with its
 * compact view, validated — a record that cannot be an agent's is left out and named.
 */
import type { Redis } from "ioredis";
import { NODE_STATUSES, takesTraffic, type NodeStatus, type ServingPhase } from "../../types";
import type { RedisKeys } from "./keys";
import { parseCompactNode, readNodesScript, type CompactNode } from "./scripts";
import { readRecordField } from "./bound-records";


/** One node as the controller sees it. `alive` is false when its hash expired (a dead node still counts toward its AZ's total). */
export interface NodeView {
  nodeId: string;
  az: string;
  alive: boolean;
  status: NodeStatus | "EXPIRED";
  phase: ServingPhase | "down";
  weight: number;
  gpus: number;
  gpusExpected: number;
  soft: string[];
  hard: string[];
  takesTraffic: boolean;
  /**
   * The node has taken traffic since it joined (sticky in its `members` entry). False: a new
   * node still loading its model — not capacity its AZ lost. Absent (older entries): true.
   */
  served?: boolean;
}

export interface RegistrySnapshot {
  nodes: NodeView[];
  /** Records left out because they are not what an agent writes (forged or corrupted); absent = none. */
  skipped?: SkippedRecord[];
}

export interface SkippedRecord {
  nodeId: string;
  /** Why, in a few words (`unknown AZ "x"`, `gpus 9999 above 64`…). */
  reason: string;
  /**
   * `forged`: a node the inventory does not list, or a record claiming another AZ than the
   * inventory's (only a credential used against another node writes that); `node` (absent): a
   * record no agent writes (implausible values).
   */
  what?: "node" | "forged";
}

/** More GPUs than any instance type has: a count above it is not a real node's. */
export const MAX_GPUS_PER_NODE = 64;
const PHASES: readonly string[] = ["serving", "warmup", "loading", "down", "draining"];
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Why a node record cannot be what an agent wrote, or null when it can. What is read from
 * Redis is not trusted: a forged hash (a stolen credential) or a corrupted one must
 * not move an AZ's state. The AZ must be one agents registered (`azs`) and the member entry's;
 * counts bounded and whole; weight 0–100; status and phase known.
 */
export function recordProblem(id: string, memberAz: string, memberGpus: number, v: CompactNode | null, knownAzs: ReadonlySet<string>): string | null {
  if (!NAME.test(id)) return "node id is not a name";
  if (!knownAzs.has(memberAz)) return `unknown AZ ${JSON.stringify(memberAz.slice(0, 64))}`;
  if (!Number.isInteger(memberGpus) || memberGpus < 0 || memberGpus > MAX_GPUS_PER_NODE) return `expected GPUs ${memberGpus} outside 0–${MAX_GPUS_PER_NODE}`;
  if (!v) return null;
  if (v.az !== memberAz) return `AZ ${JSON.stringify(v.az.slice(0, 64))} differs from its member entry's ${memberAz}`;
  if (!(NODE_STATUSES as readonly string[]).includes(v.status)) return `unknown status ${JSON.stringify(v.status.slice(0, 32))}`;
  if (!PHASES.includes(v.phase)) return `unknown phase ${JSON.stringify(v.phase.slice(0, 32))}`;
  if (!Number.isFinite(v.weight) || v.weight < 0 || v.weight > 100) return `weight ${v.weight} outside 0–100`;
  for (const [name, n] of [["gpus", v.gpus], ["gpusExpected", v.gpusExpected]] as const) {
    if (!Number.isInteger(n) || n < 0 || n > MAX_GPUS_PER_NODE) return `${name} ${n} outside 0–${MAX_GPUS_PER_NODE}`;
  }
  return null;
}

/** The fields a fenced leader write adds to its hash (fenced-hset-3.lua): not node ids. */
export const FENCE_FIELDS: readonly string[] = ["token", "leader", "at"];

/**
 * Reads every member node with its compact view, one HSCAN page per call (`read-nodes-1.lua`).
 * `recordKey`: with node identities, where each node's record is (bound-records.ts; null: none,
 * the node reads as expired); the script's read of `node:<id>` is then not used. `from`: the
 * node list and AZs to read instead of `members` and `azs` (which agents write): a leader's
 * inventory hash and its AZs.
 */
export async function readSnapshot(
  redis: Redis,
  keys: RedisKeys,
  pageSize = 1000,
  recordKey?: (nodeId: string) => string | null,
  from?: { members: string; knownAzs: ReadonlySet<string> },
): Promise<RegistrySnapshot> {
  const seen = new Map<string, { member: string; view: CompactNode | null }>();
  let cursor = "0";
  do {
    const page = await readNodesScript(redis, from?.members ?? keys.members, keys.prefix, cursor, pageSize);
    // HSCAN may return an entry twice. A leader's fenced hash also holds its token, holder and time.
    for (const e of page.entries) if (!from || !FENCE_FIELDS.includes(e.id)) seen.set(e.id, e);
    cursor = page.cursor;
  } while (cursor !== "0");
  if (recordKey) {
    const ids = [...seen.keys()];
    const compact = await readRecordField(redis, ids.map((id) => recordKey(id)), "c");
    ids.forEach((id, j) => seen.set(id, { member: seen.get(id)!.member, view: parseCompactNode(compact[j]) }));
  }
  const knownAzs = from?.knownAzs ?? new Set(await redis.smembers(keys.azs));
  const skipped: SkippedRecord[] = [];
  const ids = [...seen.keys()].filter((id) => {
    const { member: m, view } = seen.get(id)!;
    const [memberAz, gpusText] = m.split("|");
    const reason = recordProblem(id, memberAz ?? "", Number(gpusText ?? 0), view, knownAzs);
    if (reason) skipped.push({ nodeId: id.slice(0, 64), reason });
    return reason === null;
  });
  const nodes: NodeView[] = ids.map((id) => {
    const { member: m, view: hash } = seen.get(id)!;
    // `<az>|<gpusExpected>|<served>`; entries written before `served` existed have two fields.
    const [memberAz, gpusText, servedFlag] = m.split("|");
    const memberGpus = Number(gpusText ?? 0) || 0;
    const served = servedFlag !== "0";
    if (!hash) {
      return {
        nodeId: id, az: memberAz, alive: false, status: "EXPIRED", phase: "down", weight: 0,
        gpus: 0, gpusExpected: memberGpus, soft: [], hard: [], takesTraffic: false, served,
      };
    }
    const phase = hash.phase as ServingPhase;
    const traffic = takesTraffic({ phase, weight: hash.weight });
    return {
      nodeId: id,
      az: hash.az,
      alive: true,
      status: hash.status as NodeStatus,
      phase,
      weight: hash.weight,
      gpus: hash.gpus,
      gpusExpected: hash.gpusExpected,
      soft: hash.soft,
      hard: hash.hard,
      takesTraffic: traffic,
      served: served || traffic,
    };
  });
  return skipped.length ? { nodes, skipped } : { nodes };
}
