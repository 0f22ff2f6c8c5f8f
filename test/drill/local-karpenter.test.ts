/**
 * The drill's simulated Karpenter (lab/drill/local-karpenter.ts) served over loopback HTTP and
 * driven by the leader's Karpenter engine, with stand-in nodes (boot and halt recorded): a wake
 * gives the placeholder's pending pods NodeClaims within the pool's GPU limit, which launch and
 * boot their nodes (`Initialized` once running); an ICE fault fails the first pool's launches
 * with AWS's message, the engine raises the second pool, which provisions; the release deletes
 * the NodeClaims and the nodes stop.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { KarpenterEngine } from "../../agent/src/fleet/actuators/karpenter/standby";
import { waitFor } from "../../agent/src/util/net";
import { capacityMessage } from "../../lab/drill/local-cloud-types";
import { karpenterStep, LocalKarpenter, type KarpenterNode } from "../../lab/drill/local-karpenter";

interface Node extends KarpenterNode {
  power: "stopped" | "running";
}

const FAST = { launchMs: 50, retryMs: 2000, iceCacheMs: 60_000, tickMs: 20 };
const ctx = { token: 1, reason: "test" };
let server: Server | null = null;
let sim: LocalKarpenter<Node> | null = null;

afterEach(async () => {
  sim?.stop();
  const s = server;
  server = null;
  if (s) await new Promise<void>((r) => s.close(() => r()));
});

async function world(nodeCount: number): Promise<{ sim: LocalKarpenter<Node>; nodes: Node[]; booted: string[]; halted: string[]; engine: KarpenterEngine }> {
  const nodes: Node[] = Array.from({ length: nodeCount }, (_, i) => ({ id: `gpu-c${i + 1}`, az: "az-c", gpuCount: 8, power: "stopped" as const }));
  const booted: string[] = [];
  const halted: string[] = [];
  sim = new LocalKarpenter<Node>({
    nodesIn: (az) => nodes.filter((n) => n.az === az),
    isStopped: (n) => n.power === "stopped",
    running: (n) => n.power === "running",
    boot: (n) => void (booted.push(n.id), (n.power = "running")),
    halt: (n) => void (halted.push(n.id), (n.power = "stopped")),
    now: () => Date.now(),
    capacityMessage,
  }, FAST);
  sim.definePools([{ name: "llm-ha-az-c-p5", az: "az-c", instanceType: "p5.48xlarge" }, { name: "llm-ha-az-c-p4d", az: "az-c", instanceType: "p4d.24xlarge" }], { namespace: "llm-ha", name: "llm-ha-standby-placeholder" });
  const k = sim;
  server = createServer((req, res) => void karpenterStep(k, req, (code, body) => res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body))));
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const engine = new KarpenterEngine({
    api: { url, tokenFile: null, caFile: null },
    pools: [{ name: "llm-ha-az-c-p5", gpus: 16 }, { name: "llm-ha-az-c-p4d", gpus: 64 }],
    placeholder: { namespace: "llm-ha", deployment: "llm-ha-standby-placeholder", replicas: 8 },
    standbyAz: "az-c",
  });
  return { sim, nodes, booted, halted, engine };
}

describe("simulated Karpenter", () => {
  it("provisions the placeholder's pending pods within the pool's GPU limit; the release deletes the NodeClaims and stops the nodes", async () => {
    const w = await world(3);
    expect((await w.engine.wakeStandby("az-c", ctx)).outcome).toBe("applied");
    // Limit 16 GPUs: two of the three 8-GPU nodes, whatever the 8 replicas ask.
    await waitFor("two nodes booted", () => w.booted.length === 2, { timeoutMs: 10_000 });
    await waitFor("serving", async () => (await w.engine.wakeStandby("az-c", ctx)).wake?.phase === "serving", { timeoutMs: 10_000 });
    expect(w.booted).toEqual(["gpu-c1", "gpu-c2"]);
    expect(w.nodes[2].power).toBe("stopped");
    const r = await w.engine.releaseStandby("az-c", ctx);
    expect(r.outcome).toBe("applied");
    expect(r.detail).toMatch(/llm-ha-az-c-p5: NodeClaims llm-ha-az-c-p5-\w+, llm-ha-az-c-p5-\w+ deleted/);
    expect(w.halted.sort()).toEqual(["gpu-c1", "gpu-c2"]);
    expect(w.nodes.every((n) => n.power === "stopped")).toBe(true);
    expect((await w.engine.releaseStandby("az-c", ctx)).outcome).toBe("already");
  });

  it("an ICE fault fails the first pool's launches with AWS's message; the engine raises the second pool, which serves", async () => {
    const w = await world(2);
    w.sim.iceFault("llm-ha-az-c-p5");
    await w.engine.wakeStandby("az-c", ctx);
    await waitFor("a failed launch", () => w.sim.launchFailures.length > 0, { timeoutMs: 10_000 });
    expect(w.sim.launchFailures[0]).toMatchObject({ pool: "llm-ha-az-c-p5", message: capacityMessage("p5.48xlarge", "az-c") });
    const fb = await w.engine.wakeStandby("az-c", ctx);
    expect(fb.wake).toMatchObject({ phase: "fallback", step: 1, groups: ["llm-ha-az-c-p4d"], failure: { class: "capacity", group: "llm-ha-az-c-p5" } });
    await waitFor("serving from the second pool", async () => {
      const r = await w.engine.wakeStandby("az-c", ctx);
      return r.wake?.phase === "serving" && r.wake.step === 1;
    }, { timeoutMs: 10_000 });
    expect(w.booted.sort()).toEqual(["gpu-c1", "gpu-c2"]);
    expect(w.sim.requests.some((q) => q.method === "PATCH" && q.path.endsWith("/nodepools/llm-ha-az-c-p4d"))).toBe(true);
  });
});
