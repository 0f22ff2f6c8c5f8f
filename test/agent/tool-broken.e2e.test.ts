import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import { NVSMI_FAULTS } from "../../lab/sim/nvsmi-state";
import { sleep, waitFor } from "../../agent/src/util/net";

/**
 * The tool broken is not the GPU broken. A hanging or failing nvidia-smi makes the
 * node UNKNOWN (HAProxy `drain`), never a GPU fault in the metrics (no GPU reason active, the
 * visible-GPU count stands), and the node serves again by itself once nvidia-smi answers.
 * A real agent at the default settings (1 s period, 5 s nvidia-smi limit, fall 3, rise 2; only
 * the warmup ramp is off); times are measured and printed, the bounds are generous.
 */
const dir = mkdtempSync(join(tmpdir(), "llmha-tool-broken-"));
let node: SimNode;
const figures: string[] = [];

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-t1", az: "az-a", dir, env: { LLMHA_WARMUP_STEP_MS: "0" } });
  await waitFor("node up", async () => (await node.agentCheck()) === "up ready 100%", { timeoutMs: 30_000, everyMs: 50 });
});
afterAll(async () => {
  console.log(`nvidia-smi broken (default settings):\n${figures.join("\n")}`);
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function until(pred: (line: string) => boolean, limitMs: number): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < limitMs) {
    const line = await node.agentCheck(1000).catch(() => "");
    if (pred(line)) return performance.now() - t0;
    await sleep(20);
  }
  return Infinity;
}

async function gpuMetrics(): Promise<{ visible: number; gpuReasons: string[] }> {
  const text = await (await fetch(`${node.agentUrl}/metrics`)).text();
  const visible = Number(/^llmha_gpus_visible\{[^}]*\} (\d+)/m.exec(text)?.[1]);
  const gpuReasons = [...text.matchAll(/^llmha_node_reason_active\{[^}]*code="(GPU_(?!QUERY)[A-Z_]+)"[^}]*\} 1$/gm)].map((m) => m[1]);
  return { visible, gpuReasons };
}

describe("nvidia-smi hanging or failing → UNKNOWN (drain), not a GPU fault; clears by itself", () => {
  it.each([
    ["hang", NVSMI_FAULTS.hang, "GPU_QUERY_TIMEOUT"],
    ["exit 3 (unknown error)", { exitCode: 3, stderr: "Unknown Error\n" }, "GPU_QUERY_FAILED"],
  ] as const)("%s", async (name, fault, code) => {
    await node.setGpu(fault);
    const toDrain = await until((l) => l === "drain", 20_000);
    const s = await node.agentGet("/status");
    expect(s.body.status).toBe("UNKNOWN");
    expect((s.body.reasons as { code: string }[]).map((r) => r.code)).toContain(code);
    expect(await gpuMetrics()).toEqual({ visible: 8, gpuReasons: [] });
    await node.gpuFault(null);
    const toServe = await until((l) => l === "up ready 100%", 20_000);
    figures.push(`  ${name}: fault → drain ${(toDrain / 1000).toFixed(2)} s; nvidia-smi answers → up 100% ${(toServe / 1000).toFixed(2)} s`);
    expect(toDrain).toBeLessThan(12_000);
    expect(toServe).toBeLessThan(12_000);
  }, 60_000);
});
