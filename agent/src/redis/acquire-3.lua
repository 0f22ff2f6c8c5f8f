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

  Output:
    {1, token}         acquired; the token is recorded as the highest at once, so an
                       older holder's fenced write is refused from this moment on
    {0, currentValue}  someone else holds the lease
]]
local cur = redis.call("GET", KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) ~= ARGV[1] .. ":" then
  return {0, cur}
end
local t = redis.call("TIME")
local token = t[1] * 1000 + math.floor(t[2] / 1000)
local counted = (tonumber(redis.call("GET", KEYS[2]) or "0") or 0) + 1
local last = (tonumber(redis.call("HGET", KEYS[3], "token") or "0") or 0) + 1
local floor = (tonumber(ARGV[3]) or 0) + 1
for _, v in ipairs({counted, last, floor}) do
  if v > token then
    token = v
  end
end
redis.call("SET", KEYS[2], token)
redis.call("SET", KEYS[1], ARGV[1] .. ":" .. token, "PX", ARGV[2])
redis.call("HSET", KEYS[3], "token", token, "holder", ARGV[1])
return {1, token}
