import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import { pciKey } from "../../agent/src/node/sources/gpu";
import { sleep, waitFor } from "../../agent/src/util/net";

/**
 * The GPU and engine signals at agent level: a real `llm-ha agent` process with the fake
 * nvidia-smi (the H100 capture), a fake vLLM, a sysfs PCI folder holding the capture's 8 GPUs,
 * and a kernel log file: each new signal must reach the agent-check reply and clear (or not)
 * as documented.
 */
const dir = mkdtempSync(join(tmpdir(), "llmha-signals16-agent-"));
const pci = join(dir, "pci");
const busIds = (JSON.parse(readFileSync(join(__dirname, "../../lab/sim/fixtures/h100x8-gpus.json"), "utf8")) as { busId: string }[]).map((g) => pciKey(g.busId));
let node: SimNode;

function plugGpus(ids: string[]): void {
  rmSync(pci, { recursive: true, force: true });
  mkdirSync(pci);
  for (const id of ids) {
    mkdirSync(join(pci, id));
    writeFileSync(join(pci, id, "vendor"), "0x10de\n");
    writeFileSync(join(pci, id, "class"), "0x030200\n");
  }
}

beforeAll(async () => {
  plugGpus(busIds);
  node = await SimNode.start({
    id: "gpu-s1",
    az: "az-a",
    dir,
    env: {
      LLMHA_INTERVAL_MS: "250",
      LLMHA_WARMUP_STEP_MS: "0",
      LLMHA_FALL: "2",
      LLMHA_RISE: "2",
      LLMHA_PCI_DEVICES: pci,
      LLMHA_PROBE_EXPECT: "ok",
      LLMHA_XID_RULES: "94=3/1m",
    },
  });
  await up();
});
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function line(): Promise<string> {
  return node.agentCheck(1000).catch(() => "");
}
async function up(): Promise<void> {
  await waitFor("up ready 100%", async () => (await line()) === "up ready 100%", { timeoutMs: 20_000, everyMs: 50 });
}
async function down(code: string): Promise<void> {
  await waitFor(`down #${code}`, async () => (await line()) === `down #${code}`, { timeoutMs: 15_000, everyMs: 50 });
}
const xidLine = (code: number, pid: boolean): string =>
  `[${(performance.now() / 1000).toFixed(6)}] NVRM: Xid (PCI:0000:53:00): ${code}, ${pid ? "pid=4242, name=python3" : "pid='<unknown>', name=<unknown>"}, Ch 00000008\n`;

describe("GPU and engine signals through a real agent", () => {
  it("/status reports what the server serves (same model everywhere)", async () => {
    const s = await node.agentGet("/status");
    expect(s.body.modelIdentity).toEqual({ id: "llm-ha/test-model", revision: null, dtype: null, maxContext: 8192 });
  });

  it("NVLink fabric not registered on one GPU: down #GPU_FABRIC, back when it completes", async () => {
    await node.gpuFault("fabricNotRegistered");
    await down("GPU_FABRIC");
    await node.gpuFault(null);
    await up();
  });

  it("a GPU gone from the PCI bus while nvidia-smi still lists it: down #GPU_OFF_BUS", async () => {
    plugGpus(busIds.slice(1));
    await down("GPU_OFF_BUS");
    plugGpus(busIds);
    await up();
  });

  it("application XIDs with a process never act; a windowed XID acts at its count and holds through its window", async () => {
    for (let i = 0; i < 5; i++) appendFileSync(node.xidLogPath, xidLine(13, true));
    appendFileSync(node.xidLogPath, xidLine(94, true));
    appendFileSync(node.xidLogPath, xidLine(94, true));
    await sleep(1000);
    expect(await line()).toBe("up ready 100%");
    appendFileSync(node.xidLogPath, xidLine(94, true));
    await down("GPU_XID_REPEATED");
    const s = await node.agentGet("/status");
    expect((s.body.reasons as { detail: string }[])[0].detail).toContain("XID 94@0000:53:00 3x in 60 s");
    // Only an agent restart (a reboot or GPU reset) clears it within the window.
    await node.stopAgent();
    await node.startAgent();
    await up();
  });

  it("a model that answers garbage to the known prompt (corrupted weights): down #PROBE_WRONG_ANSWER", async () => {
    await node.setMode("corrupt");
    await down("PROBE_WRONG_ANSWER");
    await node.setMode("ready");
    await up();
  });

  it("a restart onto weights that fail to load: out (INFERENCE_DOWN) and it stays out until good weights load", async () => {
    await node.crashInference();
    await node.startInference("failed-load");
    await down("INFERENCE_DOWN");
    await sleep(2000);
    expect(await line()).toBe("down #INFERENCE_DOWN");
    await node.crashInference();
    await node.startInference("ready");
    await up();
  });
});
