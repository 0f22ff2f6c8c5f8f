import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../agent/src/fleet/controller/fleet";
import type { NodeReport } from "../../agent/src/fleet/redis/registry";
import { ADAPTERS } from "../../agent/src/node/sources/inference";
import type { Decision } from "../../agent/src/types";
import { waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { WRONG_MODEL_ID } from "../../lab/sim/fake-inference";
import { SimNode } from "../../lab/sim/sim-node";
import { freshCluster, testLogger } from "../redis/helpers";

/**
 * Same model everywhere, at agent level: a real `llm-ha agent` process in front of
 * a fake TGI (its `/info` tells id, dtype and context) on a real redis-server. The node hash
 * carries what the server serves — not the configured model — and a server on the wrong model
 * is taken out and flagged by the leader. Two more nodes (in-process fleet members serving the
 * configured model) give the fleet its majority.
 */
const MODEL = "llm-ha/test-model";
const dir = mkdtempSync(join(tmpdir(), "llmha-model-identity-"));
const cluster = freshCluster("model");
let redis: RedisServerHandle;
let node: SimNode;
let peers: Fleet[] = [];
let r: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  r = new Redis(redis.url);
  node = await SimNode.start({
    id: "gpu-t1",
    az: "az-a",
    dir,
    kind: "tgi",
    model: MODEL,
    env: {
      LLMHA_REDIS_URL: redis.url,
      LLMHA_CLUSTER: cluster,
      LLMHA_INTERVAL_MS: "250",
      LLMHA_WARMUP_STEP_MS: "0",
      LLMHA_LEASE_TTL_MS: "3000",
      LLMHA_LEASE_RENEW_MS: "1000",
      LLMHA_LEASE_CONTEND_MS: "500",
    },
  });
  const up = (): Decision => ({ status: "HEALTHY", phase: "serving", weight: 100, reasons: [], pending: [], suppressed: [], since: Date.now(), checkedAt: Date.now(), loadScore: 1 });
  peers = ["gpu-p1", "gpu-p2"].map((nodeId) => {
    const f = new Fleet({ redisUrl: redis.url, cluster, nodeId, az: "az-b", intervalMs: 250, log: testLogger(), metrics: new Registry(), lease: { ttlMs: 3000, renewMs: 1000, contendMs: 500, marginMs: 600 } });
    f.start((): NodeReport => ({ nodeId, az: "az-b", decision: up(), gpus: 8, gpusExpected: 8, model: MODEL, modelDtype: "float16", maxContext: 8192 }));
    return f;
  });
}, 60_000);

afterAll(async () => {
  await Promise.all(peers.map((f) => f.stop()));
  await node?.stop();
  r?.disconnect();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const hash = (): Promise<Record<string, string>> => r.hgetall(`llmha:${cluster}:node:gpu-t1`);
const models = (): Promise<Record<string, string>> => r.hgetall(`llmha:${cluster}:models`);

describe("the node hash carries what the server serves (real agent, fake TGI, real redis-server)", () => {
  it("id, dtype and max context from TGI's /info; no revision where the server tells none", async () => {
    await waitFor("node hash with the served identity", async () => (await hash()).modelDtype === "torch.float16" && (await hash()).status === "HEALTHY", { timeoutMs: 20_000, everyMs: 100 });
    expect(await hash()).toMatchObject({ model: MODEL, modelRevision: "", modelDtype: "torch.float16", maxContext: "8192", status: "HEALTHY" });
    // TGI's torch.float16 and the peer's float16 are one precision: nobody differs.
    // The leader publishes every 10 periods: an early publication may count only the nodes that
    // had registered by then (one peer, on a loaded machine). Wait for the one that counts all
    // three, or for one that names an outlier (the failure this test is about).
    const judged = async (): Promise<boolean> => {
      const m = await models();
      return m.agreeing === "3" || (m.outlierCount !== undefined && m.outlierCount !== "0");
    };
    await waitFor("models published over all three nodes", judged, { timeoutMs: 20_000, everyMs: 100 });
    expect(await models()).toMatchObject({ majority: `${MODEL} dtype:float16 ctx:8192`, outliers: "", outlierCount: "0", agreeing: "3" });
  });

  it("a server on the wrong model: the hash says so, the node is out (MODEL_MISSING) and the leader names it", async () => {
    await node.setMode("wrong-model");
    await waitFor("hash shows the wrong model", async () => (await hash()).model === WRONG_MODEL_ID, { timeoutMs: 15_000, everyMs: 100 });
    await waitFor("node out", async () => (await node.agentCheck(1000).catch(() => "")) === "down #MODEL_MISSING", { timeoutMs: 15_000, everyMs: 100 });
    expect(await hash()).toMatchObject({ status: "UNHEALTHY", hard: "MODEL_MISSING", modelDtype: "torch.float16" });
    await waitFor("leader flags it", async () => (await models()).outliers === `gpu-t1=${WRONG_MODEL_ID} dtype:float16 ctx:8192`, { timeoutMs: 15_000, everyMs: 100 });
    expect(await models()).toMatchObject({ majority: `${MODEL} dtype:float16 ctx:8192`, outlierAzs: "az-a", differs: JSON.stringify({ "gpu-t1": "id" }) });

    await node.setMode("ready");
    await waitFor("back on the configured model", async () => (await hash()).model === MODEL && (await hash()).status === "HEALTHY", { timeoutMs: 20_000, everyMs: 100 });
    await waitFor("no outliers", async () => (await models()).outliers === "", { timeoutMs: 15_000, everyMs: 100 });
  });
});

describe("an OpenAI model list with several models: the identity is the configured one's", () => {
  let server: Server;
  let url = "";
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: [
        { id: "base", object: "model", root: "base", max_model_len: 4096 },
        { id: "llama", object: "model", root: "meta-llama/Llama-3.1-8B-Instruct", max_model_len: 8192 },
      ] }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const a = server.address();
    url = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("reports the configured model's root and context, not the first listed", async () => {
    expect(await ADAPTERS.openai.check(url, "llama", 2000)).toMatchObject({ kind: "ready", identity: { id: "llama", revision: "meta-llama/Llama-3.1-8B-Instruct", maxContext: 8192 } });
    expect(await ADAPTERS.openai.check(url, null, 2000)).toMatchObject({ kind: "ready", identity: { id: "base", revision: null, maxContext: 4096 } });
  });
});
