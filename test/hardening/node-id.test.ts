/**
 * One live agent per node id. A second agent with a running agent's
 * LLMHA_NODE_ID refuses to start and says why; one that slips past (or an old instance)
 * neither overwrites nor removes the live node; an agent restarted after a crash takes
 * its id back once the dead instance's heartbeat expires.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient, type RedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { NodeRegistry, type NodeReport } from "../../agent/src/fleet/redis/registry";
import { freePort, waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { SimNode } from "../../lab/sim/sim-node";
import { freshCluster, testLogger } from "../redis/helpers";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const dir = mkdtempSync(join(tmpdir(), "llmha-nodeid-"));
let redis: RedisServerHandle;
let client: RedisClient;

beforeAll(async () => {
  redis = await startRedisServer();
  client = createRedisClient(redis.url, { name: "node-id-test", log: testLogger() });
  await client.whenReady(5000);
});
afterAll(async () => {
  await client?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const report = (nodeId: string): NodeReport => {
  const now = Date.now();
  return {
    nodeId,
    az: "az-a",
    decision: { status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 1 },
    gpus: 8,
    gpusExpected: 8,
    model: "m",
  };
};

describe("one live agent per node id", () => {
  it("a second instance neither overwrites nor removes the first one's node", async () => {
    const keys = new RedisKeys(freshCluster("nid"));
    const first = new NodeRegistry({ client, keys, log: testLogger(), instance: "first" });
    const second = new NodeRegistry({ client, keys, log: testLogger(), instance: "second" });
    expect((await first.heartbeat(report("n1"))).heldBy).toBeNull();
    expect((await second.heartbeat(report("n1"))).heldBy).toBe("first");
    expect(second.heldBy).toBe("first");
    expect(await client.redis.hget(keys.node("n1"), "instance")).toBe("first");
    expect(await second.remove()).toBe(false);
    expect(await client.redis.exists(keys.node("n1"))).toBe(1);
    expect(await client.redis.hexists(keys.members, "n1")).toBe(1);
    expect(await first.remove()).toBe(true);
    expect(await client.redis.exists(keys.node("n1"))).toBe(0);
  });

  it("refuses to start a second agent with a live agent's node id (exit 1, named); a crashed agent's id is free again after its TTL", async () => {
    const cluster = freshCluster("nid");
    const keys = new RedisKeys(cluster);
    const env = { LLMHA_REDIS_URL: redis.url, LLMHA_CLUSTER: cluster, LLMHA_INTERVAL_MS: "500" };
    const node = await SimNode.start({ id: "gpu-dup", az: "az-a", dir, env });
    try {
      // HEALTHY, not only registered: an agent registers first as UNKNOWN (its first checks not in), and the
      // record must still say HEALTHY after the twin's attempt, which would have written its own UNKNOWN.
      await waitFor("the first agent registered and healthy", async () => (await client.redis.hget(keys.node("gpu-dup"), "status")) === "HEALTHY", { timeoutMs: 20_000 });
      const firstInstance = await client.redis.hget(keys.node("gpu-dup"), "instance");
      const twin = spawn(process.execPath, ["--import", "tsx", CLI, "agent"], {
        env: { ...node.agentEnv(), LLMHA_HTTP_PORT: String(await freePort()), LLMHA_AGENT_CHECK_PORT: String(await freePort()) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let err = "";
      twin.stderr.on("data", (b) => (err += b));
      const code = await new Promise<number | null>((r) => twin.on("exit", r));
      expect(code).toBe(1);
      expect(err).toContain("LLMHA_NODE_ID gpu-dup is in use by another live agent");
      expect(await client.redis.hget(keys.node("gpu-dup"), "instance")).toBe(firstInstance);
      expect(await client.redis.hget(keys.node("gpu-dup"), "status")).toBe("HEALTHY");

      await node.killAgent("SIGKILL");
      await node.startAgent(); // waits out the dead instance's heartbeat (TTL 1.5 s), then registers
      await waitFor(
        "the restarted agent registered under its own instance",
        async () => {
          const i = await client.redis.hget(keys.node("gpu-dup"), "instance");
          return i !== null && i !== firstInstance;
        },
        { timeoutMs: 15_000 },
      );
    } finally {
      await node.stop();
    }
  }, 90_000);
});
