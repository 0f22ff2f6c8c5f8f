/**
 * A simulated node (real agent process, fake nvidia-smi, fake dcgmi, fake vLLM) through the deep
 * check as the drill runs it (`LLMHA_DEEP_CHECK=auto` with the fake dcgmi): it boots through the
 * check into rotation; with the `diagFail` fault set through the node's fault API, an agent
 * restart (a reboot) keeps it down with `GPU_DIAG_FAILED`; healed, the next restart serves again.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../agent/src/util/net";
import { SimNode } from "../../lab/sim/sim-node";

const dir = mkdtempSync(join(tmpdir(), "llmha-deep-node-"));
let node: SimNode;

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-a1", az: "az-a", dir, env: { LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "0", LLMHA_DRAIN_MS: "0", LLMHA_CANARY_INTERVAL_MS: "2000" } });
}, 60_000);
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const serving = async (): Promise<boolean> => (await node.agentCheck()).startsWith("up");

describe("a sim node's boots go through the deep check", () => {
  it("boots into rotation once the check passed, and /status says how", async () => {
    await waitFor("serving", serving, { timeoutMs: 30_000, everyMs: 100 });
    const s = await node.agentGet("/status");
    expect(s.body.deepCheck).toMatchObject({ state: "passed", trigger: "agent start", detail: expect.stringContaining("dcgmi diag -r 1 passed") });
  }, 40_000);

  it("a failing diag keeps a rebooted node down with GPU_DIAG_FAILED; healed, the next boot serves", async () => {
    await node.gpuFault("diagFail");
    await node.stopAgent();
    await node.startAgent();
    await waitFor("down #GPU_DIAG_FAILED", async () => (await node.agentCheck()) === "down #GPU_DIAG_FAILED", { timeoutMs: 30_000, everyMs: 100 });
    const r = await node.agentGet("/readyz");
    expect(r.status).toBe(503);
    expect(JSON.stringify(r.body.reasons)).toContain("software failed on GPU 3");
    await node.gpuFault(null);
    await node.stopAgent();
    await node.startAgent();
    await waitFor("serving again", serving, { timeoutMs: 30_000, everyMs: 100 });
  }, 90_000);
});
