/**
 * The repair ladder's `local` actuator (repair-local.ts) against the drill's local cloud and its
 * instances (lab/drill/local-instances.ts) powering real SimNodes (fake nvidia-smi + fake
 * inference + real agent processes): the Node list carries each instance id as the real
 * inventory reads it; cordon is a flag; a drain evicts the inference pod through the preStop
 * drain (pending until done); a reboot keeps the node down for its boot time and leaves only what
 * a reboot does not heal; a surge boots the AZ's spare slot (in DNS from its boot), once per
 * instance replaced, none at the group's max, and fails its launch with AWS's capacity message
 * under a capacity fault; a terminate stops the instance for good and takes it out of DNS.
 */
import { mkdtempSync, existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalRepairActuator } from "../../agent/src/fleet/actuators/repair-local";
import { parseNodeList } from "../../agent/src/fleet/inventory/inventory";
import { capacityMessage, LocalCloud } from "../../lab/drill/local-cloud";
import { DRILL_AGENT_ENV } from "../../lab/drill/settings";
import { nodeAddress } from "../../lab/drill/stack";
import { NVSMI_FAULTS } from "../../lab/sim/nvsmi-state";
import { SimNode, type SimNodePorts } from "../../lab/sim/sim-node";
import { freePort, waitFor } from "../../agent/src/util/net";
import { createRepairActuator } from "../../agent/src/fleet/actuators/repair-index";
import { testLogger } from "../redis/helpers";

const dir = mkdtempSync(join(tmpdir(), "llmha-local-repair-"));
let a1: SimNode;
let a2: SimNode;
let spare: SimNode;
let cloud: LocalCloud;
/** Each publish of an AZ's node records, as the drill's DNS would get it. */
const published: string[][] = [];
const ctx = { token: 9, reason: "reboot (off-bus) of gpu-a1" };

beforeAll(async () => {
  const ports: SimNodePorts = { inference: await freePort(), admin: await freePort(), http: await freePort(), agentCheck: await freePort() };
  [a1, a2, spare] = await SimNode.startAll([
    { id: "gpu-a1", az: "az-a", dir, env: { ...DRILL_AGENT_ENV }, address: nodeAddress(0, 0), ports },
    { id: "gpu-a2", az: "az-a", dir, env: { ...DRILL_AGENT_ENV }, address: nodeAddress(0, 1), ports },
    { id: "gpu-a3", az: "az-a", dir, env: { ...DRILL_AGENT_ENV }, stopped: true, address: nodeAddress(0, 2), ports },
  ]);
  cloud = new LocalCloud({ now: Date.now });
  await cloud.listen();
  const all = [a1, a2, spare];
  cloud.kube.serveInventory(all);
  cloud.instances.attach([a1, a2], [spare]);
  cloud.instances.bootMs = 1000;
  cloud.attach(all, () => [], async (az) => void published.push(all.filter((n) => n.az === az && cloud.powerOf(n.id) !== "stopped").map((n) => n.id)));
}, 90_000);

afterAll(async () => {
  await cloud?.stop();
  await Promise.all([a1?.stop(), a2?.stop(), spare?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

async function nodes(): Promise<{ nodeId: string; instanceId?: string; unschedulable: boolean }[]> {
  const body = (await (await fetch(`${cloud.url}/api/v1/nodes`)).json()) as { items: { metadata: { name: string }; spec: { unschedulable?: boolean } }[] };
  const cordoned = new Map(body.items.map((i) => [i.metadata.name, i.spec.unschedulable === true]));
  return parseNodeList(body).map((n) => ({ nodeId: n.nodeId, instanceId: n.instanceId, unschedulable: cordoned.get(n.nodeId) ?? false }));
}

const status = async (n: SimNode): Promise<string> => (await n.agentGet("/readyz").catch(() => ({ body: { status: "ERR" } }))).body.status as string;

describe("LocalRepairActuator over the local cloud's instances", () => {
  it("is what act mode gets with LLMHA_ACTUATOR=local (dry-run logs only)", () => {
    const cfg = { awsRegion: null, inventory: "none", inventoryTokenFile: "t", inventoryCaFile: "c", repairNamespace: "llm-ha" };
    expect(createRepairActuator({ ...cfg, actuator: "local", localCloudUrl: cloud.url }, testLogger(), {})?.kind).toBe("local");
    expect(() => createRepairActuator({ ...cfg, actuator: "local", localCloudUrl: null }, testLogger(), {})).toThrow(/LLMHA_LOCAL_CLOUD_URL/);
    expect(createRepairActuator({ ...cfg, actuator: "dry-run" }, testLogger(), {})?.kind).toBe("dry-run");
  });

  it("lists each node's instance id as the inventory reads it; cordon and uncordon are desired-state", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    const id = cloud.instances.instanceOf("gpu-a1");
    expect(id).toMatch(/^i-[0-9a-f]{17}$/);
    expect(cloud.instances.instanceOf("gpu-a1")).toBe(id); // stable
    expect(await nodes()).toEqual([
      { nodeId: "gpu-a1", instanceId: id, unschedulable: false },
      { nodeId: "gpu-a2", instanceId: cloud.instances.instanceOf("gpu-a2"), unschedulable: false },
    ]);
    expect(await r.cordon("gpu-a1", ctx)).toMatchObject({ step: "cordon", target: "gpu-a1", outcome: "applied", calls: 1 });
    expect(await r.cordon("gpu-a1", ctx)).toMatchObject({ outcome: "already" });
    expect((await nodes())[0].unschedulable).toBe(true);
    expect(await r.uncordon("gpu-a1", ctx)).toMatchObject({ outcome: "applied", detail: "gpu-a1 schedulable" });
    expect(await r.uncordon("gpu-a1", ctx)).toMatchObject({ outcome: "already" });
    expect(cloud.instances.actions.map((x) => `${x.step}:${x.outcome}:${x.token}`)).toEqual(["cordon:applied:9", "cordon:already:9", "uncordon:applied:9", "uncordon:already:9"]);
  }, 30_000);

  it("drain: the inference pod is evicted through the preStop drain (the agent answers drain), pending until it is gone", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    await waitFor("gpu-a1 HEALTHY", async () => (await status(a1)) === "HEALTHY", { timeoutMs: 30_000, everyMs: 100 });
    const first = await r.drain("gpu-a1", ctx);
    expect(first).toMatchObject({ step: "drain", outcome: "pending" });
    expect(first.detail).toMatch(/evicting the inference pod of gpu-a1/);
    await waitFor("agent answers drain", async () => (await a1.agentCheck()).startsWith("drain"), { timeoutMs: 5000, everyMs: 50 });
    expect((await r.drain("gpu-a1", ctx)).outcome).toBe("pending");
    let done = first;
    await waitFor("drained", async () => (done = await r.drain("gpu-a1", ctx)).outcome !== "pending", { timeoutMs: 20_000, everyMs: 200 });
    expect(done).toMatchObject({ outcome: "applied" });
    expect(done.detail).toMatch(/^inference pod of gpu-a1 evicted \(preStop \d+\.\d s\)$/);
    expect(a1.serving).toBe(false);
  }, 60_000);

  it("reboot: down for its boot time, back with what a reboot heals gone (GPU off the bus, XID 79) and what it does not kept (row-remap failure)", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    const id = cloud.instances.instanceOf("gpu-a1");
    await a1.setGpu({ ...NVSMI_FAULTS.gpuMissing, overrides: NVSMI_FAULTS.rowRemapFailure.overrides });
    await a1.xid(79);
    expect(await r.reboot(id, ctx)).toMatchObject({ step: "reboot", target: id, outcome: "applied" });
    expect((await r.reboot(id, ctx)).outcome).toBe("already");
    await waitFor("gpu-a1 down", () => !a1.running, { timeoutMs: 20_000, everyMs: 20 });
    const down = Date.now();
    await waitFor("gpu-a1 back", () => a1.serving && (a1.agentPid ?? 0) > 0, { timeoutMs: 45_000, everyMs: 100 });
    expect(Date.now() - down).toBeGreaterThanOrEqual(1000); // the boot time
    expect(a1.gpuState.missingGpus).toBeUndefined();
    expect(a1.gpuState.overrides).toEqual(NVSMI_FAULTS.rowRemapFailure.overrides);
    expect(readFileSync(a1.xidLogPath, "utf8")).toBe("");
    // The row-remap failure is still there after the reboot: the node comes back out of rotation.
    await waitFor("gpu-a1 agent answers", async () => (await status(a1)) !== "ERR", { timeoutMs: 30_000, everyMs: 200 });
    expect(await status(a1)).not.toBe("HEALTHY");
    await a1.gpuFault(null);
    await waitFor("gpu-a1 HEALTHY", async () => (await status(a1)) === "HEALTHY", { timeoutMs: 30_000, everyMs: 200 });
    // The drain file of the evicted pod is gone with the new pod: the agent no longer answers drain.
    expect(await a1.agentCheck()).not.toMatch(/^drain/);
  }, 120_000);

  it("restart after a drain: the new pod starts without the evicted one's drain file, so the node serves again (an operator's pod restart)", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    await r.drain("gpu-a1", ctx);
    await waitFor("drained", async () => (await r.drain("gpu-a1", ctx)).outcome !== "pending", { timeoutMs: 20_000, everyMs: 200 });
    expect(a1.serving).toBe(false);
    expect(existsSync(a1.drainFilePath)).toBe(true);
    expect(await r.restart("gpu-a1", ctx)).toMatchObject({ step: "restart", outcome: "applied" });
    await waitFor("gpu-a1 HEALTHY after the restart", async () => (await status(a1)) === "HEALTHY", { timeoutMs: 30_000, everyMs: 200 });
    expect(existsSync(a1.drainFilePath)).toBe(false);
    expect(await a1.agentCheck()).toMatch(/^up/);
  }, 90_000);

  it("surge boots the AZ's spare slot once per instance replaced (in DNS from its boot); at the max nothing; terminate stops the old one for good", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    const old = cloud.instances.instanceOf("gpu-a2");
    const surged = await r.surge(old, ctx);
    expect(surged).toMatchObject({ step: "surge", outcome: "applied", surged: true, detail: `az-a desired 2→3 to replace ${old}` });
    expect(await r.surge(old, ctx)).toMatchObject({ outcome: "already", surged: true });
    expect(cloud.powerOf("gpu-a3")).not.toBe("stopped");
    await waitFor("spare HEALTHY", async () => (await status(spare)) === "HEALTHY", { timeoutMs: 45_000, everyMs: 100 });
    expect(published[0]).toEqual(["gpu-a1", "gpu-a2", "gpu-a3"]); // in DNS from its boot
    expect((await nodes()).map((n) => n.nodeId)).toEqual(["gpu-a1", "gpu-a2", "gpu-a3"]);
    // The group is at its max (2 nodes + 1 spare slot): another replacement asks nothing.
    const full = await r.surge(cloud.instances.instanceOf("gpu-a1"), ctx);
    expect(full).toMatchObject({ outcome: "applied", surged: false });
    expect(full.detail).toMatch(/at its max \(3\): nothing asked/);

    expect(await r.terminate(old, true, ctx)).toMatchObject({ step: "terminate", outcome: "applied" });
    expect(await r.terminate(old, true, ctx)).toMatchObject({ outcome: "already" });
    await waitFor("gpu-a2 stopped", () => cloud.powerOf("gpu-a2") === "stopped", { timeoutMs: 30_000, everyMs: 100 });
    expect(a2.running).toBe(false);
    expect(published.at(-1)).toEqual(["gpu-a1", "gpu-a3"]);
    expect(cloud.instances.group("az-a")).toMatchObject({ desired: 2, max: 3 });
    expect(await r.reboot(old, ctx)).toMatchObject({ outcome: "failed" });
  }, 120_000);

  it("under a capacity fault the surge is accepted but its launch fails with AWS's message; an unknown instance is a failed step", async () => {
    const r = new LocalRepairActuator({ url: cloud.url });
    await cloud.instances.reset();
    expect(cloud.powerOf("gpu-a3")).toBe("stopped");
    expect(cloud.powerOf("gpu-a2")).toBe("running"); // a fresh instance in the terminated slot
    cloud.instances.capacityFault("az-a", 5);
    const id = cloud.instances.instanceOf("gpu-a1");
    expect(await r.surge(id, ctx)).toMatchObject({ outcome: "applied", surged: true });
    await waitFor("failed launch", () => cloud.instances.launches.some((l) => l.message !== undefined), { timeoutMs: 5000, everyMs: 50 });
    expect(cloud.instances.launches.at(-1)).toMatchObject({ az: "az-a", replaces: id, node: null, message: capacityMessage("p4d.24xlarge", "az-a") });
    expect(cloud.powerOf("gpu-a3")).toBe("stopped");
    const bad = await r.reboot("i-0000000000000000", ctx);
    expect(bad).toMatchObject({ step: "reboot", outcome: "failed" });
    expect(bad.detail).toMatch(/HTTP 400 .*no instance .*i-0000000000000000/);
    expect(await new LocalRepairActuator({ url: "http://127.0.0.1:9" }).cordon("gpu-a1", ctx)).toMatchObject({ outcome: "failed" });
  }, 60_000);
});
