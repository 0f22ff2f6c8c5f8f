--[[
  Included by the fenced scripts (`--- @include "fence"`, resolved by scripts.ts when it loads
  them, as bullmq's includes are): the one place a leader's fencing token is checked.

  A token lower than fence:last is refused; an equal token is refused unless it comes
  from the holder that recorded it (after a Redis restart two holders could otherwise
  share one token); a missing fence:last (Redis lost its data) refuses every token issued
  before the loss — it is seeded from the server clock, as acquire-3 seeds the counter.
  An admitted write records its token, so the check lives here, in Redis, and not in the
  client: a leader paused past its TTL that resumes and writes is refused because the new
  leader's acquisition already raised fence:last.

  fenceAdmit(fenceKey, token, holder) → nil when admitted, else the highest token seen.
]]
local function fenceAdmit(fenceKey, token, holder)
  local last = redis.call("HMGET", fenceKey, "token", "holder")
  local lastToken = tonumber(last[1])
  local lastHolder = last[2]
  if not lastToken then
    local t = redis.call("TIME")
    lastToken = t[1] * 1000 + math.floor(t[2] / 1000)
    redis.call("HSET", fenceKey, "token", lastToken, "holder", "")
    lastHolder = ""
  end
  if token < lastToken or (token == lastToken and lastHolder ~= holder) then
    return lastToken
  end
  redis.call("HSET", fenceKey, "token", token, "holder", holder)
  return nil
end
