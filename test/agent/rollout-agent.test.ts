/**
 * The agent's side of a rollout through the whole agent: `runAgent` (in this process) in front of
 * a fake vLLM reporting a revision, on a real redis-server. The node record carries `perf` (the
 * revision, the probe window, the continuation check); the revision check follows the leader's
 * `rollout` hash (`allow`): a node on the rollout's other revision serves while the hash names
 * both, and is `MODEL_MISMATCH` again once it names only the other; a restarted server's load
 * time and a refused continuation show in `perf`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import type { NodePerf } from "../../agent/src/fleet/rollout/types";
import { runAgent, type RunningAgent } from "../../agent/src/main";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";
import { freshCluster, testLogger } from "../redis/helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-rollout-agent-"));
const cluster = freshCluster("ro");
let redis: RedisServerHandle;
let r: Redis;
let fake: FakeInference;
let running: RunningAgent;

beforeAll(async () => {
  redis = await startRedisServer();
  r = new Redis(redis.url);
  fake = await startFakeInference({ kind: "vllm", model: "m", tokenMs: 1, revision: "rev-a" });
  const cfg = parseConfig([], {
    LLMHA_AZ: "az-a",
    LLMHA_NODE_ID: "gpu-r1",
    LLMHA_NVIDIA_SMI: resolve(__dirname, "../../lab/sim/fake-nvidia-smi.cjs"),
    LLMHA_PCI_DEVICES: dir,
    LLMHA_INFERENCE_URL: fake.url,
    LLMHA_INFERENCE_KIND: "vllm",
    LLMHA_MODEL: "m",
    LLMHA_MODEL_REVISION: "rev-a",
    LLMHA_REDIS_URL: redis.url,
    LLMHA_CLUSTER: cluster,
    LLMHA_ROLE: "node",
    LLMHA_BIND_ADDRESS: "127.0.0.1",
    LLMHA_HTTP_PORT: String(await freePort()),
    LLMHA_AGENT_CHECK_PORT: String(await freePort()),
    LLMHA_INTERVAL_MS: "250",
    LLMHA_WARMUP_STEP_MS: "0",
    LLMHA_CANARY_INTERVAL_MS: "0",
    LLMHA_DEEP_CHECK: "off",
    LLMHA_PROBE_TIMEOUT_MS: "3000",
    LLMHA_PROBE_LATENCY_MS: "2000",
    LLMHA_DRAIN_MS: "0",
  });
  running = await runAgent({ ...cfg, az: "az-a" }, testLogger());
}, 30_000);

afterAll(async () => {
  await running?.shutdown("test over");
  await fake?.close();
  r?.disconnect();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const perf = async (): Promise<NodePerf | null> => {
  const v = await r.hget(`llmha:${cluster}:node:gpu-r1`, "perf");
  return v ? (JSON.parse(v) as NodePerf) : null;
};
const codes = (): string[] => running.agent.decision.reasons.map((x) => x.code);
const until = (what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<unknown> => waitFor(what, async () => await ok(), { timeoutMs, everyMs: 50 });

describe("the agent's side of a rollout (real agent, fake vLLM, real redis-server)", () => {
  it("publishes perf in its record: the revision served, the probe window, the continuation check", async () => {
    await until("perf with probes and a continuation check", async () => {
      const p = await perf();
      return p !== null && p.probes >= 2 && p.continuation !== null;
    });
    const p = (await perf())!;
    expect(p).toMatchObject({ revision: "rev-a", errors: 0, continuation: "ok", loadMs: null, corrupted: 0 });
    expect(p.p50Ms).toBeGreaterThanOrEqual(0);
    expect(Date.now() - p.at).toBeLessThan(10_000);
  });

  it("accepts the revisions the rollout allows, and only while it allows them", async () => {
    // Another revision with no rollout: a mismatch, as before.
    await fake.setMode({ revision: "rev-b" });
    await until("MODEL_MISMATCH on rev-b", () => codes().includes("MODEL_MISMATCH"));
    // The leader starts a rollout rev-a → rev-b: both are allowed.
    await r.hset(`llmha:${cluster}:rollout`, { allow: "rev-a,rev-b", current: "rev-a", phase: "switching" });
    await until("rev-b accepted during the rollout", () => !codes().includes("MODEL_MISMATCH"));
    await until("perf names rev-b", async () => (await perf())?.revision === "rev-b");
    // It ends on rev-b: a node left on rev-a (the configured revision!) is a mismatch again.
    await r.hset(`llmha:${cluster}:rollout`, { allow: "rev-b", current: "rev-b", phase: "promoted" });
    await fake.setMode({ revision: "rev-a" });
    await until("MODEL_MISMATCH on rev-a after the rollout", () => codes().includes("MODEL_MISMATCH"));
    expect(running.agent.decision.reasons.find((x) => x.code === "MODEL_MISMATCH")?.detail).toMatch(/expected rev-b/);
    // No hash: the configured revision again.
    await r.del(`llmha:${cluster}:rollout`);
    await until("rev-a accepted with no rollout", () => !codes().includes("MODEL_MISMATCH"));
  });

  it("a switch right after the rollout started: the new revision is checked against a fresh read, never a mismatch", async () => {
    await until("the node serving", () => running.agent.decision.status === "HEALTHY" && codes().length === 0);
    const seen: string[] = [];
    const watch = (d: { reasons: readonly { code: string }[] }): void => void seen.push(...d.reasons.map((x) => x.code));
    running.agent.on("decision", watch);
    try {
      // The leader writes allow, then switches the node at once (sooner than the agent's periodic read).
      await r.hset(`llmha:${cluster}:rollout`, { allow: "rev-a,rev-c", current: "rev-a", phase: "switching" });
      await fake.setMode({ revision: "rev-c" });
      await until("perf names rev-c", async () => (await perf())?.revision === "rev-c");
      await sleep(500);
      expect(seen).not.toContain("MODEL_MISMATCH");
    } finally {
      running.agent.off("decision", watch);
      await r.del(`llmha:${cluster}:rollout`);
      await fake.setMode({ revision: "rev-a" });
      await until("rev-a accepted with no rollout", () => !codes().includes("MODEL_MISMATCH"));
    }
  });

  it("a restarted server: its load time, and a continuation it refuses", async () => {
    await fake.setMode({ mode: "loading", continuation: "refuse" });
    await until("the agent sees it loading", () => running.agent.signals.model?.value.kind !== "ready");
    await sleep(700);
    await fake.setMode({ mode: "ready" });
    await until("perf with the load time and the refused continuation", async () => {
      const p = await perf();
      return p !== null && p.loadMs !== null && p.continuation === "refused";
    });
    expect((await perf())!.loadMs).toBeGreaterThanOrEqual(600);
  });
});
