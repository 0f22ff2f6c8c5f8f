--[[
  Acquires the leader lease and issues its fencing token in one step.

  Input:
    KEYS[1] leader key       (string: "<holderId>:<token>")
    KEYS[2] fence counter    (string, INCR on every acquisition)
    KEYS[3] fence:last       (hash: token, holder — highest token accepted)

    ARGV[1] holder id
    ARGV[2] lease TTL in ms
    ARGV[3] floor: the highest token this contender has seen (0 if none).

  Tokens survive Redis losing its data (restart without persistence, failover before
  replication): a missing counter is seeded from the server clock in ms, which is above
  every token issued before (tokens grow by one per acquisition, far slower than the clock).

  Output:
    {1, token}         acquired; the token is recorded as the highest at once, so an
                       older holder's fenced write is refused from this moment on
    {0, currentValue}  someone holds the lease
]]
local cur = redis.call("GET", KEYS[1])
if cur then
  return {0, cur}
end
if redis.call("EXISTS", KEYS[2]) == 0 then
  local t = redis.call("TIME")
  redis.call("SET", KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000))
end
local token = redis.call("INCR", KEYS[2])
local last = tonumber(redis.call("HGET", KEYS[3], "token") or "0") or 0
local floor = tonumber(ARGV[3]) or 0
if floor > last then
  last = floor
end
if token <= last then
  token = last + 1
  redis.call("SET", KEYS[2], token)
end
redis.call("SET", KEYS[1], ARGV[1] .. ":" .. token, "NX", "PX", ARGV[2])
redis.call("HSET", KEYS[3], "token", token, "holder", ARGV[1])
return {1, token}
