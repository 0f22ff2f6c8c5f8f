--[[
  Acquires the leader lease and issues its fencing token in one step.

  Input:
    KEYS[1] leader key       (string: "<holderId>:<token>")
    KEYS[2] fence counter    (string, raised on every acquisition)
    KEYS[3] fence:last       (hash: token, holder — highest token accepted)

    ARGV[1] holder id
    ARGV[2] lease TTL in ms
    ARGV[3] floor: the highest token this contender has seen (0 if none).

  Tokens never go backwards, even when Redis loses data (a restart without persistence, a
  failover to a replica that missed the last writes): a token is the highest of the counter
  + 1, the contender's floor + 1, fence:last + 1 and the server clock in ms. Tokens grow by
  one per acquisition, far slower than the clock, so a promoted replica's clock (NTP-synced,
  the promotion takes seconds) is above every token the old primary issued.

  Our own value still in the key (an acquire that ran after the client gave up on it, or a
  self-fence while the key lived on) is taken again with a fresh token at once: never the
  old token, never a wait for the TTL.

  Only sane values count (fence.inc.lua's saneToken: a whole number from 0 to the clock plus a
  day): a poisoned counter, fence:last or floor (`1e400` reads as inf) is left out, so the
  token stays finite and the fence heals at this acquisition. What was left out — and what
  a fenced write found poisoned before (fence:last's `poisoned` field) — is returned, for the
  leader to report (event, metric, log), and cleared.

  Output:
    {1, token, poisoned}  acquired; the token is recorded as the highest at once, so an
                          older holder's fenced write is refused from this moment on;
                          poisoned = "" or "<key>=<value>,…" of the values left out
    {0, currentValue}     someone else holds the lease
]]
--- @include "fence"

local cur = redis.call("GET", KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) ~= ARGV[1] .. ":" then
  return {0, cur}
end
local now = nowMs()
local token = now
local poisoned = {}
local seen = {
  {"fence", redis.call("GET", KEYS[2])},
  {"fence:last", redis.call("HGET", KEYS[3], "token")},
  {"floor", ARGV[3]},
}
for _, s in ipairs(seen) do
  if s[2] and s[2] ~= "" then
    local v = saneToken(s[2], now)
    if v == nil then
      poisoned[#poisoned + 1] = s[1] .. "=" .. string.sub(tostring(s[2]), 1, 64)
    elseif v + 1 > token then
      token = v + 1
    end
  end
end
local before = redis.call("HGET", KEYS[3], "poisoned")
if before then
  poisoned[#poisoned + 1] = "fence:last=" .. before
end
redis.call("SET", KEYS[2], token)
redis.call("SET", KEYS[1], ARGV[1] .. ":" .. token, "PX", ARGV[2])
redis.call("DEL", KEYS[3])
redis.call("HSET", KEYS[3], "token", token, "holder", ARGV[1])
return {1, token, table.concat(poisoned, ",")}
