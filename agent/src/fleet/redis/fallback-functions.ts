/**
 * The L4 fallback's Lua as a Redis Functions library (`llmha_fallback_<version>`, see
 * functions.ts): the verified-answer cache's bookkeeping (agent/src/edge/fallback/cache.ts) and
 * the queued requests' state moves (results.ts). It lives with the Redis code, not the edge's,
 * because the controller loads it. The fallback (internet-facing) and the operator's cache commands call
 * them with `FCALL`; the controller loads the library (the fallback's role may not load one).
 * Keys are built from the prefix argument: every `redis.call` inside is checked against the
 * caller's ACL user like a command of its own.
 */
import { buildLibrary, type FunctionLibrary } from "./functions";

/** Largest cache entry or request record a call may carry (an answer of the fleet, JSON). */
export const MAX_FALLBACK_VALUE_BYTES = 16 * 1024 * 1024;

/** Writes one entry, then evicts the least recently used until both bounds hold. Returns the number evicted. */
const CACHE_PUT_LUA = `
local prefix = ARGV[1]
local h = ARGV[2]
local value = ARGV[3]
local ttl = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local maxEntries = tonumber(ARGV[6])
local maxBytes = tonumber(ARGV[7])
local lru, size, bytes = prefix .. 'lru', prefix .. 'size', prefix .. 'bytes'
local old = tonumber(redis.call('HGET', size, h) or '0')
redis.call('SET', prefix .. 'e:' .. h, value, 'PX', ttl)
redis.call('ZADD', lru, now, h)
redis.call('HSET', size, h, #value)
local total = redis.call('INCRBY', bytes, #value - old)
local evicted = 0
while (redis.call('ZCARD', lru) > maxEntries or total > maxBytes) do
  local victim = redis.call('ZRANGE', lru, 0, 0)[1]
  if (not victim) or victim == h then break end
  redis.call('ZREM', lru, victim)
  redis.call('DEL', prefix .. 'e:' .. victim)
  local s = tonumber(redis.call('HGET', size, victim) or '0')
  redis.call('HDEL', size, victim)
  total = redis.call('DECRBY', bytes, s)
  evicted = evicted + 1
end
return evicted
`;

/** Marks an entry used (Redis time in µs: strictly ordered even within one millisecond). */
const CACHE_TOUCH_LUA = `
local t = redis.call('TIME')
return redis.call('ZADD', ARGV[1], 'XX', tonumber(t[1]) * 1000000 + tonumber(t[2]), ARGV[2])
`;

/** Removes entries by key; returns how many existed. */
const CACHE_RM_LUA = `
local prefix = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local h = ARGV[i]
  n = n + redis.call('DEL', prefix .. 'e:' .. h)
  redis.call('ZREM', prefix .. 'lru', h)
  local s = tonumber(redis.call('HGET', prefix .. 'size', h) or '0')
  if s > 0 then redis.call('DECRBY', prefix .. 'bytes', s) end
  redis.call('HDEL', prefix .. 'size', h)
end
return n
`;

/**
 * Moves a record (KEYS[1], `fallback:req:<id>`) from one of the states in ARGV[1] (comma list;
 * `none` = no record) to the JSON in ARGV[2], keeping nothing of the old one but what the caller
 * merged in. ARGV[4], when given, is the result body: written to KEYS[2] (`fallback:body:<id>`)
 * in the same call and with the same TTL, so a `done` record never exists without its body nor a
 * body without its record (no move leaves a final state, so no body outlives its record). The body lives apart
 * because only the fallback's role may read it (`llm-ha status` and operators read the record).
 * Returns the state it found (`none` when absent) and whether it moved: "state:1" / "state:0".
 *
 * Upgrades: this took one key before the body moved out. The library's name carries a hash of
 * its code (functions.ts), so the new signature is a new library, loaded beside the old one: a
 * fallback of the previous build keeps calling its own library's `move` (one key, body inside
 * the record) until it is replaced, and a new fallback waits ("Function not found") until the
 * controller has loaded this one. Prune old libraries only after every fallback runs the new build.
 */
const MOVE_LUA = `
local cur = redis.call('GET', KEYS[1])
local state = 'none'
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and type(rec) == 'table' and rec.state then state = rec.state end
end
for s in string.gmatch(ARGV[1], '[^,]+') do
  if s == state then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
    if ARGV[4] then redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[3]) end
    return state .. ':1'
  end
end
return state .. ':0'
`;

let lib: FunctionLibrary | null = null;

/** The fallback's library, built once. */
export function fallbackLibrary(): FunctionLibrary {
  lib ??= buildLibrary("fallback", [
    {
      name: "cachePut", keys: 0, lua: CACHE_PUT_LUA, maxArgs: 7, maxArgBytes: MAX_FALLBACK_VALUE_BYTES,
      argNames: { 1: "key prefix", 2: "entry key", 3: "entry", 4: "ttl ms", 6: "max entries", 7: "max bytes" },
    },
    { name: "cacheTouch", keys: 0, lua: CACHE_TOUCH_LUA, maxArgs: 2, argNames: { 1: "lru key", 2: "entry key" } },
    // `llm-ha cache rm` and a list's clean-up pass many entry keys at once.
    { name: "cacheRm", keys: 0, lua: CACHE_RM_LUA, maxArgs: 4096, argNames: { 1: "key prefix" } },
    { name: "move", keys: 2, lua: MOVE_LUA, maxArgs: 4, maxArgBytes: MAX_FALLBACK_VALUE_BYTES, argNames: { 1: "from states", 2: "record", 3: "ttl s", 4: "result body" } },
  ]);
  return lib;
}
