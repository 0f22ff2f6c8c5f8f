import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import { INFERENCE_KINDS, type InferenceKind } from "../../agent/src/config/spec";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";

/**
 * A wedged engine is caught for every server kind, and a busy one is not taken for
 * dead. A real agent process at its DEFAULT timing settings (1 s period, engine metrics every
 * 200 ms, wedge 500 ms, probe stuck 4 s) watches a fake server of each kind under steady
 * client traffic; the fake's wedged mode freezes every completion (running and new) while
 * `/health` stays 200. Timing is measured and printed; the bounds asserted are generous
 * (the test machine is shared), the targets are in the report line.
 */
const dir = mkdtempSync(join(tmpdir(), "llmha-wedge-kinds-"));
const nodes: SimNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function startNode(kind: InferenceKind, id: string): Promise<SimNode> {
  const ports = { inference: await freePort(), admin: await freePort(), http: await freePort(), agentCheck: await freePort() };
  // Triton's metrics live on their own port in production (8002); the fake serves them on the inference port.
  const env: Record<string, string> = { LLMHA_WARMUP_STEP_MS: "0", LLMHA_GPU_TIMEOUT_MS: "3000" };
  if (kind === "triton") env.LLMHA_METRICS_URL = `http://127.0.0.1:${ports.inference}/metrics`;
  const n = await SimNode.start({ id, az: "az-a", dir, kind, ports, env });
  nodes.push(n);
  await waitFor("node up", async () => (await n.agentCheck()) === "up ready 100%", { timeoutMs: 20_000, everyMs: 50 });
  return n;
}

/** Steady traffic: one short completion every `everyMs` in the kind's own API, until stopped. */
function traffic(n: SimNode, kind: InferenceKind, everyMs = 50, maxTokens = 8): () => Promise<void> {
  let on = true;
  const pending: Promise<unknown>[] = [];
  const send = (): Promise<unknown> => {
    const [path, body] =
      kind === "tgi"
        ? ["/generate", { inputs: "hello", parameters: { max_new_tokens: maxTokens } }]
        : kind === "triton"
          ? ["/v2/models/llm-ha%2Ftest-model/generate", { text_input: "hello", max_tokens: maxTokens }]
          : ["/v1/completions", { model: "llm-ha/test-model", prompt: "hello", max_tokens: maxTokens }];
    return fetch(`${n.inferenceUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) }).then(
      (r) => r.text(),
      () => undefined,
    );
  };
  const loop = (async () => {
    while (on) {
      pending.push(send());
      await sleep(everyMs);
    }
  })();
  return async () => {
    on = false;
    await loop;
  };
}

async function reply(n: SimNode): Promise<string> {
  try {
    return await n.agentCheck(1000);
  } catch {
    return "";
  }
}

/** Ms from now until the agent-check reply starts with `down`, polled every 10 ms. */
async function msUntilDown(n: SimNode, limitMs: number): Promise<{ ms: number; line: string }> {
  const t0 = performance.now();
  for (;;) {
    const line = await reply(n);
    if (line.startsWith("down")) return { ms: performance.now() - t0, line };
    if (performance.now() - t0 > limitMs) return { ms: Infinity, line };
    await sleep(10);
  }
}

const figures: string[] = [];

describe("wedged engine, every kind (default settings, steady traffic)", () => {
  afterAll(() => {
    // The measured figures, printed with the run.
    console.log(`wedge → agent says down:\n${figures.join("\n")}`);
  });

  // The kinds at once (each its own node and ports): one after the other took 4½ minutes of `npm test`.
  it.concurrent.each(INFERENCE_KINDS)("%s: caught, with the kind's own reason, then back when it heals", async (kind) => {
    const n = await startNode(kind, `wedge-${kind}`);
    const stop = traffic(n, kind);
    await sleep(1500);
    const runs: number[] = [];
    let line = "";
    for (let i = 0; i < 2; i++) {
      await n.setMode("wedged");
      const r = await msUntilDown(n, 15_000);
      runs.push(r.ms);
      line = r.line;
      await n.setMode("ready");
      await waitFor("back up", async () => (await reply(n)) === "up ready 100%", { timeoutMs: 20_000, everyMs: 50 });
      await sleep(800);
    }
    await stop();
    const metrics = kind !== "openai";
    figures.push(`  ${kind.padEnd(9)} ${runs.map((ms) => `${Math.round(ms)} ms`).join(", ")}  (${line}; target ${metrics ? "≤ 1.5 s with HAProxy's agent-inter 0.5 s" : "≤ 6 s"})`);
    expect(line).toBe(metrics ? "down #ENGINE_WEDGED" : "down #PROBE_STUCK");
    // Generous bounds: the targets less HAProxy's 0.5 s, times two for a loaded machine.
    for (const ms of runs) expect(ms).toBeLessThan(metrics ? 3000 : 9000);
  }, 90_000);
});

describe("wedged plain OpenAI-compatible server with a probe timeout shorter than the stuck bound (the drill's settings)", () => {
  it("is PROBE_STUCK once its probes have gone unanswered for LLMHA_PROBE_STUCK_MS, though each times out sooner", async () => {
    const ports = { inference: await freePort(), admin: await freePort(), http: await freePort(), agentCheck: await freePort() };
    const n = await SimNode.start({
      id: "wedge-openai-short-timeout",
      az: "az-a",
      dir,
      kind: "openai",
      ports,
      env: { LLMHA_WARMUP_STEP_MS: "0", LLMHA_GPU_TIMEOUT_MS: "3000", LLMHA_PROBE_LATENCY_MS: "400", LLMHA_PROBE_TIMEOUT_MS: "1500", LLMHA_PROBE_STUCK_MS: "4000" },
    });
    nodes.push(n);
    await waitFor("node up", async () => (await n.agentCheck()) === "up ready 100%", { timeoutMs: 20_000, everyMs: 50 });
    await n.setMode("wedged");
    const r = await msUntilDown(n, 15_000);
    expect(r.line).toBe("down #PROBE_STUCK");
    // The bound (4 s) plus a probe period and a loaded machine's slack.
    expect(r.ms).toBeLessThan(9000);
    await n.setMode("ready");
    await waitFor("back up", async () => (await reply(n)) === "up ready 100%", { timeoutMs: 20_000, everyMs: 50 });
  }, 60_000);
});

describe("busy ≠ dead", () => {
  it.each<InferenceKind>(["vllm", "tgi", "llamacpp", "triton"])("%s: a burst that queues hundreds while tokens flow is never a removal", async (kind) => {
    const n = await startNode(kind, `busy-${kind}`);
    // A small batch (8) and long generations: 300 requests queue for about 300/8 × 40 × 20 ms = 30 s.
    await n.setMode({ maxRunning: 8, tokenMs: 20 });
    const stop = traffic(n, kind, 5, 40);
    const seen = new Set<string>();
    const t0 = performance.now();
    let busy = false;
    // At least 7 s of burst with no removal; ENGINE_BUSY may take longer to show on a loaded machine (up to 15 s).
    while (performance.now() - t0 < 7000 || (!busy && performance.now() - t0 < 15_000)) {
      const line = await reply(n);
      seen.add(line.replace(/\d+%/, "N%"));
      const s = await n.agentGet("/status");
      if ((s.body.reasons as { code: string }[]).some((r) => r.code === "ENGINE_BUSY")) busy = true;
      await sleep(100);
    }
    await stop();
    expect([...seen].filter((l) => l.startsWith("down"))).toEqual([]);
    expect(busy).toBe(true);
    await n.setMode({ maxRunning: 0 });
  }, 60_000);
});
