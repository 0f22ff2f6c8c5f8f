--[[
  A leader write, applied only if its fencing token is the highest seen.

  A token lower than fence:last is refused; an equal token is refused unless it comes
  from the holder that recorded it (after a Redis restart two holders could otherwise
  share one token); a missing fence:last (Redis lost its data) refuses every token issued
  before the loss. The write records its token, so the check lives here, in Redis,
  and not in the client: a leader paused past its TTL that resumes and writes is
  refused because the new leader's acquisition already raised fence:last.

  Input:
    KEYS[1] fence:last       (hash: token, holder)
    KEYS[2] target hash      (az:<az>:state, tier, standby:wake, suspect)
    KEYS[3] events stream

    ARGV[1] fencing token
    ARGV[2] holder id
    ARGV[3] change field: a transition of this field writes an event ("" = none)
    ARGV[4] event type ("" = no event)
    ARGV[5] events MAXLEN (approximate)
    ARGV[6] mode: "hset" (merge fields) or "replace" (delete the hash first)
    ARGV[7..] field, value pairs (the token and holder are added as token, leader)

  Output:
    {1, previous value of the change field or "", server time in µs}   applied
    {0, highest token}                                                  refused
]]
local token = tonumber(ARGV[1])
local last = redis.call("HMGET", KEYS[1], "token", "holder")
local lastToken = tonumber(last[1])
if not lastToken then
  -- fence:last lost with Redis's data: every earlier term is void. Seed it from the clock
  -- (as acquire-3 seeds the counter) so a holder from before the loss is refused.
  local t = redis.call("TIME")
  lastToken = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call("HSET", KEYS[1], "token", lastToken, "holder", "")
  last[2] = ""
end
if token < lastToken or (token == lastToken and last[2] ~= ARGV[2]) then
  return {0, lastToken}
end
redis.call("HSET", KEYS[1], "token", token, "holder", ARGV[2])

local changeField = ARGV[3]
local prev = false
if changeField ~= "" then
  prev = redis.call("HGET", KEYS[2], changeField)
end
if ARGV[6] == "replace" then
  redis.call("DEL", KEYS[2])
end

local pairs_ = {}
local newValue = false
for i = 7, #ARGV, 2 do
  pairs_[#pairs_ + 1] = ARGV[i]
  pairs_[#pairs_ + 1] = ARGV[i + 1]
  if ARGV[i] == changeField then
    newValue = ARGV[i + 1]
  end
end
if #pairs_ > 0 then
  pairs_[#pairs_ + 1] = "token"
  pairs_[#pairs_ + 1] = ARGV[1]
  pairs_[#pairs_ + 1] = "leader"
  pairs_[#pairs_ + 1] = ARGV[2]
  redis.call("HSET", KEYS[2], unpack(pairs_))
end

if ARGV[4] ~= "" and (changeField == "" or prev ~= newValue) then
  local entry = {"type", ARGV[4], "key", KEYS[2], "from", prev or "", "token", ARGV[1], "leader", ARGV[2]}
  for i = 7, #ARGV do
    entry[#entry + 1] = ARGV[i]
  end
  redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", unpack(entry))
end

local t = redis.call("TIME")
return {1, prev or "", t[1] * 1000000 + t[2]}
