/**
 * Who may do what in Redis: one ACL user per role, defined once here (a contract: the runtime
 * renders it as a redis-server ACL file with `llm-ha redis-acl` for the drill and the tests,
 * infra/redis.ts as ElastiCache RBAC users) over the keys of agent/src/fleet/redis/keys.ts (a test
 * holds the two together). A key not named here is out of reach of every role; a command not named
 * here is refused.
 *
 * No role may run Lua of its own: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and `SCRIPT` are
 * refused to every one (one `EVAL "while true do end" 0` made Redis answer BUSY to everyone).
 * llm-ha's scripts are Redis Functions (agent/src/fleet/redis/functions.ts): a role calls them
 * with `FCALL` (`FCALL_RO` for read-only ones), and only the controller (and the union role of
 * agents that contend for the lease) may `FUNCTION LOAD` them. Redis checks a function's key
 * access against the caller as it did a script's: every key passed in `KEYS` to `FCALL` must
 * be readable and writable by the user (`FCALL_RO`: readable), and each `redis.call` inside is
 * checked like a command of its own. So a role's command list holds what its functions call,
 * and a forged write through a function is refused like a direct one.
 *
 * The break-glass user (`llmha-breakglass`) ends a runaway script or function (`SCRIPT KILL`,
 * `FUNCTION KILL`) and loads the libraries at deploy time; it reaches no key.
 */

export const ROLE_NAMES = ["llmha-agent", "llmha-controller", "llmha-agent-leader", "llmha-fallback", "llmha-edge", "llmha-reader", "llmha-operator", "llmha-breakglass"] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/**
 * The roles a workload logs in as, whose passwords the stack's `redisRolePasswords` holds: every
 * one but the break-glass user, an operator's by hand (its own secret, `redisBreakglassPassword`).
 */
export const WORKLOAD_ROLE_NAMES: readonly RoleName[] = ROLE_NAMES.filter((r) => r !== "llmha-breakglass");

/**
 * `R` read only (`%R~`), `W` write only (`%W~`: `SET` without reading), `RW` both (`~`). A key
 * passed in a function's `KEYS` needs `RW` (Redis checks `FCALL`'s keys as read and write).
 */
export type KeyAccess = "R" | "W" | "RW";

export interface KeyGrant {
  /** A key or glob, full (cluster prefix included). */
  readonly pattern: string;
  readonly access: KeyAccess;
}

/** Extra commands allowed only on some keys (a Redis 7 selector). */
export interface Selector {
  readonly commands: readonly string[];
  readonly keys: readonly KeyGrant[];
}

export interface RedisRole {
  readonly name: RoleName;
  /** What the role is for, in a sentence (the ACL file's comment, docs/redis-roles.md). */
  readonly does: string;
  readonly commands: readonly string[];
  readonly keys: readonly KeyGrant[];
  readonly selectors: readonly Selector[];
}

export class RoleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RoleError";
  }
}

/**
 * Every client: the connection's own housekeeping (ioredis's ready check is `INFO`), and
 * transactions (each command inside is checked on its own: `/az/health` and `llm-ha status`
 * read a key and Redis's clock in one `MULTI`; without them the read fails and `/az/health`
 * fails open, 200, for an AZ that is down).
 */
const CONNECTION = ["ping", "info", "client|setname", "quit", "multi", "exec", "discard"];

/** Loading llm-ha's functions libraries: as powerful as EVAL, so the controller's alone (and break-glass). */
const LOAD_FUNCTIONS = ["function|load", "function|list"];

/** Commands no production role may hold: arbitrary Lua (roles.test.ts checks every role against it). */
export const ARBITRARY_LUA = ["eval", "evalsha", "eval_ro", "evalsha_ro", "script", "function|load", "function|delete", "function|flush", "function|restore"] as const;

const R = (pattern: string): KeyGrant => ({ pattern, access: "R" });
const W = (pattern: string): KeyGrant => ({ pattern, access: "W" });
const RW = (pattern: string): KeyGrant => ({ pattern, access: "RW" });

/** The key names of agent/src/fleet/redis/keys.ts, as this leaf module may not import it. */
function keyNames(cluster: string) {
  const prefix = `llmha:${cluster}:`;
  const s = (suffix: string): string => `${prefix}${suffix}`;
  return {
    prefix,
    node: (id: string) => s(`node:${id}`),
    azAvailable: (az: string) => s(`az:${az}:available`),
    azState: (az: string) => s(`az:${az}:state`),
    members: s("members"), inventory: s("inventory"), enrol: s("enrol"), enrolled: s("enrolled"), recordDigests: s("enrolled:digests"), capabilities: `llmha-caps:${cluster}`, nodes: s("nodes"), dead: s("dead"), azs: s("azs"), leader: s("leader"), fence: s("fence"), fenceLast: s("fence:last"),
    tier: s("tier"), standbyWake: s("standby:wake"), practiceRequest: s("practice:request"), actuation: s("actuation"), suspect: s("suspect"),
    events: s("events"), practice: s("practice"), models: s("models"), repairPlan: s("repair:plan"), repairHistory: s("repair:history"), repairActive: s("repair:active"),
    fallbackCache: s("fallback:cache:"), fallbackRequests: s("fallback:req:"), fallbackBodies: s("fallback:body:"), fallbackIdempotency: s("fallback:idem:"), fallbackQueue: s("fallback:queue"),
    edgeKeys: s("edge:keys"), edgeKeysRev: s("edge:keys:rev"),
    canaryAnswers: s("canary:answers"), canaryExpect: s("canary:expect"), canaryRecorded: s("canary:recorded"),
    rollout: s("rollout"), rolloutRequest: s("rollout:request"),
  };
}

/** The roles for one cluster's key namespace. */
export function redisRoles(cluster: string): RedisRole[] {
  if (!/^[A-Za-z0-9_.-]+$/.test(cluster)) throw new RoleError(`cluster name must match [A-Za-z0-9_.-]+, got ${JSON.stringify(cluster)}`);
  const k = keyNames(cluster);
  const agent: RedisRole = {
    name: "llmha-agent",
    does: "a GPU node's agent: its own node hash, its AZ's available set, the member/live/dead indexes (heartbeat-7, remove-5), events; reads what the leader published",
    commands: [...CONNECTION, "fcall", "hmget", "hget", "hgetall", "hset", "hdel", "del", "pexpire", "zadd", "zrem", "sadd", "smembers", "xadd", "time", "get", "pttl"],
    keys: [
      RW(k.node("*")), RW(k.azAvailable("*")), RW(k.nodes), RW(k.members), RW(k.dead), RW(k.azs), RW(k.events),
      R(k.leader), R(k.fenceLast), R(k.tier), R(k.azState("*")), R(k.standbyWake), R(k.actuation), R(k.suspect), R(k.practice), R(k.models),
      // Correctness canaries: its own answers (a field of the hash), the expectation it is judged by.
      RW(k.canaryAnswers), R(k.canaryExpect),
      // A rollout: the revisions it may serve now.
      R(k.rollout),
      // Enrolment: append its request (write only: no node reads another's token), read the sealed replies.
      W(k.enrol), R(k.enrolled),
    ],
    selectors: [],
  };
  const controller: RedisRole = {
    name: "llmha-controller",
    does: "the leader: lease acquire/renew/release, the fence, AZ states, tier, standby, actuation, suspect, models, practice state, the repair plan, history and active repairs (fenced-hset-3), the sweep (sweep-5); reads the registry",
    commands: [
      ...CONNECTION, "fcall", "fcall_ro", ...LOAD_FUNCTIONS, "wait",
      "get", "set", "del", "pexpire", "pttl", "time", "hget", "hmget", "hgetall", "hset", "hdel", "hscan", "exists",
      "zadd", "zrem", "zrangebyscore", "zmscore", "smembers", "xadd",
      // Enrolments: read the requests, delete each once answered.
      "xrange", "xdel",
      // The early look (controller/early.ts): follows `events` for nodes that worsen (read only, a key it already writes).
      "xread",
    ],
    keys: [
      RW(k.leader), RW(k.fence), RW(k.fenceLast), RW(k.azState("*")), RW(k.tier), RW(k.standbyWake), RW(k.actuation), RW(k.suspect),
      RW(k.models), RW(k.practice), RW(k.repairPlan), RW(k.repairHistory), RW(k.repairActive), RW(k.events), RW(k.inventory), RW(k.nodes), RW(k.dead), RW(k.members), RW(k.azAvailable("*")),
      R(k.node("*")), R(k.azs), R(k.practiceRequest),
      RW(k.canaryExpect), RW(k.canaryAnswers), R(k.canaryRecorded),
      RW(k.rollout), R(k.rolloutRequest),
      RW(k.enrol), RW(k.enrolled), RW(k.recordDigests), RW(k.capabilities),
    ],
    selectors: [],
  };
  const fallback: RedisRole = {
    name: "llmha-fallback",
    does: "the L4 fallback (internet-facing): reads verified answers (never writes one), its queued requests' results and queue depth; reads the tier and standby",
    commands: [...CONNECTION, "fcall", "get", "set", "time", "zadd", "zrem", "zscore", "zcard", "hget", "hset", "hdel", "decrby", "pexpire", "multi", "exec"],
    keys: [
      R(`${k.fallbackCache}e:*`), RW(`${k.fallbackCache}lru`), RW(`${k.fallbackCache}size`), R(`${k.fallbackCache}bytes`),
      RW(`${k.fallbackRequests}*`), RW(`${k.fallbackBodies}*`), RW(`${k.fallbackIdempotency}*`), RW(k.fallbackQueue), R(k.tier), R(k.standbyWake),
    ],
    // An expired entry's bookkeeping is dropped on a miss (DEL of the entry): deleting is allowed, writing one is not.
    // A cancelled request frees its tenant's idempotency key (DEL) so that the client's retry is a new request.
    selectors: [{ commands: ["del"], keys: [W(`${k.fallbackCache}e:*`), W(`${k.fallbackIdempotency}*`)] }],
  };
  const edge: RedisRole = {
    name: "llmha-edge",
    does: "`llm-ha edge-sync` in the L1 pod (internet-facing): reads the client keys' hashes and their revision, nothing else",
    commands: [...CONNECTION, "get", "hgetall"],
    keys: [R(k.edgeKeys), R(k.edgeKeysRev)],
    selectors: [],
  };
  const reader: RedisRole = {
    name: "llmha-reader",
    does: "`llm-ha status`: reads the cluster's keys but the queued requests' result bodies and the enrolment requests, writes nothing",
    commands: [...CONNECTION, "fcall_ro", "get", "pttl", "hget", "hgetall", "hmget", "hscan", "smembers", "exists", "zmscore", "xrevrange", "scan", "time"],
    keys: readKeys(k),
    selectors: [],
  };
  const operator: RedisRole = {
    name: "llmha-operator",
    does: "an operator: everything `llm-ha status` reads, a practice wake request (`llm-ha practice`), a rollout request (`llm-ha rollout`), the verified-answer cache (`llm-ha cache import|list|rm`), the edge's client keys (`llm-ha keys`)",
    commands: [...reader.commands, "fcall", "set", "del", "zadd", "zrem", "zrange", "zrevrange", "zcard", "hset", "hdel", "incr", "incrby", "decrby", "multi", "exec"],
    keys: [...readKeys(k).filter((g) => g.pattern !== k.practiceRequest && g.pattern !== k.rolloutRequest), RW(k.practiceRequest), RW(`${k.fallbackCache}*`), RW(k.edgeKeys), RW(k.edgeKeysRev), RW(k.canaryRecorded), RW(k.rolloutRequest)],
    selectors: [],
  };
  const breakglass: RedisRole = {
    name: "llmha-breakglass",
    does: "an operator's last resort when Redis answers BUSY (a runaway script or function): SCRIPT KILL, FUNCTION KILL, FUNCTION STATS; loads llm-ha's functions at deploy time (`llm-ha redis-functions`); reaches no key",
    commands: ["ping", "info", "client|setname", "quit", "script|kill", "function|kill", "function|stats", ...LOAD_FUNCTIONS, "function|delete"],
    keys: [],
    selectors: [],
  };
  return [agent, controller, union("llmha-agent-leader", "an agent that may win the lease: the leader runs inside an agent process today, so agents that contend hold both roles", agent, controller), fallback, edge, reader, operator, breakglass];
}

/**
 * What `llm-ha status` and the operator's commands read, named key by key (no `llmha:<cluster>:*`):
 * never a queued request's result body (`fallback:body:*`: a tenant's completion, the fallback
 * serves it to that tenant alone; the record `fallback:req:*` beside it holds the metadata), nor
 * the enrolment stream (`enrol`: the nodes' projected tokens), nor the tenants' idempotency keys.
 */
function readKeys(k: ReturnType<typeof keyNames>): KeyGrant[] {
  return [
    R(k.node("*")), R(k.azAvailable("*")), R(k.azState("*")), R(k.members), R(k.inventory), R(k.enrolled), R(k.recordDigests), R(k.nodes), R(k.dead), R(k.azs),
    R(k.leader), R(k.fence), R(k.fenceLast), R(k.tier), R(k.standbyWake), R(k.practiceRequest), R(k.actuation), R(k.suspect),
    R(k.events), R(k.practice), R(k.models), R(k.repairPlan), R(k.repairHistory), R(k.repairActive),
    R(`${k.fallbackCache}*`), R(`${k.fallbackRequests}*`), R(k.fallbackQueue),
    R(k.edgeKeys), R(k.edgeKeysRev), R(k.canaryAnswers), R(k.canaryExpect), R(k.canaryRecorded),
    R(k.rollout), R(k.rolloutRequest),
  ];
}

function union(name: RoleName, does: string, ...roles: RedisRole[]): RedisRole {
  const keys = new Map<string, KeyGrant>();
  for (const g of roles.flatMap((r) => r.keys)) {
    const had = keys.get(g.pattern);
    keys.set(g.pattern, had && had.access !== g.access ? RW(g.pattern) : g);
  }
  return { name, does, commands: [...new Set(roles.flatMap((r) => r.commands))], keys: [...keys.values()], selectors: roles.flatMap((r) => r.selectors) };
}

export function redisRole(cluster: string, name: string): RedisRole {
  const r = redisRoles(cluster).find((x) => x.name === name);
  if (!r) throw new RoleError(`unknown Redis role ${JSON.stringify(name)}; the roles are ${ROLE_NAMES.join(", ")}`);
  return r;
}

function grant(g: KeyGrant): string {
  return g.access === "RW" ? `~${g.pattern}` : `%${g.access}~${g.pattern}`;
}

/**
 * The role's permissions as Redis ACL rules without the password and without `on`:
 * ElastiCache's access string is `on ` + this, redis-server's ACL line adds a password hash.
 */
export function aclRules(role: RedisRole): string {
  const parts = ["resetkeys", "resetchannels", "-@all", ...role.commands.map((c) => `+${c}`), ...role.keys.map(grant)];
  for (const s of role.selectors) parts.push(`(${[...s.commands.map((c) => `+${c}`), ...s.keys.map(grant)].join(" ")})`);
  return parts.join(" ");
}

/** ElastiCache's `accessString` for a role (the password is set apart, never in the string). */
export function accessString(role: RedisRole): string {
  return `on ${aclRules(role)}`;
}

/** `redis[s]://user:password@host:port[/db]`, user and password percent-encoded (a token with `#`, `?`, `%` or `@` stays whole). */
export function redisUrl(e: { host: string; port: number; tls?: boolean; username?: string; password?: string; db?: number }): string {
  const auth = e.username || e.password ? `${encodeURIComponent(e.username ?? "")}${e.password ? `:${encodeURIComponent(e.password)}` : ""}@` : "";
  const host = e.host.includes(":") && !e.host.startsWith("[") ? `[${e.host}]` : e.host;
  return `${e.tls ? "rediss" : "redis"}://${auth}${host}:${e.port}${e.db ? `/${e.db}` : ""}`;
}
