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

  What is read is not trusted: a token is a whole number from 0 to the server clock
  plus a day (tokens follow the clock in ms and grow by one per acquisition). Anything else —
  `1e400` (Lua reads it as inf: every later write refused, the next token inf), a negative or
  fractional number, a date far ahead — is treated as lost data: fence:last is seeded from the
  clock as when Redis lost it, and the value is kept in its `poisoned` field, which the next
  acquisition reports (an event, a metric, a log line) and clears. The current leader's write
  is refused once, it steps down and takes a fresh token at once: the fence heals itself.
]]
local FENCE_SLACK_MS = 86400000

local function nowMs()
  local t = redis.call("TIME")
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- A token read from Redis or a caller, or nil when it is not a sane one.
local function saneToken(raw, now)
  local v = tonumber(raw)
  if v == nil or v ~= v or v < 0 or v ~= math.floor(v) or v > now + FENCE_SLACK_MS then
    return nil
  end
  return v
end

local function fenceAdmit(fenceKey, token, holder)
  local last = redis.call("HMGET", fenceKey, "token", "holder")
  local now = nowMs()
  local lastToken = saneToken(last[1], now)
  local lastHolder = last[2]
  if token == nil or saneToken(token, now) == nil then
    return lastToken or now
  end
  if not lastToken then
    lastToken = now
    redis.call("HSET", fenceKey, "token", lastToken, "holder", "")
    if last[1] then
      redis.call("HSET", fenceKey, "poisoned", string.sub(tostring(last[1]), 1, 64))
    end
    lastHolder = ""
  end
  if token < lastToken or (token == lastToken and lastHolder ~= holder) then
    return lastToken
  end
  redis.call("HSET", fenceKey, "token", token, "holder", holder)
  return nil
end
