--[[
  Releases the lease only while it is still ours (graceful shutdown).

  Input:
    KEYS[1] leader key
    ARGV[1] our value "<holderId>:<token>"

  Output:
    1  released
    0  the lease was already gone or someone else's
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
