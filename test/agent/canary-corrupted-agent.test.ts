/**
 * Engine-reported corruption, through the whole agent: `runAgent` (in this process) in front of
 * a fake vLLM server, canaries once a minute. The fake's `vllm:corrupted_requests_total` rising
 * makes the agent's canary run a round within about a second — not a minute later — with its
 * reason in the log; the agent publishes the count it read; the rise alone takes nothing out of
 * rotation, and a restarted engine's counter back at 0 runs no round.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import { runAgent, type RunningAgent } from "../../agent/src/main";
import { createLogger } from "../../agent/src/util/log";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";

const dir = mkdtempSync(join(tmpdir(), "llmha-corrupted-"));
const lines: Record<string, unknown>[] = [];
let fake: FakeInference;
let running: RunningAgent;
let httpPort: number;

beforeAll(async () => {
  fake = await startFakeInference({ kind: "vllm", model: "m", tokenMs: 1, corruptedRequests: 5 });
  httpPort = await freePort();
  const cfg = parseConfig([], {
    LLMHA_AZ: "az-a",
    LLMHA_NODE_ID: "gpu-c1",
    LLMHA_NVIDIA_SMI: resolve(__dirname, "../../lab/sim/fake-nvidia-smi.cjs"),
    LLMHA_PCI_DEVICES: dir,
    LLMHA_INFERENCE_URL: fake.url,
    LLMHA_INFERENCE_KIND: "vllm",
    LLMHA_MODEL: "m",
    LLMHA_BIND_ADDRESS: "127.0.0.1",
    LLMHA_HTTP_PORT: String(httpPort),
    LLMHA_AGENT_CHECK_PORT: String(await freePort()),
    LLMHA_INTERVAL_MS: "250",
    LLMHA_ENGINE_INTERVAL_MS: "100",
    LLMHA_CANARY_INTERVAL_MS: "60000",
    LLMHA_PROBE_TIMEOUT_MS: "3000",
    LLMHA_PROBE_LATENCY_MS: "2000",
    LLMHA_DRAIN_MS: "0",
  });
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  running = await runAgent({ ...cfg, az: "az-a" }, createLogger({ level: "info", destination }));
}, 30_000);

afterAll(async () => {
  await running?.shutdown("test over");
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The agent's own `/metrics`: one sample by name and its labels other than the node's own (node, az). */
async function metric(name: string, labels = ""): Promise<number | null> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
  const want = `${name}{${labels ? `${labels},` : ""}node="gpu-c1",az="az-a"} `;
  const line = text.split("\n").find((l) => l.startsWith(want));
  return line ? Number(line.split(" ").at(-1)) : null;
}
const forced = (): Promise<number | null> => metric("llmha_canary_rounds_total", 'trigger="engine-corrupted"');

describe("the agent, its canary, and vLLM's corrupted-requests counter", () => {
  it("a rise runs a canary round at once (not at the next minute), says why, and takes nothing out of rotation", async () => {
    // The server ready and its metrics read: the 5 the engine had counted before the agent started are no news.
    await waitFor("the server ready, its metrics read", () => running.agent.signals.model?.value.kind === "ready" && running.agent.signals.engine?.value?.corruptedRequests === 5, { timeoutMs: 15_000 });
    await sleep(500);
    expect(await forced()).toBe(0);
    expect(await metric("llmha_engine_corrupted_requests")).toBe(5);

    const t0 = Date.now();
    await fake.setMode({ corruptedRequests: 8 });
    await waitFor("a forced canary round", async () => (await forced()) === 1, { timeoutMs: 10_000 });
    // Well inside the minute the next round was due in.
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await metric("llmha_engine_corrupted_requests")).toBe(8);
    expect(lines.find((l) => l.event === "canary-trigger")).toMatchObject({ msg: expect.stringContaining("engine reported 3 corrupted requests"), corruptedRequests: 8 });
    await waitFor("the forced round's verdict", () => lines.find((l) => l.event === "canary" && l.trigger === "engine-corrupted"), { timeoutMs: 5000 });
    // The answers were right: the node stays in, whatever the counter said.
    expect(running.agent.signals.canaryMismatch ?? null).toBeNull();
    expect(running.agent.decision.reasons.map((r) => r.code)).not.toContain("CANARY_MISMATCH");

    // The same count on every read: no more rounds. A restarted engine (back to 0): none either.
    await fake.setMode({ corruptedRequests: 0 });
    await waitFor("the reset read", () => running.agent.signals.engine?.value?.corruptedRequests === 0, { timeoutMs: 5000 });
    await sleep(1000);
    expect(await forced()).toBe(1);
  }, 60_000);
});
