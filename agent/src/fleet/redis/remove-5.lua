--[[
  Graceful removal of a node (agent shutdown): it leaves every set at once and its
  capacity stops counting toward its AZ.

  Input:
    KEYS[1] node:<id>   KEYS[2] events   KEYS[3] nodes   KEYS[4] members   KEYS[5] dead
    ARGV[1] node id     ARGV[2] key prefix     ARGV[3] events MAXLEN
    ARGV[4] instance of the agent leaving ("" = any): a hash another live instance holds is left alone

  Output:
    1 if the node was known, 0 if not, -1 if another instance holds it (nothing removed)
]]
local id = ARGV[1]
local holder = redis.call("HGET", KEYS[1], "instance")
if ARGV[4] ~= "" and holder and holder ~= "" and holder ~= ARGV[4] then
  return -1
end
local az = redis.call("HGET", KEYS[1], "az")
local m = redis.call("HGET", KEYS[4], id)
if not az and m then
  az = string.match(m, "^(.*)|")
end
if az then
  redis.call("ZREM", ARGV[2] .. "az:" .. az .. ":available", id)
end
local prev = redis.call("HGET", KEYS[1], "status")
local known = redis.call("DEL", KEYS[1]) + redis.call("ZREM", KEYS[3], id) + redis.call("HDEL", KEYS[4], id)
redis.call("ZREM", KEYS[5], id)
if known > 0 then
  redis.call("XADD", KEYS[2], "MAXLEN", "~", ARGV[3], "*",
    "type", "node", "node", id, "az", az or "", "from", prev or "", "status", "REMOVED")
  return 1
end
return 0
