import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import type { NvsmiFault } from "../../lab/sim/nvsmi-state";
import type { FakeInferenceMode } from "../../lab/sim/fake-inference";
import { sleep, waitFor } from "../../agent/src/util/net";

/**
 * A real `llm-ha agent` process watching a fake nvidia-smi (the recorded H100 capture)
 * and a fake vLLM process: every fault must reach /readyz and the agent-check reply, and
 * recovery must come back through the warmup ramp. Fast periods keep it short.
 */
const FAST = {
  LLMHA_INTERVAL_MS: "250",
  LLMHA_WARMUP_STEP_MS: "400",
  LLMHA_FALL: "2",
  LLMHA_RISE: "2",
  LLMHA_PROBE_LATENCY_MS: "600",
  LLMHA_PROBE_TIMEOUT_MS: "2500",
  LLMHA_WEDGE_MS: "800",
  LLMHA_GPU_TIMEOUT_MS: "1500",
  LLMHA_DRAIN_MS: "600",
};

const dir = mkdtempSync(join(tmpdir(), "llmha-agent-faults-"));
let node: SimNode;

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-a1", az: "az-a", dir, env: FAST });
});
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Seen {
  readyz: number;
  reply: string;
  status: string;
  codes: string[];
}

async function look(): Promise<Seen> {
  const [r, reply] = await Promise.all([node.agentGet("/readyz"), node.agentCheck()]);
  const reasons = (r.body.reasons as { code: string }[]) ?? [];
  return { readyz: r.status, reply, status: String(r.body.status), codes: reasons.map((x) => x.code) };
}

/** Waits for full service, recording the weights seen on the way (the ramp). */
async function recovered(): Promise<number[]> {
  const weights: number[] = [];
  await waitFor(
    "recovery to up ready 100%",
    async () => {
      const s = await look();
      const m = /^up ready (\d+)%$/.exec(s.reply);
      if (m && weights[weights.length - 1] !== Number(m[1])) weights.push(Number(m[1]));
      return s.readyz === 200 && m?.[1] === "100" && s.status === "HEALTHY";
    },
    { timeoutMs: 20_000, everyMs: 40 },
  );
  return weights;
}

/** Waits for the node out with `status`, the reply naming `code`; a timeout says what was seen last. */
async function expectOut(status: string, reply: RegExp, code: string): Promise<void> {
  let last: Seen | null = null;
  await waitFor(
    `${status} ${reply} ${code}`,
    async () => {
      const s = (last = await look());
      return s.readyz === 503 && s.status === status && reply.test(s.reply) && s.codes.includes(code);
    },
    { timeoutMs: 15_000, everyMs: 40 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen: ${JSON.stringify(last)}`);
  });
}

describe("agent process: faults → /readyz and agent-check → recovery through the ramp", () => {
  it("comes up through the warmup ramp", async () => {
    const w = await recovered();
    expect(w[w.length - 1]).toBe(100);
  });

  it.each<[NvsmiFault, string, string]>([
    ["gpuLost", "UNHEALTHY", "GPU_LOST"],
    ["driverNotLoaded", "UNHEALTHY", "GPU_DRIVER_NOT_LOADED"],
    ["driverMismatch", "UNHEALTHY", "GPU_DRIVER_MISMATCH"],
    ["eccUncorrected", "UNHEALTHY", "GPU_ECC_UNCORRECTED"],
    ["rowRemapFailure", "UNHEALTHY", "GPU_ROW_REMAP_FAILURE"],
    ["recoveryAction", "UNHEALTHY", "GPU_RECOVERY_ACTION"],
    ["gpuMissing", "UNHEALTHY", "GPU_MISSING"],
  ])("GPU fault %s → %s, down #%s, then back", async (fault, status, code) => {
    await node.gpuFault(fault);
    await expectOut(status, new RegExp(`^down #${code}$`), code).finally(() => node.gpuFault(null));
    const w = await recovered();
    expect(w[0]).toBeLessThan(100);
  });

  it.each<[NvsmiFault, string]>([
    ["hang", "GPU_QUERY_TIMEOUT"],
    ["garbage", "GPU_QUERY_GARBAGE"],
  ])("nvidia-smi %s → UNKNOWN (never healthy): drain", async (fault, code) => {
    await node.gpuFault(fault);
    await expectOut("UNKNOWN", /^drain$/, code).finally(() => node.gpuFault(null));
    await recovered();
  });

  it("thermal slowdown → DEGRADED: still up, lower weight", async () => {
    await node.gpuFault("thermal");
    await waitFor("DEGRADED", async () => {
      const s = await look();
      return s.status === "DEGRADED" && /^up ready 50%$/.test(s.reply) && s.readyz === 200;
    });
    await node.gpuFault(null);
    await recovered();
  });

  it.each<[FakeInferenceMode, string, RegExp, string]>([
    ["wrong-model", "UNHEALTHY", /^down #MODEL_MISSING$/, "MODEL_MISSING"],
    ["unloaded", "UNHEALTHY", /^down #MODEL_MISSING$/, "MODEL_MISSING"],
    ["loading503", "UNHEALTHY", /^down #INFERENCE_NOT_READY$/, "INFERENCE_NOT_READY"],
    ["error5xx", "UNHEALTHY", /^down #/, "INFERENCE_ERROR"],
    ["garbage", "UNHEALTHY", /^down #/, "INFERENCE_BAD_ANSWER"],
  ])("inference %s → %s", async (mode, status, reply, code) => {
    await node.setMode(mode);
    // Ready again whatever happens: a fault left on fails every test after this one.
    await expectOut(status, reply, code).finally(() => node.setMode("ready"));
    const t0 = Date.now();
    await recovered();
    // The model back: seen at the next check (the list is read every period while it is missing), not
    // when a kept list ages out (10 s). Rise and the ramp take about 2 s here.
    if (code === "MODEL_MISSING") expect(Date.now() - t0).toBeLessThan(7_000);
  });

  it("inference wedged while the agent's probe runs → UNHEALTHY, down #ENGINE_WEDGED", async () => {
    // A slow first token keeps the probe in flight when the engine wedges: that probe freezes as
    // running (not waiting), times out, and the next one waits in the queue. The node is down with the
    // engine's reason, not the probe's (PROBE_SLOW, then PROBE_STUCK, named it when it came first).
    await node.setMode({ latencyMs: 200 });
    await sleep(300);
    await node.setMode("wedged");
    await expectOut("UNHEALTHY", /^down #ENGINE_WEDGED$/, "ENGINE_WEDGED").finally(() => node.setMode({ mode: "ready", latencyMs: 5 }));
    await recovered();
  });

  it("a slow engine (latency creep) → DEGRADED within one period of the probe passing the threshold", async () => {
    await node.setMode({ mode: "slow", slowMs: 1500 });
    let pastThresholdMs: number | null = null;
    await waitFor("DEGRADED by PROBE_SLOW", async () => {
      const st = await node.agentGet("/status");
      if (st.body.status === "DEGRADED" && pastThresholdMs === null) {
        // the probe that tripped it, as the agent saw it: how long past the threshold it had run
        const inFlight = (st.body as { probe?: { inFlightMs?: number | null } }).probe?.inFlightMs;
        pastThresholdMs = typeof inFlight === "number" ? inFlight - Number(FAST.LLMHA_PROBE_LATENCY_MS) : -1;
      }
      const s = await look();
      // /status is read first: when the node turned DEGRADED between the two reads, poll again
      // so the figure comes from /status (a test that left the engine slow failed the next one).
      return pastThresholdMs !== null && s.status === "DEGRADED" && s.codes.includes("PROBE_SLOW") && /^up ready 50%$/.test(s.reply);
    }, { timeoutMs: 15_000, everyMs: 20 }).finally(() => node.setMode("ready"));
    // fall (2) results within one period (250 ms) of the threshold; the poll adds up to ~20 ms (generous bound)
    expect(pastThresholdMs).not.toBeNull();
    expect(pastThresholdMs!).toBeGreaterThanOrEqual(0);
    expect(pastThresholdMs!).toBeLessThan(Number(FAST.LLMHA_INTERVAL_MS) + 150);
    await recovered();
  });

  it("a fatal XID takes the node out; an application XID does not", async () => {
    await node.xid(13);
    await new Promise((r) => setTimeout(r, 800));
    expect((await look()).readyz).toBe(200);
    await node.xid(79);
    await expectOut("UNHEALTHY", /^down #GPU_XID_FATAL$/, "GPU_XID_FATAL");
    // A fatal XID needs a GPU reset: only a restart of the node (the agent) clears it.
    await node.stopAgent();
    await node.startAgent();
    await recovered();
  });

  it("inference crash → UNREACHABLE at once; restart → back through the ramp", async () => {
    await node.crashInference();
    const t0 = Date.now();
    await expectOut("UNREACHABLE", /^down #INFERENCE_DOWN$/, "INFERENCE_DOWN");
    expect(Date.now() - t0).toBeLessThan(3000);
    await node.startInference("ready");
    const w = await recovered();
    expect(w[0]).toBeLessThan(100);
  });

  it("a server still loading at agent start is drained, not down", async () => {
    await node.stopAgent();
    await node.crashInference();
    await node.startInference("loading");
    await node.startAgent();
    await expectOut("UNHEALTHY", /^drain$/, "MODEL_LOADING");
    await node.setMode("ready");
    await recovered();
  });

  it("SIGTERM answers drain and 503 first, then stops", async () => {
    const stopping = node.stopAgent();
    await waitFor("drain on SIGTERM", async () => (await node.agentCheck()) === "drain" && (await node.agentGet("/readyz")).status === 503, { timeoutMs: 3000, everyMs: 20 });
    await stopping;
    await expect(node.agentGet("/livez")).rejects.toThrow();
    await node.startAgent();
  });
});
