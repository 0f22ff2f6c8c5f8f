/**
 * The `local` actuator against the real drill pieces: the local cloud powering real SimNodes
 * (fake nvidia-smi + fake inference + real agent processes) and shifting in a real HAProxy
 * through its runtime API.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalActuator } from "../../agent/src/actuators/local";
import { LocalCloud } from "../../lab/drill/local-cloud";
import { DRILL_AGENT_ENV } from "../../lab/drill/settings";
import { azProxy, backendOf } from "../../lab/drill/stack";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { SimNode } from "../../lab/sim/sim-node";
import { freePort, waitFor } from "../../agent/src/util/net";

const dir = mkdtempSync(join(tmpdir(), "llmha-local-actuator-"));
let active: SimNode;
let spare: SimNode;
let proxy: HaproxyHandle;
let backend: string;
let cloud: LocalCloud;
const ctx = { token: 7, reason: "capacity lost: az-a=DOWN" };

beforeAll(async () => {
  [active, spare] = await SimNode.startAll([
    { id: "gpu-a1", az: "az-a", dir, env: { ...DRILL_AGENT_ENV } },
    { id: "gpu-c1", az: "az-c", dir, env: { ...DRILL_AGENT_ENV }, stopped: true },
  ]);
  const p = azProxy({ name: "az-a", address: "127.0.0.1" }, await freePort(), [active, spare]);
  backend = backendOf(p.name);
  proxy = await startHaproxy({ proxies: [p] });
  cloud = new LocalCloud({ now: Date.now });
  await cloud.listen();
  cloud.attach([active, spare], () => [{ haproxy: proxy, proxy: backend }]);
}, 60_000);

afterAll(async () => {
  await cloud?.stop();
  await proxy?.stop();
  await Promise.all([active?.stop(), spare?.stop()]);
});

async function row(server: string): Promise<string | undefined> {
  return (await proxy.stats()).find((r) => r.proxy === backend && r.server === server)?.status;
}

describe("LocalActuator over the drill's local cloud", () => {
  it("wakes the stopped standby node (real processes), then answers `already`; releases it, then `already`", async () => {
    const a = new LocalActuator({ url: cloud.url });
    expect(spare.running).toBe(false);
    const woke = await a.wakeStandby("az-c", ctx);
    expect(woke).toMatchObject({ action: "standby.wake", az: "az-c", outcome: "applied", calls: 1, detail: "az-c: booting gpu-c1" });
    expect(woke.durationMs).toBeLessThan(1000); // answers at once; the boot goes on
    expect((await a.wakeStandby("az-c", ctx)).outcome).toBe("already");
    await waitFor("standby agent HEALTHY", async () => (await spare.agentGet("/readyz")).body.status === "HEALTHY", { timeoutMs: 30_000, everyMs: 100 });
    await waitFor("standby UP in HAProxy (backup)", async () => (await row("gpu-c1"))?.startsWith("UP"), { timeoutMs: 15_000, everyMs: 100 });
    expect(cloud.powerOf("gpu-c1")).toBe("running");

    const released = await a.releaseStandby("az-c", ctx);
    expect(released).toMatchObject({ outcome: "applied", detail: "az-c: stopping gpu-c1" });
    await cloud.settled("az-c");
    expect(spare.running).toBe(false);
    expect(cloud.powerOf("gpu-c1")).toBe("stopped");
    expect((await a.releaseStandby("az-c", ctx)).outcome).toBe("already");
    expect(cloud.actions.map((x) => `${x.action}:${x.outcome}:${x.token}`)).toEqual([
      "standby.wake:applied:7", "standby.wake:already:7", "standby.release:applied:7", "standby.release:already:7",
    ]);
  }, 90_000);

  it("a zonal shift puts the AZ's servers in MAINT in the proxy; renewing is `already`; cancel makes them ready", async () => {
    const a = new LocalActuator({ url: cloud.url });
    await waitFor("active UP", async () => (await row("gpu-a1"))?.startsWith("UP"), { timeoutMs: 15_000, everyMs: 100 });
    const started = await a.startZonalShift("az-a", { ...ctx, expiresInMs: 60_000 });
    expect(started).toMatchObject({ action: "shift.start", outcome: "applied" });
    expect(await row("gpu-a1")).toBe("MAINT");
    expect((await a.startZonalShift("az-a", { ...ctx, expiresInMs: 60_000 })).detail).toMatch(/^az-a: shift renewed until /);
    expect((await a.cancelZonalShift("az-a", ctx)).outcome).toBe("applied");
    await waitFor("back UP", async () => (await row("gpu-a1"))?.startsWith("UP"), { timeoutMs: 10_000, everyMs: 100 });
    expect((await a.cancelZonalShift("az-a", ctx)).outcome).toBe("already");
  }, 30_000);

  it("a shift lifts itself at its expiry, as ARC's does", async () => {
    const a = new LocalActuator({ url: cloud.url });
    await a.startZonalShift("az-a", { ...ctx, expiresInMs: 300 });
    expect(await row("gpu-a1")).toBe("MAINT");
    await waitFor("expired", async () => (await row("gpu-a1")) !== "MAINT", { timeoutMs: 5000, everyMs: 50 });
  });

  it("refuses an unknown AZ as a failed call (HTTP 400), which the gate reports as `failed`", async () => {
    await expect(new LocalActuator({ url: cloud.url }).wakeStandby("az-z", ctx)).rejects.toThrow(/HTTP 400 .*no nodes in AZ/);
  });
});
