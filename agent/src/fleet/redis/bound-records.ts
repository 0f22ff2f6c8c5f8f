/**
 * Where the readers (`llm-ha status`, `llm-ha canary record`) find each node's record when node
 * identities are on, without the capability that names it (a node's write secret, which only the
 * leader's role may read in `llmha-caps:<cluster>`).
 *
 * The leader publishes, per enrolled node, a digest of its capability (`enrolled:digests`,
 * `recordDigest`). A reader SCANs `node:*` once and keeps, per node, the one key
 * `node:<id>:<suffix>` whose suffix hashes to the published digest: the key the leader reads.
 * Every other record key — another suffix (written with the shared agent credential by someone
 * who does not hold the capability, or a capability the node no longer holds, until it expires),
 * a plain `node:<id>`, a node with no digest — is what the leader does not read: counted and
 * named, never shown as the node.
 *
 * Without published digests (identities off) there is nothing to bind: the readers read
 * `node:<id>` as before.
 */
import type { Redis } from "ioredis";
import { recordDigest } from "../identity/identity";
import type { RedisKeys } from "./keys";

export interface BoundRecords {
  /** Node id → the key of its record (the one the leader reads). A node absent has none (not enrolled, or expired). */
  keys: ReadonlyMap<string, string>;
  /** Record keys the leader does not read: how many, and the node ids they claim (sorted, each once). */
  unbound: { count: number; nodes: string[] };
}

/** One field of each record key (null where the key is null: a node with no record to read), in one pipeline. */
export async function readRecordField(redis: Redis, recordKeys: readonly (string | null)[], field: string): Promise<(string | null)[]> {
  const p = redis.pipeline();
  for (const k of recordKeys) if (k) p.hget(k, field);
  const got = (await p.exec()) ?? [];
  let i = 0;
  return recordKeys.map((k) => {
    if (!k) return null;
    const [err, v] = got[i++] ?? [null, null];
    if (err) throw err;
    return typeof v === "string" ? v : null;
  });
}

/** The published digests and the record keys they bind; null when no digest is published (no node identities). */
export async function findBoundRecords(redis: Redis, keys: RedisKeys, scanCount = 1000): Promise<BoundRecords | null> {
  const digests = await redis.hgetall(keys.recordDigests);
  if (Object.keys(digests).length === 0) return null;
  const at = `${keys.prefix}node:`;
  const bound = new Map<string, string>();
  const seen = new Set<string>();
  const claimed = new Set<string>();
  let count = 0;
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", `${at}*`, "COUNT", scanCount);
    for (const key of batch) {
      if (seen.has(key)) continue; // SCAN may return a key twice
      seen.add(key);
      const rest = key.slice(at.length);
      // Node ids have no colon (a name: [A-Za-z0-9_.-]); the suffix is everything after the first one.
      const colon = rest.indexOf(":");
      const id = colon < 0 ? rest : rest.slice(0, colon);
      const digest = digests[id];
      if (colon >= 0 && digest !== undefined && recordDigest(rest.slice(colon + 1)) === digest && !bound.has(id)) bound.set(id, key);
      else {
        count += 1;
        claimed.add(id.slice(0, 64));
      }
    }
    cursor = next;
  } while (cursor !== "0");
  return { keys: bound, unbound: { count, nodes: [...claimed].sort() } };
}
