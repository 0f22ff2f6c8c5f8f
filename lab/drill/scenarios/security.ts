/**
 * Least privilege inside: what one stolen credential or one hostile pod can do.
 *
 * - `redis-forgery`: with the fallback's Redis credentials (a compromised internet-facing
 *   pod) forge two healthy nodes' hashes as failed, take the lease, poison the fence, write
 *   the tier, request a practice wake and plant a cache entry; run Lua of its own (`EVAL`, also
 *   with the agents' credential, also `while true do end`), load a functions library, and call
 *   llm-ha's functions (`FCALL`) with forged arguments. Every write must be refused, no AZ
 *   state change, no actuator call, no forged answer, Redis never BUSY.
 *   Then, with a GPU node's own credentials (the agent role: a node's root has them), what the
 *   role may write but the leader must not believe: a phantom member with a failed record in
 *   another AZ, a member moved to another AZ, a phantom id in an AZ's available set, and the
 *   shared indexes (`nodes`, `dead`, `azs`) deleted, another node's record forged failed and
 *   held by a foreign instance, an enrolment as another node with a made-up token. The leader
 *   reads which nodes exist from its inventory (the local cloud's `/api/v1/nodes`) and each
 *   node's record under the key it handed that node at enrolment: no AZ state change, no
 *   actuator call, the forged node keeps heartbeating (no false failover).
 * - `agent-starve`: 600 idle agent-check sockets and 300 slowloris HTTP sockets from another
 *   address against one node's agent; its liveness and readiness probes and HAProxy's checks
 *   keep getting answers, nothing fails over, and a real fault under the flood still takes
 *   the node out within its L1 target.
 */
import { request } from "node:http";
import { Redis } from "ioredis";
import { createHash } from "node:crypto";
import { fallbackLibrary } from "../../../agent/src/fleet/redis/fallback-functions";
import { callFunction } from "../../../agent/src/fleet/redis/functions";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { fencedHsetScript, heartbeatScript } from "../../../agent/src/fleet/redis/scripts";
import { sleep } from "../../../agent/src/util/net";
import { ATTACKER, flood, slowloris } from "../hold-flood";
import type { SimNode } from "../../sim/sim-node";
import type { ScenarioSpec } from "../scenarios";
import { l1Removed } from "../timeline";
import { NODE_FAULTS } from "./node";
import { blank, finish, mark, nextVictim, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** Watching for any effect of the forgeries: longer than the controller's hysteresis and two lease contend periods. */
const FORGERY_WATCH_MS = 8000;

async function azStates(admin: Redis, keys: RedisKeys, azs: string[]): Promise<string> {
  const states = await Promise.all(azs.map((az) => admin.hget(keys.azState(az), "state")));
  return azs.map((az, i) => `${az}=${states[i] ?? ""}`).join(",");
}

export async function runRedisForgery(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const keys = new RedisKeys(ctx.stack.cluster);
  const azs = ctx.stack.azs.map((a) => a.name);
  const admin = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1 });
  const thief = new Redis(ctx.stack.redis.urlAs("llmha-fallback"), { maxRetriesPerRequest: 0 });
  // The agents' credential is on every GPU node: it must not run Lua of its own either.
  const nodeThief = new Redis(ctx.stack.redis.urlAs("llmha-agent"), { maxRetriesPerRequest: 0, commandTimeout: 2000 });
  admin.on("error", () => undefined);
  thief.on("error", () => undefined);
  nodeThief.on("error", () => undefined);
  try {
    const before = await azStates(admin, keys, azs);
    const tierBefore = await admin.hget(keys.tier, "level");
    const actionsBefore = ctx.stack.cloud?.actions.length ?? 0;
    const entriesBefore = (await admin.keys(`${keys.fallbackCache}e:*`)).length;
    const victims = ctx.stack.running().filter((n) => !ctx.stack.azOf(n).standby).slice(0, 2);
    r.injectAt = mark(ctx, "inject", "forged writes with the fallback's credentials");
    const h = createHash("sha256").update("forged").digest("hex");
    const attempts: [string, () => Promise<unknown>][] = [
      ...victims.flatMap((n): [string, () => Promise<unknown>][] => [
        [`node hash ${n.id}`, () => thief.hset(keys.node(n.id), "status", "UNHEALTHY", "c", `${n.az}|UNHEALTHY|down|0|0|8||GPU_LOST`)],
        [`available set ${n.id}`, () => thief.zrem(keys.azAvailable(n.az), n.id)],
      ]),
      ["lease", () => thief.set(keys.leader, "thief:99999999999999", "PX", 60_000)],
      ["fence counter", () => thief.set(keys.fence, "1e400")],
      ["fence poison", () => thief.hset(keys.fenceLast, "token", "1e400")],
      ["tier", () => thief.hset(keys.tier, "level", "L4")],
      ["az state", () => thief.hset(keys.azState(azs[0]), "state", "DOWN")],
      ["suspect codes", () => thief.hset(keys.suspect, "codes", "GPU_LOST")],
      ["practice request", () => thief.set(keys.practiceRequest, String(Date.now()), "PX", 60_000)],
      ["cache entry", () => thief.set(`${keys.fallbackCache}e:${h}`, JSON.stringify({ key: h, answer: "forged" }), "PX", 60_000)],
      ["script write (EVAL)", () => thief.eval("return redis.call('HSET', KEYS[1], 'level', 'L4')", 1, keys.tier)],
      ["script write (EVAL, agent credential)", () => nodeThief.eval("return redis.call('HSET', KEYS[1], 'level', 'L4')", 1, keys.tier)],
      // Accepted, this answers BUSY to every client (a time-out here counts as accepted; SCRIPT KILL below ends it).
      ["endless script (EVAL, agent credential)", () => nodeThief.call("EVAL", "while true do end", "0")],
      ["functions library (FUNCTION LOAD)", () => thief.call("FUNCTION", "LOAD", "REPLACE", "#!lua name=thief\nredis.register_function('thief', function() return 1 end)")],
      ...victims.map((n): [string, () => Promise<unknown>] => [
        `forged heartbeat ${n.id} (FCALL)`,
        () =>
          heartbeatScript(
            thief,
            { node: keys.node(n.id), available: keys.azAvailable(n.az), events: keys.events, nodes: keys.nodes, members: keys.members, azs: keys.azs, dead: keys.dead },
            {
              nodeId: n.id, az: n.az, status: "UNHEALTHY", phase: "down", weight: 0, loadScore: 0, gpus: 0, gpusExpected: 8, model: "", updatedAt: Date.now(),
              ttlMs: 60_000, takesTraffic: false, soft: "", hard: "GPU_LOST", eventsMaxLen: 100, prefix: keys.prefix, instance: "",
            },
          ),
      ]),
      ["forged fenced tier write (FCALL)", () => fencedHsetScript(thief, { fenceLast: keys.fenceLast, target: keys.tier, events: keys.events, token: 99_999_999_999_999, holder: "thief", eventsMaxLen: 100, fields: { level: "L4" } })],
      ["forged cache entry (FCALL)", () => callFunction(thief, fallbackLibrary(), "cachePut", [], [keys.fallbackCache, h, JSON.stringify({ key: h, answer: "forged" }), 60_000, 0, 10_000, 64 * 1024 * 1024])],
    ];
    let accepted = 0;
    for (const [what, go] of attempts) {
      try {
        await go();
        accepted += 1;
        r.notes.push(`ACCEPTED: ${what}`);
      } catch (err) {
        const msg = (err as Error).message;
        if (/timed out|BUSY/i.test(msg)) {
          // A script that runs on: Redis is answering BUSY. End it, and count it.
          accepted += 1;
          r.notes.push(`ACCEPTED: ${what} (${msg.slice(0, 60)})`);
          await admin.call("SCRIPT", "KILL").catch(() => undefined);
        } else if (!/NOPERM|no permissions|can't access/i.test(msg)) r.notes.push(`${what}: ${msg.slice(0, 80)}`);
      }
    }
    // A GPU node's own credentials: Redis accepts these writes (the role needs them for its own
    // record); the leader, reading its inventory, must not act on them.
    const nodeCred = new Redis(ctx.stack.redis.urlAs("llmha-agent"), { maxRetriesPerRequest: 0 });
    nodeCred.on("error", () => undefined);
    const nodeAttempts = nodeCredentialPlaybook(ctx, keys, nodeCred, victims);
    let nodeWrites = 0;
    try {
      for (const [what, go] of nodeAttempts) {
        try {
          await go();
          nodeWrites += 1;
        } catch (err) {
          r.notes.push(`node credential, ${what}: ${(err as Error).message.slice(0, 80)}`);
        }
      }
    } finally {
      nodeCred.disconnect();
    }
    await until(ctx, FORGERY_WATCH_MS, () => false);
    const changed = (await azStates(admin, keys, azs)) !== before ? 1 : 0;
    if (changed) r.notes.push(`AZ states ${before} → ${await azStates(admin, keys, azs)}`);
    r.healAt = mark(ctx, "heal", "watch over");
    r.endAt = ctx.now();
    finish(ctx, r, [], l1Removed);
    r.extra.forgedWrites = accepted;
    r.extra.azStatesChanged = changed + ((await admin.hget(keys.tier, "level")) !== tierBefore ? 1 : 0);
    r.extra.actuatorCalls = (ctx.stack.cloud?.actions.length ?? 0) - actionsBefore;
    r.extra.answersForged = (await admin.keys(`${keys.fallbackCache}e:*`)).length - entriesBefore;
    r.extra.attempts = attempts.length;
    r.extra.nodeCredentialWrites = nodeWrites;
  } finally {
    thief.disconnect();
    nodeThief.disconnect();
    admin.disconnect();
  }
  return r;
}

/**
 * What a GPU node's own Redis credential (the agent role: root on one node has it) may write but the
 * leader must not believe: a phantom member with a failed record in another AZ, a member moved to
 * another AZ, a phantom id in an available set, the shared indexes deleted, another node's record
 * forged failed and held by a foreign instance for 10 years, an enrolment as another node with a
 * made-up token. Shared by `redis-forgery` and `node-compromise`.
 */
export function nodeCredentialPlaybook(ctx: ScenarioContext, keys: RedisKeys, nodeCred: Redis, victims: readonly SimNode[]): [string, () => Promise<unknown>][] {
  const azs = ctx.stack.azs.map((a) => a.name);
  const other = ctx.stack.running().find((n) => !ctx.stack.azOf(n).standby && n.az !== victims[0]?.az) ?? victims[0];
  const phantomAz = other?.az ?? azs[0];
  return [
    ["phantom member", () => nodeCred.hset(keys.members, "ghost-1", `${phantomAz}|64|1`)],
    ["phantom record", () => nodeCred.hset(keys.node("ghost-1"), "az", phantomAz, "status", "UNHEALTHY", "c", `${phantomAz}|UNHEALTHY|down|0|0|64||GPU_LOST`)],
    ["phantom in an available set", () => nodeCred.zadd(keys.azAvailable(phantomAz), 0, "ghost-2")],
    ...(victims[0] && other && other.az !== victims[0].az ? [[`member ${victims[0].id} moved to ${other.az}`, () => nodeCred.hset(keys.members, victims[0].id, `${other.az}|8|1`)] as [string, () => Promise<unknown>]] : []),
    ["shared indexes deleted", () => nodeCred.del(keys.nodes, keys.dead, keys.azs)],
    // Another node's record, failed, held by a foreign instance for 10 years: the leader reads each node's record under its own capability key.
    ...(other ? [[`${other.id}'s record forged failed and held`, () => nodeCred.multi().hset(keys.node(other.id), "az", other.az, "status", "UNHEALTHY", "instance", "evil", "c", `${other.az}|UNHEALTHY|down|0|0|8||GPU_LOST`).pexpire(keys.node(other.id), 10 * 365 * 86_400_000).exec()] as [string, () => Promise<unknown>]] : []),
    ["an enrolment as another node with a made-up token", () => nodeCred.xadd(keys.enrol, "*", "nodeId", other?.id ?? "gpu-b1", "token", "e30.e30.forged", "publicKey", "x")],
  ];
}

// ---- agent-starve -------------------------------------------------------------------------

/** Where the kubelet's probes come from in the drill. */
const KUBELET = "127.0.0.5";

/**
 * One kubelet probe: true when answered as a probe must be — `/livez` 200 (the agent's loop
 * lives), `/readyz` any answer (200 or 503 is the node's own state, which a loaded machine may
 * make UNKNOWN; what the flood must not cause is no answer).
 */
function probe(n: SimNode, path: "/livez" | "/readyz"): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: n.address, port: n.httpPort, path, localAddress: KUBELET, timeout: 1000, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(path === "/readyz" ? res.statusCode === 200 || res.statusCode === 503 : res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

export async function runAgentStarve(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const n = nextVictim(ctx);
  const az = ctx.stack.azOf(n);
  const row = rowOf(ctx, n);
  const stopHttp = flood(n.address, n.httpPort, 300, slowloris);
  const stopCheck = flood(n.address, n.agentCheckPort, 600, () => undefined);
  let probesFailed = 0;
  let probes = 0;
  let checksUnanswered = 0;
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const ok = await Promise.all([probe(n, "/livez"), probe(n, "/readyz")]);
      probes += 2;
      probesFailed += ok.filter((x) => !x).length;
      const stat = (await az.haproxy?.stats().catch(() => []))?.find((x) => `${x.proxy}/${x.server}` === row);
      if (stat && /Layer4|timeout|refused|problem/i.test(stat.agentDesc)) checksUnanswered += 1;
      await sleep(250);
    }
  })();
  try {
    r.injectAt = mark(ctx, "inject", `flood ${n.id}: 600 idle agent-check + 300 slowloris sockets from ${ATTACKER}`);
    await until(ctx, 8000, () => false);
    // Stop counting probes before the real fault: a crashed node's /readyz must fail.
    probing = false;
    await prober;
    const faultAt = mark(ctx, "inject", `real fault under the flood: crash ${n.id}`);
    await NODE_FAULTS.crash.inject(n);
    await until(ctx, 5000, (s) => l1Removed(s.l1[row]));
    const out = ctx.tl.samples.find((s) => s.t >= faultAt && l1Removed(s.l1[row]));
    r.extra.l1UnderFloodMs = out ? out.t - faultAt : null;
    r.l1Ms = out ? out.t - faultAt : null;
    r.healAt = mark(ctx, "heal", `heal ${n.id}, flood stopped`);
  } finally {
    probing = false;
    stopHttp();
    stopCheck();
  }
  try {
    await NODE_FAULTS.crash.heal(n);
    if (!(await until(ctx, 30_000, (s) => s.nodes[n.id]?.status === "HEALTHY"))) r.notes.push(`${n.id} not HEALTHY 30 s after the heal`);
  } catch (err) {
    r.notes.push(`heal of ${n.id} failed: ${(err as Error).message}`);
  }
  r.endAt = ctx.now();
  // False failovers before the real fault: any row out while only the flood ran.
  finish(ctx, r, [n], l1Removed);
  r.extra.probes = probes;
  r.extra.probesFailed = probesFailed;
  r.extra.checksUnanswered = checksUnanswered;
  return r;
}
