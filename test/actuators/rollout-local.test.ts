/**
 * The drill's rollout actuator (rollout-local.ts) against the local cloud's real `/rollout/switch`
 * (lab/drill/local-rollout.ts) powering real SimNodes (fake inference processes; no agents: what
 * is checked is the server each switch leaves behind): a switch restarts the node's server
 * through the preStop drain with the revision's profile (revision reported, latency, continuation,
 * load time); a repeat is `already`; a lower fencing token is `refused-stale`; a revision without
 * a profile keeps the node's settings, and the node's first revision its first settings (a
 * rollback); a stopped node boots with it; bad requests and an unreachable cloud are `failed`;
 * an AZ as a whole moves every node of it, running ones one after another.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localRolloutActuator } from "../../agent/src/fleet/actuators/rollout-local";
import type { RolloutSwitchRequest } from "../../agent/src/fleet/rollout/types";
import { freePort, waitFor } from "../../agent/src/util/net";
import { LocalCloud } from "../../lab/drill/local-cloud";
import type { FakeInferenceState } from "../../lab/sim/fake-inference";
import { SimNode } from "../../lab/sim/sim-node";
import { testLogger } from "../redis/helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-rollout-local-"));
let a1: SimNode;
let a2: SimNode;
let b1: SimNode;
let cloud: LocalCloud;

beforeAll(async () => {
  [a1, a2, b1] = await SimNode.startAll([
    { id: "gpu-a1", az: "az-a", dir, noAgent: true, inference: { revision: "rev-a", latencyMs: 5 } },
    { id: "gpu-a2", az: "az-a", dir, noAgent: true, inference: { revision: "rev-a", latencyMs: 7 } },
    { id: "gpu-b1", az: "az-b", dir, noAgent: true, stopped: true, inference: { revision: "rev-a" } },
  ]);
  cloud = new LocalCloud({ now: Date.now });
  await cloud.listen();
  cloud.attach([a1, a2, b1], () => []);
  cloud.rollout.setProfiles({ "rev-b": { latencyMs: 40, continuation: "refuse", loadMs: 800 } });
}, 90_000);

afterAll(async () => {
  await cloud?.stop();
  await Promise.all([a1?.stop(), a2?.stop(), b1?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

const state = async (n: SimNode): Promise<FakeInferenceState | null> => {
  try {
    return (await (await fetch(`${n.adminUrl}/state`, { signal: AbortSignal.timeout(1000) })).json()) as FakeInferenceState;
  } catch {
    return null;
  }
};
const root = async (n: SimNode): Promise<string | null> => {
  try {
    const r = await fetch(`${n.inferenceUrl}/v1/models`, { signal: AbortSignal.timeout(1000) });
    return ((await r.json()) as { data: { root: string }[] }).data[0].root;
  } catch {
    return null;
  }
};
const req = (nodes: SimNode[], revision: string, token: number): RolloutSwitchRequest => ({
  rolloutId: "r1", az: nodes[0].az, nodes: nodes.map((n) => ({ nodeId: n.id, host: cloud.instances.instanceOf(n.id) })), to: { revision }, token,
});

describe("the local rollout actuator over the local cloud's /rollout/switch", () => {
  it("switches a node: its server restarted through the drain, serving the revision with its profile after its load", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    expect(act).toMatchObject({ kind: "local", granularity: "node" });
    expect(await root(a1)).toBe("rev-a");
    const t0 = Date.now();
    const r = await act.switch(req([a1], "rev-b", 5));
    expect(r.outcome).toBe("applied");
    expect(r.detail).toMatch(/gpu-a1: inference server of gpu-a1 restarting with rev-b, loading 0\.8 s/);
    // Asked again while it switches: already.
    expect(await act.switch(req([a1], "rev-b", 5))).toMatchObject({ outcome: "already", detail: "gpu-a1: gpu-a1 switching to rev-b" });
    let sawLoading = false;
    await waitFor("a1 serving rev-b", async () => {
      const s = await state(a1);
      if (s?.mode === "loading" && s.revision === "rev-b") sawLoading = true;
      return (await root(a1)) === "rev-b";
    }, { timeoutMs: 30_000, everyMs: 50 });
    expect(sawLoading).toBe(true);
    // The preStop hook's settle time, then the load.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(800);
    expect(await state(a1)).toMatchObject({ revision: "rev-b", latencyMs: 40, continuation: "refuse", mode: "ready" });
    await waitFor("the switch done", async () => cloud.rollout.revisionOf("gpu-a1") === "rev-b" && (await act.switch(req([a1], "rev-b", 5))).detail.includes("serves"), { timeoutMs: 10_000, everyMs: 100 });
  }, 60_000);

  it("refuses a token below the highest it has seen (a deposed leader's late call), for every node of the request", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    const r = await act.switch(req([a2, a1], "rev-b", 3));
    expect(r.outcome).toBe("refused-stale");
    expect(r.detail).toMatch(/token 3 is older than 5/);
    expect(await root(a2)).toBe("rev-a");
  });

  it("a revision without a profile keeps the node's settings; its first revision brings back its first settings (a rollback)", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    expect((await act.switch(req([a2, a1], "rev-c", 6))).outcome).toBe("applied");
    await waitFor("both on rev-c", async () => (await root(a1)) === "rev-c" && (await root(a2)) === "rev-c", { timeoutMs: 30_000, everyMs: 100 });
    expect(await state(a2)).toMatchObject({ revision: "rev-c", latencyMs: 7, continuation: "accept" });
    // a1 was on rev-b's profile: rev-c keeps it.
    expect(await state(a1)).toMatchObject({ revision: "rev-c", latencyMs: 40, continuation: "refuse" });
    expect((await act.switch(req([a1], "rev-a", 7))).outcome).toBe("applied");
    await waitFor("a1 back on rev-a", async () => (await root(a1)) === "rev-a", { timeoutMs: 30_000, everyMs: 100 });
    expect(await state(a1)).toMatchObject({ revision: "rev-a", latencyMs: 5, continuation: "accept" });
  }, 60_000);

  it("a stopped node takes the revision and boots serving it", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    expect(await act.switch(req([b1], "rev-b", 8))).toMatchObject({ outcome: "applied", detail: "gpu-b1: gpu-b1 is stopped: it boots serving rev-b" });
    expect(b1.serving).toBe(false);
    expect(b1.opts.inference).toMatchObject({ revision: "rev-b", loadMs: 800 });
    // Back to what it started with; "" (none reported) is a revision too: a node never told one keeps none.
    expect((await act.switch(req([b1], "rev-a", 8))).outcome).toBe("applied");
    expect(b1.opts.inference).toEqual({ revision: "rev-a" });
    expect((await act.switch(req([b1], "", 8))).outcome).toBe("applied");
    expect(b1.opts.inference?.revision).toBeUndefined();
    expect(await act.switch(req([b1], "", 8))).toMatchObject({ outcome: "already" });
  });

  it("a bad request and an unreachable cloud are failed steps naming why", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    expect(await act.switch(req([a1], "bad revision", 9))).toMatchObject({ outcome: "failed", detail: expect.stringMatching(/HTTP 400 .*revision must be/) as unknown });
    expect(await act.switch({ ...req([a1], "rev-b", 9), nodes: [{ nodeId: "gpu-zz", host: "" }] })).toMatchObject({ outcome: "failed", detail: expect.stringMatching(/no node/) as unknown });
    const gone = localRolloutActuator({ url: `http://127.0.0.1:${await freePort()}`, log: testLogger(), timeoutMs: 2000 });
    expect(await gone.switch(req([a1], "rev-b", 9))).toMatchObject({ outcome: "failed" });
    const calls = cloud.rollout.switches.map((s) => `${s.node}:${s.revision}:${s.outcome}`);
    expect(calls).toContain("gpu-a1:rev-b:applied");
    expect(calls).toContain("gpu-a2:rev-b:refused-stale");
  });

  it("an AZ as a whole (a promoted rollout's last word): running nodes restart on it one after another, a stopped one boots on it", async () => {
    const act = localRolloutActuator({ url: cloud.url, log: testLogger() });
    cloud.rollout.setProfiles({ "rev-d": { loadMs: 800 } });
    const whole = (az: string, revision: string): RolloutSwitchRequest => ({ rolloutId: "r2", az, nodes: [], to: { revision }, token: 10 });
    const r = await act.switch(whole("az-a", "rev-d"));
    expect(r).toMatchObject({ outcome: "applied", detail: "az-a: az-a as a whole on rev-d: gpu-a1,gpu-a2" });
    // One at a time: never both out (loading, or not answering) in the same sample.
    let bothOut = 0;
    await waitFor("both on rev-d", async () => {
      const [s1, s2] = await Promise.all([state(a1), state(a2)]);
      const out = (s: FakeInferenceState | null): boolean => !s || s.mode === "loading";
      if (out(s1) && out(s2)) bothOut++;
      return (await root(a1)) === "rev-d" && (await root(a2)) === "rev-d";
    }, { timeoutMs: 40_000, everyMs: 50 });
    expect(bothOut).toBe(0);
    expect(await act.switch(whole("az-b", "rev-d"))).toMatchObject({ outcome: "applied", detail: "az-b: az-b as a whole on rev-d: gpu-b1" });
    expect(b1.opts.inference).toMatchObject({ revision: "rev-d", loadMs: 800 });
    await waitFor("the switches done", async () => !cloud.rollout.switching("gpu-a2"), { timeoutMs: 10_000, everyMs: 100 });
    expect(await act.switch(whole("az-a", "rev-d"))).toMatchObject({ outcome: "already" });
    expect(await act.switch(whole("az-zz", "rev-d"))).toMatchObject({ outcome: "failed", detail: expect.stringMatching(/HTTP 400 .*no node in .*az-zz/) as unknown });
  }, 60_000);
});
