--[[
  Extends the lease only while it is still ours.

  Input:
    KEYS[1] leader key
    ARGV[1] our value "<holderId>:<token>"
    ARGV[2] lease TTL in ms

  Output:
    1  renewed
    0  the lease is gone or someone else's
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
