/**
 * The `local` actuator against the real drill pieces: the local cloud powering real SimNodes
 * (fake nvidia-smi + fake inference + real agent processes), publishing each AZ's nodes in a
 * real PowerDNS (the headless Services), and shifting in a real HAProxy that finds its servers
 * through `server-template` + `resolvers`, through its runtime API.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalActuator } from "../../agent/src/fleet/actuators/local";
import { LocalCloud } from "../../lab/drill/local-cloud";
import { DRILL_AGENT_ENV } from "../../lab/drill/settings";
import { azProxy, backendOf, DRILL_ZONE, nodeAddress, nodeGroup, nodesRecord, slotNames } from "../../lab/drill/stack";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { startPdns, type PdnsHandle } from "../../lab/engines/pdns";
import { SimNode, type SimNodePorts } from "../../lab/sim/sim-node";
import { freePort, waitFor } from "../../agent/src/util/net";

const dir = mkdtempSync(join(tmpdir(), "llmha-local-actuator-"));
let active: SimNode;
let spare: SimNode;
let proxy: HaproxyHandle;
let dns: PdnsHandle;
let backend: string;
let cloud: LocalCloud;
const ctx = { token: 7, reason: "capacity lost: az-a=DOWN" };

beforeAll(async () => {
  const ports: SimNodePorts = { inference: await freePort(), admin: await freePort(), http: await freePort(), agentCheck: await freePort() };
  [active, spare] = await SimNode.startAll([
    { id: "gpu-a1", az: "az-a", dir, env: { ...DRILL_AGENT_ENV }, address: nodeAddress(0, 0), ports },
    { id: "gpu-c1", az: "az-c", dir, env: { ...DRILL_AGENT_ENV }, stopped: true, address: nodeAddress(2, 0), ports },
  ]);
  const records = (az: string): string[] => [active, spare].filter((n) => n.az === az && (n.running || cloud.powerOf(n.id) !== "stopped")).map((n) => n.address);
  dns = await startPdns({ zone: DRILL_ZONE, groups: [["127.0.0.2"]], healthPort: await freePort(), records: { [nodesRecord("az-a")]: [active.address], [nodesRecord("az-c")]: [] } });
  const groups = new Map([["az-a", nodeGroup("az-a", 1, ports)], ["az-c", nodeGroup("az-c", 1, ports)]]);
  const p = azProxy({ name: "az-a", address: "127.0.0.1" }, await freePort(), groups);
  backend = backendOf(p.name);
  proxy = await startHaproxy({ proxies: [p], nameservers: [`127.0.0.1:${dns.port}`] });
  cloud = new LocalCloud({ now: Date.now });
  await cloud.listen();
  cloud.attach([active, spare], () => [{ haproxy: proxy, proxy: backend, serversOf: (az) => slotNames(groups.get(az)!) }], (az) => dns.setRecords(nodesRecord(az), records(az)));
}, 60_000);

afterAll(async () => {
  await cloud?.stop();
  await proxy?.stop();
  await dns?.stop();
  await Promise.all([active?.stop(), spare?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Status of the server slot DNS filled with this node's address (undefined: no slot has it). */
async function row(node: SimNode): Promise<string | undefined> {
  return (await proxy.stats()).find((r) => r.proxy === backend && r.addr.startsWith(`${node.address}:`))?.status;
}

describe("LocalActuator over the drill's local cloud", () => {
  it("wakes the stopped standby node (real processes), then answers `already`; releases it, then `already`", async () => {
    const a = new LocalActuator({ url: cloud.url });
    expect(spare.running).toBe(false);
    const woke = await a.wakeStandby("az-c", ctx);
    // One read of the AZ's node groups (the wake follow), one wake of its first group.
    expect(woke).toMatchObject({ action: "standby.wake", az: "az-c", outcome: "applied", calls: 2, wake: { phase: "waiting", step: 0, steps: 1, groups: ["az-c"] } });
    expect(woke.detail).toBe("az-c (p4d.24xlarge): desired 0→1, az-c: booting gpu-c1; waking az-c");
    expect(woke.durationMs).toBeLessThan(1000); // answers at once; the boot goes on
    expect((await a.wakeStandby("az-c", ctx)).outcome).toBe("already");
    await waitFor("standby agent HEALTHY", async () => (await spare.agentGet("/readyz")).body.status === "HEALTHY", { timeoutMs: 30_000, everyMs: 100 });
    expect(await dns.query(`${nodesRecord("az-c")}.${DRILL_ZONE}`)).toEqual([spare.address]);
    await waitFor("standby UP in HAProxy (backup)", async () => (await row(spare))?.startsWith("UP"), { timeoutMs: 15_000, everyMs: 100 });
    expect(cloud.powerOf("gpu-c1")).toBe("running");

    const released = await a.releaseStandby("az-c", ctx);
    expect(released).toMatchObject({ outcome: "applied", detail: "az-c: stopping gpu-c1" });
    await cloud.settled("az-c");
    expect(spare.running).toBe(false);
    expect(cloud.powerOf("gpu-c1")).toBe("stopped");
    // Halted, it leaves its AZ's records (its pod is gone), and HAProxy's slot lets it go.
    await expect(dns.query(`${nodesRecord("az-c")}.${DRILL_ZONE}`)).rejects.toThrow();
    expect((await a.releaseStandby("az-c", ctx)).outcome).toBe("already");
    expect(cloud.actions.map((x) => `${x.action}:${x.outcome}:${x.token}`)).toEqual([
      "standby.wake:applied:7", "standby.wake:already:7", "standby.release:applied:7", "standby.release:already:7",
    ]);
  }, 90_000);

  it("capacity fault: the first type's launch fails with AWS's message, the next call wakes the fallback group, which boots the node", async () => {
    const a = new LocalActuator({ url: cloud.url });
    cloud.defineGroups("az-c", [{ name: "az-c-p5", instanceType: "p5.48xlarge" }, { name: "az-c-p4d", instanceType: "p4d.24xlarge" }]);
    cloud.capacityFault("az-c-p5", 5);
    try {
      expect(await a.wakeStandby("az-c", ctx)).toMatchObject({ outcome: "applied", wake: { phase: "waiting", step: 0, steps: 2 } });
      expect(cloud.powerOf("gpu-c1")).toBe("stopped");
      await waitFor("failed launch recorded", () => cloud.launchFailures.length > 0, { timeoutMs: 5000, everyMs: 50 });
      const fb = await a.wakeStandby("az-c", ctx);
      expect(fb).toMatchObject({ outcome: "applied", wake: { phase: "fallback", step: 1, groups: ["az-c-p4d"], failure: { class: "capacity", group: "az-c-p5" } } });
      expect(fb.wake?.failure?.message).toMatch(/^We currently do not have sufficient p5\.48xlarge capacity in the Availability Zone you requested \(az-c\)/);
      expect(cloud.powerOf("gpu-c1")).toBe("starting");
      await waitFor("standby agent HEALTHY", async () => (await spare.agentGet("/readyz").catch(() => ({ body: { status: "" } }))).body.status === "HEALTHY", { timeoutMs: 30_000, everyMs: 100 });
      expect((await a.wakeStandby("az-c", ctx)).wake?.phase).toBe("serving");
    } finally {
      await a.releaseStandby("az-c", ctx);
      await cloud.settled("az-c");
      cloud.defineGroups("az-c", []);
    }
    expect(cloud.powerOf("gpu-c1")).toBe("stopped");
  }, 60_000);

  it("a zonal shift puts the AZ's servers in MAINT in the proxy; renewing is `already`; cancel makes them ready", async () => {
    const a = new LocalActuator({ url: cloud.url });
    await waitFor("active UP", async () => (await row(active))?.startsWith("UP"), { timeoutMs: 15_000, everyMs: 100 });
    const started = await a.startZonalShift("az-a", { ...ctx, expiresInMs: 60_000 });
    expect(started).toMatchObject({ action: "shift.start", outcome: "applied" });
    expect(await row(active)).toBe("MAINT");
    expect((await a.startZonalShift("az-a", { ...ctx, expiresInMs: 60_000 })).detail).toMatch(/^az-a: shift renewed until /);
    expect((await a.cancelZonalShift("az-a", ctx)).outcome).toBe("applied");
    await waitFor("back UP", async () => (await row(active))?.startsWith("UP"), { timeoutMs: 10_000, everyMs: 100 });
    expect((await a.cancelZonalShift("az-a", ctx)).outcome).toBe("already");
  }, 30_000);

  it("a shift lifts itself at its expiry, as ARC's does", async () => {
    const a = new LocalActuator({ url: cloud.url });
    // Long enough that the first look sees the shift on a loaded machine (300 ms was passed once in a
    // CI run before the look came back), short enough to wait out.
    await a.startZonalShift("az-a", { ...ctx, expiresInMs: 2000 });
    expect(await row(active)).toBe("MAINT");
    await waitFor("expired", async () => (await row(active)) !== "MAINT", { timeoutMs: 10_000, everyMs: 50 });
  });

  it("refuses an unknown AZ as a failed call (HTTP 400), which the gate reports as `failed`", async () => {
    await expect(new LocalActuator({ url: cloud.url }).wakeStandby("az-z", ctx)).rejects.toThrow(/HTTP 400 .*no nodes in AZ/);
  });
});
