/**
 * The inference pods' readiness command (infra/workloads/inference.ts), run as the kubelet
 * would (`python3 -c …`, exit 0 = ready) against a real `llm-ha agent` process and a fake
 * vLLM: readiness follows the agent, and falls back to /health only when the agent is gone.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readinessCommand } from "../../infra/workloads/inference";
import { SimNode } from "../../lab/sim/sim-node";
import { waitFor } from "../../agent/src/util/net";

const FAST = { LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "200", LLMHA_FALL: "2", LLMHA_RISE: "2", LLMHA_GPU_TIMEOUT_MS: "3000" };
const dir = mkdtempSync(join(tmpdir(), "llmha-readiness-"));
let node: SimNode;

/** Exit code of the readiness command against this node's ports. */
function probe(): Promise<number> {
  const [cmd, ...args] = readinessCommand(node.httpPort, node.inferencePort, node.address);
  return new Promise((resolve) => execFile(cmd, args, { timeout: 10_000 }, (err) => resolve(err ? Number((err as { code?: number }).code ?? 1) : 0)));
}
const health = async () => (await fetch(`http://${node.address}:${node.inferencePort}/health`)).status;
const until = (what: string, f: () => Promise<boolean>) => waitFor(what, f, { timeoutMs: 20_000, everyMs: 100 });

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-r1", az: "az-a", dir, env: FAST });
});
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("inference readiness follows the node's agent", () => {
  it("is ready when the agent says the node takes traffic", async () => {
    await until("agent ready", async () => (await node.agentGet("/readyz")).status === 200);
    // The command is a python3 start-up: on a loaded host the agent may have flapped meanwhile.
    await until("the readiness command to pass", async () => (await probe()) === 0);
  });

  it("is not ready on a GPU fault while the server's own /health still says 200", async () => {
    await node.gpuFault("eccUncorrected");
    await until("agent 503", async () => (await node.agentGet("/readyz")).status === 503);
    expect(await health()).toBe(200); // what the old httpGet /health probe saw: ready
    expect(await probe()).toBe(1);
    await node.gpuFault(null);
    await until("agent ready again", async () => (await node.agentGet("/readyz")).status === 200);
    expect(await probe()).toBe(0);
  });

  it("falls back to /health when the agent is unreachable, and fails when the server is gone too", async () => {
    await node.killAgent();
    expect(await health()).toBe(200);
    expect(await probe()).toBe(0);
    await node.crashInference();
    expect(await probe()).toBe(1);
  });
});
