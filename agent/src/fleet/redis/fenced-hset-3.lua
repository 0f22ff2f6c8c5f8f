--[[
  A leader write, applied only if its fencing token is the highest seen.

  The check is fence.inc.lua's (shared with sweep-5): a lower token, an equal token from
  another holder, or any token from before Redis lost fence:last is refused.

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
    ARGV[7..] field, value pairs (the token and holder are added as token, leader, and
              `at`: Redis's own clock in ms, so that a reader judges the write's age on the
              same clock, never by comparing two hosts' wall clocks)

  Output:
    {1, previous value of the change field or "", server time in µs}   applied
    {0, highest token}                                                  refused
]]
--- @include "fence"

local refused = fenceAdmit(KEYS[1], tonumber(ARGV[1]), ARGV[2])
if refused then
  return {0, refused}
end

local changeField = ARGV[3]
local prev = false
if changeField ~= "" then
  prev = redis.call("HGET", KEYS[2], changeField)
end
if ARGV[6] == "replace" then
  redis.call("DEL", KEYS[2])
end

local t = redis.call("TIME")
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
  pairs_[#pairs_ + 1] = "at"
  pairs_[#pairs_ + 1] = t[1] * 1000 + math.floor(t[2] / 1000)
  -- In slices: Lua's unpack takes at most about 8,000 values (LUAI_MAXCSTACK), and the
  -- leader's `inventory` hash has a field per GPU node (5,000 nodes are 10,000 values).
  for i = 1, #pairs_, 2000 do
    redis.call("HSET", KEYS[2], unpack(pairs_, i, math.min(i + 1999, #pairs_)))
  end
end

if ARGV[4] ~= "" and (changeField == "" or prev ~= newValue) then
  local entry = {"type", ARGV[4], "key", KEYS[2], "from", prev or "", "token", ARGV[1], "leader", ARGV[2]}
  for i = 7, #ARGV do
    entry[#entry + 1] = ARGV[i]
  end
  redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", unpack(entry))
end

return {1, prev or "", t[1] * 1000000 + t[2]}
