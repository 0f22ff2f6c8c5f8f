/**
 * No role a node or a pod holds can run Lua of its own: llm-ha's scripts are Redis Functions
 * (agent/src/fleet/redis/functions.ts), called with FCALL, loaded by the controller alone. On a
 * real redis-server with the rendered ACL file: every production role is refused EVAL, EVALSHA,
 * SCRIPT LOAD and (but the controller's) FUNCTION LOAD; an agent's `EVAL "while true do end" 0`
 * is refused and the controller is not answered BUSY; the controller reloads the library after
 * a FUNCTION FLUSH while an agent waits for it; an oversized field is refused by name; the
 * break-glass user ends a runaway function and reads no key.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Redis } from "ioredis";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { FunctionsMissingError, loadLibrary } from "../../agent/src/fleet/redis/functions";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { allLibraries } from "../../agent/src/fleet/redis/libraries";
import { ROLE_NAMES, type RoleName } from "../../agent/src/fleet/redis/roles";
import { acquireScript, fleetLibrary, heartbeatScript, readNodesScript, releaseScript, renewScript, type HeartbeatArgs, type HeartbeatKeys } from "../../agent/src/fleet/redis/scripts";
import { redisFunctionsCommand } from "../../agent/src/fleet/redis/functions-command";
import { labRedisAcl, labRoleEnv, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { testLogger } from "./helpers";

const CLUSTER = "fn";
const keys = new RedisKeys(CLUSTER);
const PRODUCTION: RoleName[] = ROLE_NAMES.filter((r) => r !== "llmha-breakglass");
const LOADERS: RoleName[] = ["llmha-controller", "llmha-agent-leader"];
let server: RedisServerHandle;
let acl: LabRedisAcl;
const raws: Redis[] = [];
const clients: RedisClient[] = [];

function raw(role: RoleName | "admin"): Redis {
  const r = new Redis(role === "admin" ? server.url : server.urlAs(role), { maxRetriesPerRequest: 0, enableReadyCheck: false, commandTimeout: 3000 });
  r.on("error", () => undefined);
  raws.push(r);
  return r;
}

async function as(role: RoleName, loadFunctions = false): Promise<RedisClient> {
  const c = createRedisClient(server.urlAs(role), { name: `fn-${role}`, log: testLogger(), env: {}, loadFunctions, followEndpointMs: 0 });
  clients.push(c);
  expect(await c.whenReady(5000)).toBe(true);
  return c;
}

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return (err as Error).message;
  }
}

function hb(nodeId: string, over: Partial<HeartbeatArgs> = {}): [HeartbeatKeys, HeartbeatArgs] {
  return [
    { node: keys.node(nodeId), available: keys.azAvailable("az-a"), events: keys.events, nodes: keys.nodes, members: keys.members, azs: keys.azs, dead: keys.dead },
    {
      nodeId, az: "az-a", status: "HEALTHY", phase: "serving", weight: 100, loadScore: 1, gpus: 8, gpusExpected: 8, model: "m", updatedAt: Date.now(),
      ttlMs: 5000, takesTraffic: true, soft: "", hard: "", eventsMaxLen: 100, prefix: keys.prefix, instance: "", ...over,
    },
  ];
}

beforeAll(async () => {
  acl = labRedisAcl(CLUSTER);
  // BUSY after 200 ms of a running script (Redis's default is 5 s): what a client sees of a runaway one.
  server = await startRedisServer({ acl, args: ["--busy-reply-threshold", "200"] });
});
afterAll(async () => {
  for (const r of raws) r.disconnect();
  for (const c of clients) await c.close();
  await server?.stop();
});

describe("no EVAL for any production role", () => {
  it("every production role is refused EVAL, EVALSHA, EVAL_RO, SCRIPT LOAD/KILL; only the controller's may FUNCTION LOAD", async () => {
    const lib = fleetLibrary();
    for (const role of PRODUCTION) {
      const r = raw(role);
      for (const [what, cmd] of [
        ["EVAL", ["EVAL", "return 1", "0"]],
        ["EVALSHA", ["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]],
        ["EVAL_RO", ["EVAL_RO", "return 1", "0"]],
        ["EVALSHA_RO", ["EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]],
        ["SCRIPT LOAD", ["SCRIPT", "LOAD", "return 1"]],
        ["SCRIPT KILL", ["SCRIPT", "KILL"]],
        ["FUNCTION FLUSH", ["FUNCTION", "FLUSH"]],
        ["FUNCTION DELETE", ["FUNCTION", "DELETE", lib.name]],
      ] as const) {
        expect(await outcome(r.call(cmd[0], ...cmd.slice(1))), `${role} ${what}`).toMatch(/NOPERM/);
      }
      const load = await outcome(r.call("FUNCTION", "LOAD", "REPLACE", lib.code));
      if (LOADERS.includes(role)) expect(load, `${role} FUNCTION LOAD`).toBe("ok");
      else expect(load, `${role} FUNCTION LOAD`).toMatch(/NOPERM/);
    }
  });

  it("an agent's EVAL \"while true do end\" 0 is refused: the controller's next call is not answered BUSY", async () => {
    const agent = raw("llmha-agent");
    const spin = outcome(agent.call("EVAL", "while true do end", "0"));
    const ctl = await as("llmha-controller", true);
    const t0 = performance.now();
    const got = await acquireScript(ctl.redis, keys, "ctl-busy", 5000, 0);
    expect(got.acquired).toBe(true);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await spin).toMatch(/NOPERM/);
    if (got.acquired) expect(await renewScript(ctl.redis, keys.leader, `ctl-busy:${got.token}`, 5000)).toBe(true);
    if (got.acquired) await releaseScript(ctl.redis, keys.leader, `ctl-busy:${got.token}`);
  });

  it("after FUNCTION FLUSH an agent waits (bounded, then a named error) and the controller reloads the library by itself", async () => {
    const admin = raw("admin");
    const agent = await as("llmha-agent");
    const ctl = await as("llmha-controller", true);
    // The controller loads the libraries when it connects, in the background: let that load finish
    // first, or it may land after the FLUSH and the agent finds the library there (seen once in five).
    for (const lib of allLibraries()) await loadLibrary(ctl.redis, lib);
    expect(await admin.call("FUNCTION", "FLUSH")).toBe("OK");
    const t0 = performance.now();
    const [k, a] = hb("after-flush");
    const waited = await outcome(heartbeatScript(agent.redis, k, a));
    expect(waited).toMatch(new RegExp(`no function ${fleetLibrary().name}_heartbeat: library ${fleetLibrary().name} is not loaded`));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(400); // two retries 250 ms apart
    await expect(heartbeatScript(agent.redis, k, a)).rejects.toBeInstanceOf(FunctionsMissingError);
    // The controller's next call finds the function missing, loads the library and goes on.
    const got = await acquireScript(ctl.redis, keys, "ctl-reload", 5000, 0);
    expect(got.acquired).toBe(true);
    const held = JSON.stringify(await admin.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*"));
    for (const lib of allLibraries()) expect(held).toContain(lib.name);
    expect((await heartbeatScript(agent.redis, k, a)).heldBy).toBeNull();
    if (got.acquired) await releaseScript(ctl.redis, keys.leader, `ctl-reload:${got.token}`);
  });

  it("the controller loads the libraries when it connects", async () => {
    const admin = raw("admin");
    expect(await admin.call("FUNCTION", "FLUSH")).toBe("OK");
    await as("llmha-controller", true);
    const deadline = Date.now() + 3000;
    let held = "";
    while (Date.now() < deadline && !allLibraries().every((l) => held.includes(l.name))) {
      held = JSON.stringify(await admin.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*"));
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const lib of allLibraries()) expect(held).toContain(lib.name);
  });

  it("an oversized field is refused by name and nothing is written; a forged FCALL outside the role's keys is refused", async () => {
    const agent = await as("llmha-agent");
    const [k, a] = hb("big-1", { az: "x".repeat(5000) });
    expect(await outcome(heartbeatScript(agent.redis, k, a))).toMatch(/heartbeat: argument ARGV\[2\] \(az\) is 5000 bytes, over the bound of 4096/);
    const [k2, a2] = hb("big-2", { model: "m".repeat(4097) });
    expect(await outcome(heartbeatScript(agent.redis, k2, a2))).toMatch(/ARGV\[9\] \(model\) is 4097 bytes/);
    const admin = raw("admin");
    expect(await admin.exists(keys.node("big-1"), keys.node("big-2"))).toBe(0);
    // Too many arguments and the wrong number of keys are refused before the script runs.
    const fn = `${fleetLibrary().name}_heartbeat`;
    expect(await outcome(agent.redis.call("FCALL", fn, 7, ...Object.values(k).slice(0, 7), ...Array.from({ length: 100 }, () => "x")))).toMatch(/at most 64 arguments/);
    expect(await outcome(agent.redis.call("FCALL", fn, 1, keys.node("x")))).toMatch(/takes 7 keys, got 1/);
    // The agent may FCALL the controller's functions, but not with keys its user cannot write.
    expect(await outcome(agent.redis.call("FCALL", `${fleetLibrary().name}_acquire`, 3, keys.leader, keys.fence, keys.fenceLast, "evil", 60000, 0))).toMatch(/NOPERM|no permissions/);
    // The reader's read-only registry page goes as FCALL_RO.
    const reader = await as("llmha-reader");
    expect((await readNodesScript(reader.redis, keys.members, keys.prefix, "0", 10)).cursor).toBe("0");
  });

  it("Redis never evicts (noeviction): full, it refuses an agent's heartbeat (OOM) and keeps the lease, which the controller still renews", async () => {
    const admin = raw("admin");
    expect(await admin.config("GET", "maxmemory-policy")).toEqual(["maxmemory-policy", "noeviction"]);
    const ctl = await as("llmha-controller", true);
    const agent = await as("llmha-agent");
    const got = await acquireScript(ctl.redis, keys, "ctl-oom", 5000, 0);
    expect(got.acquired).toBe(true);
    const value = `ctl-oom:${got.acquired ? got.token : 0}`;
    await admin.config("SET", "maxmemory", "1");
    try {
      expect(await outcome(heartbeatScript(agent.redis, ...hb("oom-1")))).toMatch(/OOM/);
      expect(await renewScript(ctl.redis, keys.leader, value, 5000)).toBe(true);
      expect(await admin.get(keys.leader)).toBe(value);
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }
    expect(await releaseScript(ctl.redis, keys.leader, value)).toBe(true);
  });

  it("break-glass: ends a runaway function that made Redis answer BUSY, and reads no key", async () => {
    const admin = raw("admin");
    // Only a trusted identity could load this; it stands for any script that never returns.
    await admin.call("FUNCTION", "LOAD", "REPLACE", "#!lua name=llmhatest_spin\nredis.register_function('llmhatest_spin', function() while true do end end)");
    const spinner = raw("admin");
    const spin = outcome(spinner.call("FCALL", "llmhatest_spin", "0"));
    await new Promise((r) => setTimeout(r, 400));
    const ctl = raw("llmha-controller");
    expect(await outcome(ctl.call("FCALL", `${fleetLibrary().name}_renew`, 1, keys.leader, "x", 1000))).toMatch(/BUSY/);
    const bg = raw("llmha-breakglass");
    expect(await bg.call("FUNCTION", "KILL")).toBe("OK");
    expect(await spin).toMatch(/killed/i);
    expect(await outcome(ctl.call("FCALL", `${fleetLibrary().name}_renew`, 1, keys.leader, "x", 1000))).toBe("ok");
    expect(await outcome(bg.call("SCRIPT", "KILL"))).toMatch(/NOTBUSY/);
    for (const r of await Promise.all([outcome(bg.get(keys.leader)), outcome(bg.hgetall(keys.node("a"))), outcome(bg.call("EVAL", "return 1", "0")), outcome(bg.call("FCALL", `${fleetLibrary().name}_renew`, 1, keys.leader, "x", 1))])) {
      expect(r).toMatch(/NOPERM|no permissions/);
    }
    await admin.call("FUNCTION", "DELETE", "llmhatest_spin");
  });

  it("llm-ha redis-functions: the break-glass user loads this build's libraries, lists them, prunes another build's", async () => {
    const admin = raw("admin");
    expect(await admin.call("FUNCTION", "FLUSH")).toBe("OK");
    await admin.call("FUNCTION", "LOAD", "#!lua name=llmha_fleet_000000000000\nredis.register_function('llmha_fleet_000000000000_x', function() return 1 end)");
    const dir = mkdtempSync(join(tmpdir(), "llmha-fn-"));
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
    try {
      const env = { LLMHA_REDIS_URL: `redis://127.0.0.1:${server.port}`, ...labRoleEnv(acl, dir, "llmha-breakglass") };
      expect(await redisFunctionsCommand(["load"], env)).toBe(0);
      expect(await redisFunctionsCommand(["list"], env)).toBe(0);
      expect(await redisFunctionsCommand(["prune"], env)).toBe(0);
      // A role that may not load is refused, with exit 1 and Redis's reason.
      expect(await redisFunctionsCommand(["load"], { LLMHA_REDIS_URL: env.LLMHA_REDIS_URL, ...labRoleEnv(acl, dir, "llmha-agent") })).toBe(1);
    } finally {
      spy.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
    const text = out.join("");
    for (const lib of allLibraries()) {
      expect(text).toContain(`loaded ${lib.name}`);
      expect(text).toContain(`* ${lib.name}`);
    }
    expect(text).toContain("  llmha_fleet_000000000000");
    expect(text).toContain("deleted llmha_fleet_000000000000");
    const held = JSON.stringify(await admin.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*"));
    expect(held).not.toContain("llmha_fleet_000000000000");
    for (const lib of allLibraries()) expect(held).toContain(lib.name);
  });
});
