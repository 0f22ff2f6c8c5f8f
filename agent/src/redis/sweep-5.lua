--[[
  Leader sweep (fenced): takes nodes whose hash expired out of their AZ's available
  set, writes one EXPIRED event per node, and forgets nodes silent for the forget
  period (their capacity stops counting toward the AZ's total).

  Input:
    KEYS[1] nodes     zset id -> server ms of the last heartbeat
    KEYS[2] members   hash id -> "<az>|<gpusExpected>|<served>"
    KEYS[3] expired   set
    KEYS[4] events    stream
    KEYS[5] fence:last

    ARGV[1] key prefix        ARGV[2] fencing token     ARGV[3] holder id
    ARGV[4] look at nodes silent for at least this many ms
    ARGV[5] forget after ms   ARGV[6] events MAXLEN     ARGV[7] most nodes per call

  Output:
    {1, expired now, forgotten now}   applied
    {0, highest token}                refused (stale leader)
]]
--- @include "fence"

local refused = fenceAdmit(KEYS[5], tonumber(ARGV[2]), ARGV[3])
if refused then
  return {0, refused}
end

local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local prefix = ARGV[1]
local cands = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[4]), "WITHSCORES", "LIMIT", 0, ARGV[7])
local expiredNow, forgotten = 0, 0
for i = 1, #cands, 2 do
  local id = cands[i]
  local seen = tonumber(cands[i + 1])
  if redis.call("EXISTS", prefix .. "node:" .. id) == 0 then
    local m = redis.call("HGET", KEYS[2], id)
    local az = m and string.match(m, "^([^|]*)|") or ""
    if az ~= "" then
      redis.call("ZREM", prefix .. "az:" .. az .. ":available", id)
    end
    if redis.call("SADD", KEYS[3], id) == 1 then
      expiredNow = expiredNow + 1
      redis.call("XADD", KEYS[4], "MAXLEN", "~", ARGV[6], "*",
        "type", "node", "node", id, "az", az, "status", "EXPIRED", "token", ARGV[2], "leader", ARGV[3])
    end
    if seen < now - tonumber(ARGV[5]) then
      forgotten = forgotten + 1
      redis.call("ZREM", KEYS[1], id)
      redis.call("HDEL", KEYS[2], id)
      redis.call("SREM", KEYS[3], id)
      redis.call("XADD", KEYS[4], "MAXLEN", "~", ARGV[6], "*",
        "type", "node", "node", id, "az", az, "status", "FORGOTTEN", "token", ARGV[2], "leader", ARGV[3])
    end
  end
end
return {1, expiredNow, forgotten}
