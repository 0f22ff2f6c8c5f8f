--[[
  One page of the controller's registry snapshot (5,000 nodes read every second): walks
  the members hash with HSCAN and returns, per member, its member entry and the compact
  view (field `c`) of its node hash, written by heartbeat-7.lua. Paging keeps Redis from
  being blocked for long; no ids travel from the client.

  Input:
    KEYS[1] members   hash id -> "<az>|<gpusExpected>|<served>"
    ARGV[1] key prefix
    ARGV[2] HSCAN cursor ("0" to start)
    ARGV[3] HSCAN COUNT hint

  Output:
    {next cursor, id1, member1, view1, id2, member2, view2, ...}
    view = "az|status|phase|weight|gpus|gpusExpected|soft|hard" (codes separated by ";"),
    or false when the node's hash expired
]]
local page = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", ARGV[3])
local out = {page[1]}
local kv = page[2]
for i = 1, #kv, 2 do
  out[#out + 1] = kv[i]
  out[#out + 1] = kv[i + 1]
  out[#out + 1] = redis.call("HGET", ARGV[1] .. "node:" .. kv[i], "c")
end
return out
