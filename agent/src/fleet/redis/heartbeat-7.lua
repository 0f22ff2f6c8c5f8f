--[[
  One agent heartbeat: the node hash, its expiry, the AZ's available set and, on a
  status change (or when the node comes back after its hash expired), an event.

  Input:
    KEYS[1] node:<id>            hash
    KEYS[2] az:<az>:available    zset, score = load score
    KEYS[3] events               stream
    KEYS[4] nodes                zset id -> server time (ms) of the last heartbeat
    KEYS[5] members              hash id -> "<az>|<gpusExpected>|<served>" (served: "1" once the node
                                 took traffic, sticky while it is a member; a new node loading its
                                 model is "0" and is not yet capacity its AZ has lost)
    KEYS[6] azs                  set of AZ names
    KEYS[7] dead                 zset of ids whose hash expired (the sweep moved them out of `nodes`)

    ARGV[1]  node id            ARGV[2]  az               ARGV[3]  status
    ARGV[4]  phase              ARGV[5]  weight           ARGV[6]  load score
    ARGV[7]  healthy GPUs       ARGV[8]  expected GPUs    ARGV[9]  model ("" = none)
    ARGV[10] updatedAt (epoch ms, the agent's decision time)
    ARGV[11] hash TTL in ms     ARGV[12] "1" when the node takes traffic
    ARGV[13] soft reason codes, comma separated
    ARGV[14] hard reason codes, comma separated
    ARGV[15] events MAXLEN      ARGV[16] key prefix (to leave a previous AZ's set, and to read
             `suspect`, the leader's hash whose field `codes` = suspect soft check codes, comma
             separated: read by name, not passed in KEYS, because every key given to EVALSHA
             must be writable by the caller's ACL user and the agent role may only read it)
    ARGV[17] instance: this agent process's random id ("" = no claim, the bench's fleet).
             The hash records it; a hash another instance wrote is not overwritten: two
             live agents with one node id would otherwise take turns, and the one that
             stops would remove the other's node. A dead instance's hash expires with its
             heartbeats (TTL), then the id is free.
    ARGV[18] model revision (weights hash, commit)   ARGV[19] model dtype
    ARGV[20] model max context (tokens)
             What the server itself says it serves beyond the id (the same model
             everywhere); "" = unknown. Absent (an older caller): written as "".
    ARGV[21] GPU fault facts (`gpuFault`, a short JSON: XIDs acted on, the driver's recovery
             action, row-remap state) for the leader's repair ladder; "" = none. Absent
             (an older caller): written as "".

  The hash also gets `c`, the controller's compact view (one HGET per node when 5,000 are
  read every second): az|status|phase|weight|gpus|gpusExpected|soft|hard, soft and hard
  with ";" between codes.

  Output:
    {changed (1/0), suspect codes (comma separated, "" = none), ""}   written
    {0, "", instance that holds the id}                                another live agent has it
]]
local id = ARGV[1]
local az = ARGV[2]
local prev = redis.call("HMGET", KEYS[1], "status", "az", "instance")
if ARGV[17] ~= "" and prev[3] and prev[3] ~= "" and prev[3] ~= ARGV[17] then
  return {0, "", prev[3]}
end
if prev[2] and prev[2] ~= az then
  redis.call("ZREM", ARGV[16] .. "az:" .. prev[2] .. ":available", id)
end
redis.call("HSET", KEYS[1],
  "az", az, "status", ARGV[3], "weight", ARGV[5], "loadScore", ARGV[6], "gpus", ARGV[7],
  "model", ARGV[9], "updatedAt", ARGV[10], "gpusExpected", ARGV[8], "phase", ARGV[4],
  "soft", ARGV[13], "hard", ARGV[14], "instance", ARGV[17],
  "modelRevision", ARGV[18] or "", "modelDtype", ARGV[19] or "", "maxContext", ARGV[20] or "", "gpuFault", ARGV[21] or "",
  "c", table.concat({az, ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[8],
    (string.gsub(ARGV[13], ",", ";")), (string.gsub(ARGV[14], ",", ";"))}, "|"))
redis.call("PEXPIRE", KEYS[1], ARGV[11])
if ARGV[12] == "1" then
  redis.call("ZADD", KEYS[2], ARGV[6], id)
else
  redis.call("ZREM", KEYS[2], id)
end
local t = redis.call("TIME")
redis.call("ZADD", KEYS[4], t[1] * 1000 + math.floor(t[2] / 1000), id)
local member = redis.call("HGET", KEYS[5], id)
local served = "0"
if ARGV[12] == "1" or (member and string.sub(member, -2) == "|1") then served = "1" end
redis.call("HSET", KEYS[5], id, az .. "|" .. ARGV[8] .. "|" .. served)
redis.call("SADD", KEYS[6], az)
local back = redis.call("ZREM", KEYS[7], id)
local changed = 0
if prev[1] ~= ARGV[3] or back == 1 then
  changed = 1
  redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[15], "*",
    "type", "node", "node", id, "az", az, "from", prev[1] or "", "status", ARGV[3],
    "soft", ARGV[13], "hard", ARGV[14],
  "c", table.concat({az, ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[8],
    (string.gsub(ARGV[13], ",", ";")), (string.gsub(ARGV[14], ",", ";"))}, "|"))
end
return {changed, redis.call("HGET", ARGV[16] .. "suspect", "codes") or "", ""}
