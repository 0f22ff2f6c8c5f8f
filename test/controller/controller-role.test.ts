/**
 * Who holds the cloud: the controller runs apart from the GPU nodes. Real
 * processes against a real redis-server with the rendered ACL file: a `LLMHA_ROLE=controller`
 * agent logged in as `llmha-controller` takes the lease and publishes the AZ states from the
 * node's record, registering no node of its own; a `LLMHA_ROLE=node` agent logged in as
 * `llmha-agent` never contends — not while the controller leads, not after it left (Redis's
 * ACL log shows no refused attempt from it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseConfig } from "../../agent/src/config/load";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { stopChild } from "../../lab/engines/child";
import { IMAGE_CLI } from "../../lab/cli-process";
import { allLibraries } from "../../agent/src/fleet/redis/libraries";
import { labRedisAcl, labRoleEnv, type LabRedisAcl } from "../../lab/engines/redis-acl";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { SimNode } from "../../lab/sim/sim-node";
import { testLogger } from "../redis/helpers";

const CLUSTER = "ctlrole";
const keys = new RedisKeys(CLUSTER);
const LEASE = { LLMHA_LEASE_TTL_MS: "1500", LLMHA_LEASE_RENEW_MS: "500", LLMHA_LEASE_CONTEND_MS: "300", LLMHA_INTERVAL_MS: "300", LLMHA_CANARY_INTERVAL_MS: "0" };

let server: RedisServerHandle;
let acl: LabRedisAcl;
let dir: string;
let admin: RedisClient;
let node: SimNode | undefined;
let controller: ChildProcess | undefined;

beforeAll(async () => {
  acl = labRedisAcl(CLUSTER);
  // No functions library loaded by the lab: the controller must load it itself (the node agent may not).
  server = await startRedisServer({ acl, functions: false });
  dir = mkdtempSync(join(tmpdir(), "llmha-ctlrole-"));
  admin = createRedisClient(server.url, { name: "ctlrole-admin", log: testLogger(), env: {} });
  expect(await admin.whenReady(5000)).toBe(true);
});
afterAll(async () => {
  if (controller) await stopChild(controller, { signal: "SIGKILL", graceMs: 1000 });
  await node?.stop();
  await admin?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return (await res.json()) as Record<string, unknown>;
}

/** Refusals Redis logged for `user` (a node agent that tried to acquire the lease would be one). */
async function refusedFor(user: string): Promise<string[]> {
  const log = (await admin.redis.call("ACL", "LOG")) as unknown[][];
  const entries = log.map((e) => Object.fromEntries(Array.from({ length: e.length / 2 }, (_, i) => [String(e[2 * i]), String(e[2 * i + 1])])));
  return entries.filter((e) => e.username === user).map((e) => `${e.reason} ${e.object}`);
}

describe("LLMHA_ROLE: the controller apart from the node agents, real processes", () => {
  it("the controller takes the lease and acts on the node's record; the node agent never contends", async () => {
    const redisUrl = `redis://127.0.0.1:${server.port}`;
    node = await SimNode.start({
      id: "gpu-1",
      az: "az-a",
      dir,
      env: { ...LEASE, LLMHA_CLUSTER: CLUSTER, LLMHA_REDIS_URL: redisUrl, LLMHA_ROLE: "node", ...labRoleEnv(acl, dir, "llmha-agent") },
    });
    const httpPort = await freePort();
    controller = spawn(process.execPath, ["--import", "tsx", IMAGE_CLI, "agent"], {
      env: {
        ...process.env,
        ...LEASE,
        LLMHA_ROLE: "controller",
        LLMHA_NODE_ID: "ctl-1",
        LLMHA_CLUSTER: CLUSTER,
        LLMHA_REDIS_URL: redisUrl,
        LLMHA_HTTP_PORT: String(httpPort),
        LLMHA_BIND_ADDRESS: "127.0.0.1",
        ...labRoleEnv(acl, dir, "llmha-controller"),
      },
      stdio: ["ignore", "ignore", "inherit"],
    });
    // The node agent starts first, before any functions library is in Redis: it waits for one.
    expect(await admin.redis.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*")).toEqual([]);
    // The controller loads it when it connects, leads and publishes the node's AZ from the node's heartbeat.
    await waitFor("the controller leads", async () => ((await admin.redis.get(keys.leader)) ?? "").startsWith("ctl-1/"), { timeoutMs: 20_000, everyMs: 100 });
    await waitFor("az-a published OK", async () => (await admin.redis.hget(keys.azState("az-a"), "state")) === "OK", { timeoutMs: 20_000, everyMs: 100 });
    const status = await getJson(`http://127.0.0.1:${httpPort}/status`);
    expect(status.role).toBe("controller");
    expect((status.fleet as { lease: { isLeader: boolean } }).lease.isLeader).toBe(true);
    // It checks no node: no record of its own in the registry.
    expect(await admin.redis.exists(keys.node("ctl-1"))).toBe(0);
    expect(await admin.redis.exists(keys.node("gpu-1"))).toBe(1);

    // The controller goes (SIGTERM releases the lease); the node agent does not take over.
    await stopChild(controller, { signal: "SIGTERM", graceMs: 5000 });
    controller = undefined;
    await waitFor("the lease released", async () => (await admin.redis.get(keys.leader)) === null, { timeoutMs: 5000, everyMs: 100 });
    await sleep(2000); // more than 6 contend periods
    expect(await admin.redis.get(keys.leader)).toBeNull();
    const lease = ((await node.agentGet("/status")).body.fleet as { lease: { isLeader: boolean; acquisitions: number } }).lease;
    expect(lease).toMatchObject({ isLeader: false, acquisitions: 0 });
    for (const lib of allLibraries()) expect(JSON.stringify(await admin.redis.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*"))).toContain(lib.name);
    // Not even an attempt (to lead, or to load a library): Redis refused nothing from the node agent's user.
    expect(await refusedFor("llmha-agent")).toEqual([]);
  }, 90_000);
});

describe("LLMHA_ROLE settings", () => {
  const base = { LLMHA_AZ: "az-a", LLMHA_REDIS_URL: "redis://127.0.0.1:6379" };
  it("defaults to all (every agent contends, as before)", () => {
    expect(parseConfig([], base).role).toBe("all");
  });
  it("loads the controller Deployment's settings: no LLMHA_AZ and no IMDS call, its AZ not needed in LLMHA_AZ_IDS", async () => {
    const env = {
      LLMHA_ROLE: "controller",
      LLMHA_REDIS_URL: "rediss://redis.internal:6379",
      LLMHA_ACTUATOR: "aws",
      LLMHA_AWS_REGION: "us-east-1",
      LLMHA_AZ_IDS: "us-east-1a=use1-az4,us-east-1b=use1-az6,us-east-1c=use1-az1",
      LLMHA_STANDBY_AZ: "us-east-1c",
      LLMHA_STANDBY_ASGS: "eks-gpu-us-east-1c-h100-asg=2",
      LLMHA_SHIFT_RESOURCES: "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1a/0123456789abcdef",
      LLMHA_ZONAL_SHIFT: "true",
    };
    const cfg = await loadConfig([], env, () => Promise.reject(new Error("the controller must not ask IMDS")));
    expect(cfg).toMatchObject({ role: "controller", az: "controller", actuator: "aws", awsRegion: "us-east-1" });
  });

  it("refuses an actuator on a node agent and a controller without Redis, naming the variable", () => {
    expect(() => parseConfig([], { ...base, LLMHA_ROLE: "node", LLMHA_ACTUATOR: "dry-run", LLMHA_STANDBY_AZ: "az-c" })).toThrow(ConfigError);
    expect(() => parseConfig([], { ...base, LLMHA_ROLE: "node", LLMHA_ACTUATOR: "dry-run", LLMHA_STANDBY_AZ: "az-c" })).toThrow(/LLMHA_ACTUATOR.*LLMHA_ROLE=node/);
    expect(() => parseConfig([], { LLMHA_ROLE: "controller" })).toThrow(/LLMHA_REDIS_URL/);
    expect(() => parseConfig([], { ...base, LLMHA_ROLE: "leader" })).toThrow(/LLMHA_ROLE \(--role\): must be one of all, node, controller/);
  });
});
