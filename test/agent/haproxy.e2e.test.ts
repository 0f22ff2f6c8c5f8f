import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHaproxyConfig, startHaproxy, type HaproxyHandle, type HaproxyServerStat } from "../../lab/engines/haproxy";
import { renderHaproxyConfig, type HaproxyStaticServer } from "../../contracts/haproxy-config";
import { SimNode } from "../../lab/sim/sim-node";
import { freePort, waitFor } from "../../agent/src/util/net";

/** A real HAProxy with `agent-check agent-inter 500ms` in front of two real agents. */
const FAST = { LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "1500", LLMHA_FALL: "2", LLMHA_RISE: "2", LLMHA_DRAIN_MS: "1200" };
const dir = mkdtempSync(join(tmpdir(), "llmha-haproxy-"));
let a: SimNode;
let b: SimNode;
let hp: HaproxyHandle;
let bind = "";

const srv = (n: SimNode): HaproxyStaticServer => ({ name: n.id, address: "127.0.0.1", port: n.inferencePort, agentPort: n.agentCheckPort, httpPort: n.httpPort });

beforeAll(async () => {
  [a, b] = await SimNode.startAll([
    { id: "gpu-a", az: "az-a", dir, env: FAST },
    { id: "gpu-b", az: "az-a", dir, env: FAST },
  ]);
  bind = `127.0.0.1:${await freePort()}`;
  hp = await startHaproxy({ proxies: [{ name: "inference", bind, health: "agent", forwardAzHealth: true, servers: { kind: "static", local: [srv(a), srv(b)], backup: [] } }] });
});
afterAll(async () => {
  await hp?.stop();
  await Promise.all([a?.stop(), b?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

async function row(name: string): Promise<HaproxyServerStat> {
  const r = (await hp.stats()).find((s) => s.proxy === "inference_servers" && s.server === name);
  if (!r) throw new Error(`no stats row for ${name}`);
  return r;
}

describe("HAProxy agent-check with a real HAProxy", () => {
  it("the generated configuration is valid for the real binary", () => {
    const cfg = renderHaproxyConfig({ proxies: [{ name: "inference", bind, health: "agent", forwardAzHealth: true, servers: { kind: "static", local: [srv(a)], backup: [srv(b)] } }] });
    expect(checkHaproxyConfig(cfg)).toMatch(/valid/i);
    expect(cfg).toContain(`agent-check agent-port ${a.agentCheckPort} agent-inter 500ms`);
  });

  it("takes a server out on a hard fault and puts it back with reduced weight during warmup", async () => {
    await waitFor("both UP at full weight", async () => (await row("gpu-a")).status === "UP" && (await row("gpu-a")).weight === 100 && (await row("gpu-b")).status === "UP", {
      timeoutMs: 30_000,
      everyMs: 100,
    });
    await a.gpuFault("gpuLost");
    const t0 = Date.now();
    await waitFor("gpu-a DOWN by the agent", async () => /DOWN/.test((await row("gpu-a")).status), { timeoutMs: 10_000, everyMs: 25 });
    const detectMs = Date.now() - t0;
    expect(detectMs).toBeLessThan(5000);
    expect((await row("gpu-b")).status).toBe("UP");
    // Traffic still flows through the other server.
    const res = await fetch(`http://${bind}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "llm-ha/test-model", prompt: "x", max_tokens: 1 }) });
    expect(res.status).toBe(200);
    await a.gpuFault(null);
    const weights: number[] = [];
    await waitFor(
      "gpu-a back at full weight",
      async () => {
        const r = await row("gpu-a");
        if (r.status === "UP" && weights[weights.length - 1] !== r.weight) weights.push(r.weight);
        return r.status === "UP" && r.weight === 100;
      },
      { timeoutMs: 30_000, everyMs: 50 },
    );
    expect(weights.some((w) => w > 0 && w < 100)).toBe(true);
  });

  it("drains a node whose agent is stopping (SIGTERM), then the node comes back", async () => {
    const stopping = b.stopAgent();
    await waitFor("gpu-b DRAIN", async () => /DRAIN/.test((await row("gpu-b")).status), { timeoutMs: 5000, everyMs: 25 });
    await stopping;
    await b.startAgent();
    await waitFor("gpu-b UP again (ready lifts drain)", async () => (await row("gpu-b")).status === "UP", { timeoutMs: 30_000, everyMs: 100 });
  });

  it("forwards /az/health to the AZ's agents", async () => {
    const r = await fetch(`http://${bind}/az/health`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ az: "az-a" });
  });

  it("replays a request a server refused with 404 (model unloaded) or 503 (loading) on another server", async () => {
    // A second proxy over the same two servers whose agents it cannot reach (counts for nothing):
    // both stay in rotation, so the refusing server keeps getting requests — as in the ~0.3 s
    // before an agent takes it out.
    const noAgent = await freePort();
    const quiet = (n: SimNode): HaproxyStaticServer => ({ ...srv(n), agentPort: noAgent });
    const bind2 = `127.0.0.1:${await freePort()}`;
    const hp2 = await startHaproxy({ proxies: [{ name: "raw", bind: bind2, health: "agent", servers: { kind: "static", local: [quiet(a), quiet(b)], backup: [] } }] });
    const complete = async (model = "llm-ha/test-model") =>
      (await fetch(`http://${bind2}/v1/completions`, { method: "POST", body: JSON.stringify({ model, prompt: "x", max_tokens: 1 }) })).status;
    try {
      await waitFor("both UP", async () => (await hp2.stats()).filter((r) => r.proxy === "raw_servers" && r.status === "UP").length === 2, { timeoutMs: 15_000, everyMs: 100 });
      for (const mode of ["unloaded", "loading503"] as const) {
        await a.setMode(mode);
        const codes = await Promise.all(Array.from({ length: 16 }, () => complete()));
        expect(codes.filter((c) => c !== 200), mode).toEqual([]);
        await a.setMode("ready");
      }
      // a model no server has: the client gets the 404 (after the retries)
      expect(await complete("no-such-model")).toBe(404);
    } finally {
      await a.setMode("ready");
      await hp2.stop();
    }
  });
});
