/**
 * Where a node's record is, for the drill's watchers (which read Redis as its admin): with node
 * identities, under the capability the leader handed the node (`llmha-caps:<cluster>`); before
 * enrolment, or without identities, `node:<id>`.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../agent/src/fleet/redis/keys";

export async function recordKeys(r: Redis, keys: RedisKeys, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const caps = await r.hmget(keys.capabilities, ...ids);
  return ids.map((id, i) => (caps[i] ? keys.nodeRecord(id, caps[i]!) : keys.node(id)));
}
