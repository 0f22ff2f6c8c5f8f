--[[
  Leader sweep (fenced), in bounded chunks: nodes whose hash expired leave the live index
  (`nodes`) for the dead one (`dead`, same score: the last heartbeat) and their AZ's available
  set, with one EXPIRED event each; dead nodes silent for the forget period are forgotten
  (their capacity stops counting toward the AZ's total). A dead node is read once, when it
  dies, and once more, when it is forgotten: never on every tick while it stays dead.

  Input:
    KEYS[1] nodes     zset id -> server ms of the last heartbeat (live nodes)
    KEYS[2] members   hash id -> "<az>|<gpusExpected>|<served>"
    KEYS[3] dead      zset id -> server ms of the last heartbeat (hash expired)
    KEYS[4] events    stream
    KEYS[5] fence:last

    ARGV[1] key prefix        ARGV[2] fencing token     ARGV[3] holder id
    ARGV[4] look at nodes silent for at least this many ms
    ARGV[5] forget after ms   ARGV[6] events MAXLEN
    ARGV[7] most nodes handled per call (expired + forgotten); the rest waits for the next call
    ARGV[8] look at live nodes from this score on (a ZRANGEBYSCORE min: "-inf", "<ms>" or
            "(<ms>"); absent or "" = "-inf". A period's next call passes the last score the
            previous one looked at: live nodes silent a while but not expired (a zone's first
            seconds of silence, heartbeats late under load) stay in `nodes`, and from "-inf"
            every call would look at the same oldest ones again

  Output:
    {1, expired now, forgotten now, more, last score looked at ("" = none)}
                                            applied; more = 1 when the limit cut the work short
    {0, highest token}                      refused (stale leader)
]]
--- @include "fence"

local refused = fenceAdmit(KEYS[5], tonumber(ARGV[2]), ARGV[3])
if refused then
  return {0, refused}
end

local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local prefix = ARGV[1]
local limit = tonumber(ARGV[7])
local expiredNow, forgotten, more = 0, 0, 0

-- Live nodes silent long enough for their hash to have expired: the oldest first.
local from = ARGV[8]
if from == nil or from == "" then
  from = "-inf"
end
local cands = redis.call("ZRANGEBYSCORE", KEYS[1], from, now - tonumber(ARGV[4]), "WITHSCORES", "LIMIT", 0, limit)
local last = ""
if #cands > 0 then
  last = cands[#cands]
end
for i = 1, #cands, 2 do
  local id = cands[i]
  if redis.call("EXISTS", prefix .. "node:" .. id) == 0 then
    local m = redis.call("HGET", KEYS[2], id)
    local az = m and string.match(m, "^([^|]*)|") or ""
    if az ~= "" then
      redis.call("ZREM", prefix .. "az:" .. az .. ":available", id)
    end
    redis.call("ZREM", KEYS[1], id)
    redis.call("ZADD", KEYS[3], cands[i + 1], id)
    expiredNow = expiredNow + 1
    redis.call("XADD", KEYS[4], "MAXLEN", "~", ARGV[6], "*",
      "type", "node", "node", id, "az", az, "status", "EXPIRED", "token", ARGV[2], "leader", ARGV[3])
  end
end
if #cands / 2 >= limit then
  more = 1
end

-- Dead nodes past the forget period: the oldest first, within what is left of the limit.
local room = limit - #cands / 2
if room > 0 then
  local old = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now - tonumber(ARGV[5]), "LIMIT", 0, room)
  for _, id in ipairs(old) do
    local m = redis.call("HGET", KEYS[2], id)
    local az = m and string.match(m, "^([^|]*)|") or ""
    redis.call("ZREM", KEYS[3], id)
    redis.call("HDEL", KEYS[2], id)
    forgotten = forgotten + 1
    redis.call("XADD", KEYS[4], "MAXLEN", "~", ARGV[6], "*",
      "type", "node", "node", id, "az", az, "status", "FORGOTTEN", "token", ARGV[2], "leader", ARGV[3])
  end
  if #old >= room then
    more = 1
  end
else
  more = 1
end
return {1, expiredNow, forgotten, more, last}
