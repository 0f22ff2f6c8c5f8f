/**
 * A planned move cuts nothing: the drain protocol of `contracts/drain.ts` end to end
 * with real processes. The shipped preStop script (python3, as in the vLLM image) writes the
 * drain file and waits while a fake vLLM holds requests; a real agent answers `drain` / 503
 * (`PLANNED_DRAIN`) while the file exists and serves again once it is gone; the manifests carry
 * the hook, the init container that removes the file, and a grace long enough for the drain.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearDrainCommand, DRAIN_DIR, DRAIN_FILE, DRAIN_MAX_S, INFERENCE_TERMINATION_GRACE_S, preStopCommand } from "../../contracts/drain";
import { DEFAULT_HAPROXY_TUNING } from "../../contracts/haproxy-tuning";
import { waitFor } from "../../agent/src/util/net";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";
import { SimNode } from "../../lab/sim/sim-node";
import { agentDaemonSet } from "../../infra/workloads/agent";
import { inferenceManifests } from "../../infra/workloads/inference";
import type { GpuClassConfig } from "../../infra/config";

const dir = mkdtempSync(join(tmpdir(), "llmha-planned-drain-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(cmd: string[]): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const p = spawn(cmd[0], cmd.slice(1), { stdio: "ignore" });
    p.once("error", reject);
    p.once("exit", (code) => resolve({ code, ms: Date.now() - t0 }));
  });
}

describe("the preStop hook", () => {
  let fake: FakeInference;
  beforeAll(async () => {
    fake = await startFakeInference({ model: "m", tokenMs: 20 });
  });
  afterAll(async () => {
    await fake?.close();
  });

  it("writes the drain file, then waits while the server holds requests, and returns once it holds none", async () => {
    const file = join(dir, "drain-1");
    // Two requests of ~1.5 s each: the hook must outlast them.
    const body = JSON.stringify({ model: "m", prompt: "x", max_tokens: 75 });
    const reqs = [0, 1].map(() => fetch(`${fake.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body }).then((r) => r.text()));
    await waitFor("requests in flight", async () => fake.stats().inFlight === 2, { timeoutMs: 3000, everyMs: 20 });
    const hook = run(preStopCommand(file, `${fake.url}/metrics`, 0.2, 30));
    await waitFor("drain file", async () => existsSync(file), { timeoutMs: 10_000, everyMs: 20 }); // the hook's shell start: over 3 s on a loaded runner
    await Promise.all(reqs);
    const { code, ms } = await hook;
    expect(code).toBe(0);
    expect(ms).toBeGreaterThanOrEqual(1000);
    expect(ms).toBeLessThan(10_000);
    expect(fake.stats().inFlight).toBe(0);
  });

  it("returns at once when the server no longer answers, and at its limit when requests never end", async () => {
    expect((await run(preStopCommand(join(dir, "drain-2"), "http://127.0.0.1:9/metrics", 0, 30))).ms).toBeLessThan(10_000); // far below its 30 s limit (6.8 s seen on a loaded runner)
    await fake.setMode("wedged");
    const held = fetch(`${fake.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", prompt: "x", max_tokens: 5 }), signal: AbortSignal.timeout(8000) }).catch(() => null);
    await waitFor("held request", async () => fake.stats().inFlight === 1, { timeoutMs: 3000, everyMs: 20 });
    const { code, ms } = await run(preStopCommand(join(dir, "drain-3"), `${fake.url}/metrics`, 0, 2));
    expect(code).toBe(0);
    expect(ms).toBeGreaterThanOrEqual(1900);
    expect(ms).toBeLessThan(10_000);
    await fake.setMode("ready");
    await held;
  });

  it("the init container's command removes the file, and does not fail when there is none", async () => {
    const file = join(dir, "drain-4");
    writeFileSync(file, "x");
    expect((await run(clearDrainCommand(file))).code).toBe(0);
    expect(existsSync(file)).toBe(false);
    expect((await run(clearDrainCommand(file))).code).toBe(0);
  });
});

describe("the agent under a planned drain", () => {
  let node: SimNode;
  beforeAll(async () => {
    node = await SimNode.start({ id: "gpu-d1", az: "az-a", dir, env: { LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "300", LLMHA_RISE: "2", LLMHA_CANARY_INTERVAL_MS: "1000" } });
    await waitFor("serving", async () => (await node.agentCheck()).startsWith("up ready 100%"), { timeoutMs: 20_000, everyMs: 100 });
  }, 30_000);
  afterAll(async () => {
    await node?.stop();
  });

  it("answers drain and 503 with PLANNED_DRAIN while the file exists, and serves again once it is gone", async () => {
    writeFileSync(node.drainFilePath, "inference server stopping\n");
    await waitFor("drain", async () => (await node.agentCheck()) === "drain", { timeoutMs: 10_000, everyMs: 50 });
    const r = await node.agentGet("/readyz");
    expect(r.status).toBe(503);
    expect((r.body.reasons as { code: string }[]).map((x) => x.code)).toContain("PLANNED_DRAIN");
    rmSync(node.drainFilePath);
    await waitFor("serving again", async () => (await node.agentCheck()).startsWith("up"), { timeoutMs: 15_000, everyMs: 50 });
    expect((await node.agentGet("/readyz")).status).toBe(200);
  }, 20_000);

  it("sends its server no probe or canary while it drains, so the hook is not kept waiting by the agent itself", async () => {
    writeFileSync(node.drainFilePath, "inference server stopping\n");
    await waitFor("drain", async () => (await node.agentCheck()) === "drain", { timeoutMs: 10_000, everyMs: 50 });
    await new Promise((r) => setTimeout(r, 600)); // a probe or canary begun before it may still finish
    const before = (await node.stats())?.served ?? 0;
    await new Promise((r) => setTimeout(r, 3000)); // twelve probe periods, three canary intervals
    const during = ((await node.stats())?.served ?? 0) - before;
    rmSync(node.drainFilePath);
    await waitFor("serving again", async () => (await node.agentCheck()).startsWith("up"), { timeoutMs: 15_000, everyMs: 50 });
    expect(during).toBe(0);
    // Once the file is gone it probes again.
    const after = (await node.stats())?.served ?? 0;
    await waitFor("probing again", async () => ((await node.stats())?.served ?? 0) > after, { timeoutMs: 10_000, everyMs: 100 });
  }, 40_000);

  it("a planned restart (the shipped hook, SIGTERM, a new server) leaves no drain file and the node serves again", async () => {
    const { preStopMs } = await node.restartInferencePlanned(10);
    expect(preStopMs).toBeLessThan(10_000);
    expect(existsSync(node.drainFilePath)).toBe(false);
    await waitFor("serving after the restart", async () => (await node.agentCheck()).startsWith("up ready 100%"), { timeoutMs: 20_000, everyMs: 100 });
  }, 40_000);
});

/** The pod spec of a rendered Deployment or DaemonSet (plain objects here, whatever their Input<> types say). */
interface Container {
  name: string;
  command?: string[];
  env?: unknown[];
  volumeMounts?: unknown[];
  lifecycle?: { preStop?: { exec?: { command?: string[] } } };
}
interface Pod {
  containers: Container[];
  initContainers?: Container[];
  volumes?: unknown[];
  terminationGracePeriodSeconds?: number;
}
function podOf(o: { spec?: unknown }): Pod {
  return (o.spec as { template: { spec: Pod } }).template.spec;
}

describe("the manifests", () => {
  const gpuClass = { name: "h100", instanceTypes: ["p5.48xlarge"], gpusPerNode: 8, desiredPerAz: 2, maxPerAz: 4 } as unknown as GpuClassConfig;

  it("the inference pod runs the hook, clears the file at start and waits as long as the proxy lets an answer run", () => {
    const { deployment } = inferenceManifests({ namespace: "llm-ha", az: "us-east-1a", gpuClass, image: "vllm/vllm-openai:v0.11.0", model: "m" });
    const pod = podOf(deployment);
    const vllm = pod.containers[0];
    expect(vllm.lifecycle?.preStop?.exec?.command).toEqual(preStopCommand());
    // After own-dirs (the directories handed to the server's user), before the model fetcher.
    expect(pod.initContainers?.[1]).toMatchObject({ name: "clear-drain", command: clearDrainCommand() });
    expect(DRAIN_MAX_S * 1000).toBeGreaterThanOrEqual(DEFAULT_HAPROXY_TUNING.timeoutServerMs);
    expect(pod.terminationGracePeriodSeconds).toBe(INFERENCE_TERMINATION_GRACE_S);
    expect(pod.terminationGracePeriodSeconds!).toBeGreaterThan(DRAIN_MAX_S);
    expect(vllm.volumeMounts).toContainEqual({ name: "llmha-run", mountPath: DRAIN_DIR });
    expect(pod.volumes).toContainEqual({ name: "llmha-run", hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } });
  });

  it("the agent reads the same file, read-only", () => {
    const ds = agentDaemonSet({ namespace: "llm-ha", az: "us-east-1a", gpuClass, image: "llm-ha:1", clusterName: "c", model: "m", redisSecretName: "redis" } as Parameters<typeof agentDaemonSet>[0]);
    const pod = podOf(ds);
    const agent = pod.containers.find((c) => c.name === "agent")!;
    expect(agent.env).toContainEqual({ name: "LLMHA_DRAIN_FILE", value: DRAIN_FILE });
    expect(agent.volumeMounts).toContainEqual({ name: "llmha-run", mountPath: DRAIN_DIR, readOnly: true });
    expect(pod.volumes).toContainEqual({ name: "llmha-run", hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } });
  });
});
