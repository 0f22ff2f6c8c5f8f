/**
 * The deep check before traffic through the whole agent (`runAgent` in this process) in front of
 * a fake vLLM server, the fake nvidia-smi and the fake dcgmi on one state file:
 * - a failed `dcgmi diag -r 1` keeps the node out with the hard `GPU_DIAG_FAILED` naming the test
 *   and GPU (agent-check `down`), is retried after `LLMHA_DEEP_CHECK_RETRY_MS`, and a pass lets it in;
 * - the node is not ready (agent-check `drain`, `/readyz` 503, `DEEP_CHECK_PENDING` waiting for the
 *   canary round) until a canary round completes, though every other signal is clean.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import { runAgent, type RunningAgent } from "../../agent/src/main";
import { createLogger } from "../../agent/src/util/log";
import { freePort, socketExchange, waitFor } from "../../agent/src/util/net";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";
import { NVSMI_FAULTS, writeFakeDcgmiWrapper, writeFakeNvidiaSmiWrapper, writeNvsmiState, type NvsmiState } from "../../lab/sim/nvsmi-state";

const dir = mkdtempSync(join(tmpdir(), "llmha-deep-"));
let fake: FakeInference | null = null;
let running: RunningAgent | null = null;
let lines: Record<string, unknown>[] = [];

afterEach(async () => {
  await running?.shutdown("test over");
  await fake?.close();
  running = null;
  fake = null;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function start(name: string, env: Record<string, string>, tokenMs = 1, gpu: NvsmiState = {}): Promise<{ http: number; check: number }> {
  fake = await startFakeInference({ kind: "vllm", model: "m", tokenMs });
  const state = join(dir, `${name}.nvsmi.json`);
  await writeNvsmiState(state, { gpuCount: 2, diagDelayMs: 200, ...gpu });
  const http = await freePort();
  const check = await freePort();
  const cfg = parseConfig([], {
    PATH: process.env.PATH,
    LLMHA_AZ: "az-a",
    LLMHA_NODE_ID: name,
    LLMHA_NVIDIA_SMI: writeFakeNvidiaSmiWrapper(join(dir, `${name}-nvidia-smi.sh`), state),
    LLMHA_DCGMI: writeFakeDcgmiWrapper(join(dir, `${name}-dcgmi.sh`), state),
    LLMHA_GPU_COUNT: "2",
    LLMHA_PCI_DEVICES: dir,
    LLMHA_INFERENCE_URL: fake.url,
    LLMHA_INFERENCE_KIND: "vllm",
    LLMHA_MODEL: "m",
    LLMHA_BIND_ADDRESS: "127.0.0.1",
    LLMHA_HTTP_PORT: String(http),
    LLMHA_AGENT_CHECK_PORT: String(check),
    LLMHA_INTERVAL_MS: "250",
    LLMHA_WARMUP_STEP_MS: "0",
    LLMHA_PROBE_TIMEOUT_MS: "1500",
    LLMHA_PROBE_LATENCY_MS: "1000",
    LLMHA_DRAIN_MS: "0",
    ...env,
  });
  lines = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  running = await runAgent({ ...cfg, az: "az-a" }, createLogger({ level: "info", destination }));
  return { http, check };
}

const agentCheck = async (port: number): Promise<string> => (await socketExchange({ host: "127.0.0.1", port }, null, 2000, "agent-check")).trim();
async function readyz(port: number): Promise<{ status: number; body: { reasons: { code: string; detail?: string }[] } }> {
  const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) });
  return { status: r.status, body: (await r.json()) as { reasons: { code: string; detail?: string }[] } };
}
async function metric(port: number, name: string, labels: string): Promise<number | null> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}`));
  return line ? Number(line.split(" ").at(-1)) : null;
}
const events = (result: string): Record<string, unknown>[] => lines.filter((l) => l.event === "deep-check" && l.result === result);

describe("the deep check with dcgmi", () => {
  it("a failed diag keeps the node down with GPU_DIAG_FAILED naming the test and GPU; a retried diag that passes lets it in", async () => {
    const state = join(dir, "gpu-d1.nvsmi.json");
    // The fault is in place before the agent starts (a node that boots on a bad GPU).
    const fault = { diagFail: { ...NVSMI_FAULTS.diagFail.diagFail, gpu: 1, message: "pending page retirements" } };
    const { http, check } = await start("gpu-d1", { LLMHA_DEEP_CHECK: "dcgmi", LLMHA_DEEP_CHECK_RETRY_MS: "1000", LLMHA_CANARY_INTERVAL_MS: "0" }, 1, fault);
    await waitFor("GPU_DIAG_FAILED", async () => (await agentCheck(check)) === "down #GPU_DIAG_FAILED", { timeoutMs: 15_000, everyMs: 100 });
    const r = await readyz(http);
    expect(r.status).toBe(503);
    expect(r.body.reasons.find((x) => x.code === "GPU_DIAG_FAILED")?.detail).toBe("dcgmi diag -r 1: software failed on GPU 1 (pending page retirements)");
    expect(await metric(http, "llmha_deep_check_total", 'result="failed"')).toBeGreaterThanOrEqual(1);
    expect(events("failed").length).toBeGreaterThanOrEqual(1);
    // The GPU is fixed: the next diag (at most a retry period later) passes, and the node serves.
    await writeNvsmiState(state, { gpuCount: 2, diagDelayMs: 200 });
    await waitFor("serving after the retried diag", async () => (await agentCheck(check)).startsWith("up"), { timeoutMs: 15_000, everyMs: 100 });
    expect((await readyz(http)).status).toBe(200);
    expect(await metric(http, "llmha_deep_check_total", 'result="passed"')).toBe(1);
    expect(String(events("passed")[0]?.msg)).toMatch(/^deep check \(agent start\) passed in \d+ ms: dcgmi diag -r 1 passed; canaries off: smoke only$/);
  }, 40_000);
});

describe("the deep check's canary round", () => {
  it("the node is not ready until a canary round completes, though every other signal is clean", async () => {
    // Canary answers take 4 tokens × 1 s, past the 1.5 s request limit; the probe's one token does not feel it.
    const { http, check } = await start("gpu-d2", { LLMHA_DEEP_CHECK: "smoke", LLMHA_CANARY_INTERVAL_MS: "60000", LLMHA_CANARY_MAX_TOKENS: "4" }, 1000);
    await waitFor("probe answered", () => running?.agent.signals.probe?.value.kind === "ok", { timeoutMs: 15_000 });
    await waitFor("a canary round without answers", () => lines.some((l) => l.event === "deep-check" && l.part === "canary"), { timeoutMs: 15_000 });
    expect(await agentCheck(check)).toBe("drain");
    const r = await readyz(http);
    expect(r.status).toBe(503);
    expect(r.body.reasons.map((x) => x.code)).toEqual(["DEEP_CHECK_PENDING"]);
    expect(r.body.reasons[0].detail).toBe("deep check (agent start) waiting for: canary round; last canary round: no canary answered");
    // The engine answers in time again: the next round (asked for by the check, not a minute later) passes it.
    await fake!.setMode({ tokenMs: 1 });
    await waitFor("serving after the canary round", async () => (await agentCheck(check)).startsWith("up"), { timeoutMs: 20_000, everyMs: 100 });
    expect((await readyz(http)).status).toBe(200);
    expect(String(events("passed")[0]?.msg)).toMatch(/dcgmi not used \(LLMHA_DEEP_CHECK=smoke\); canary round (matched|self-checked)/);
  }, 60_000);
});
