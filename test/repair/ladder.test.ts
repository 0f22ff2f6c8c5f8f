/**
 * The repair ladder as a pure function: each rung from what a node's record carries, each
 * escalation from the host's history, and each bound (one per AZ, fleet share, AZ floor,
 * replacement in sight) that turns an action into `held` with a reason.
 */
import { describe, expect, it } from "vitest";
import { diagnose, repairLadder, type AzRepairCapacity, type RepairNode, type RepairRecord } from "../../agent/src/fleet/repair/ladder";
import { encodeGpuFault, gpuFaultOf, parseGpuFault, type GpuFault } from "../../agent/src/node/sources/gpu-fault";

const NOW = 1_800_000_000_000;
const H = 3_600_000;

function node(id: string, o: Partial<RepairNode> = {}): RepairNode {
  return { nodeId: id, az: "a", host: `i-${id}`, alive: true, takesTraffic: false, gpus: 0, hard: [], soft: [], fault: null, ...o };
}
const fault = (f: Partial<GpuFault>): GpuFault => ({ xids: [], recovery: null, remap: null, ...f });
const healthy = (id: string, az = "a"): RepairNode => node(id, { az, takesTraffic: true, gpus: 8 });
const cap = (o: Record<string, Partial<AzRepairCapacity>>): Map<string, AzRepairCapacity> =>
  new Map(Object.entries(o).map(([az, c]) => [az, { healthy: 64, floor: 0, spare: 1, ...c }]));

describe("diagnose: the cheapest rung for what the record carries", () => {
  const rows: [string, Partial<RepairNode>, string | null, string | null][] = [
    ["application XID 13", { hard: ["GPU_XID_REPEATED"], fault: fault({ xids: [13] }) }, "restart", "app-xid"],
    ["application XIDs 31, 43, 45", { hard: ["GPU_XID_REPEATED"], fault: fault({ xids: [31, 43, 45] }) }, "restart", "app-xid"],
    ["XID 48 (double-bit ECC)", { hard: ["GPU_XID_FATAL"], fault: fault({ xids: [48] }) }, "reset", "reset-needed"],
    ["the driver asks for a GPU reset", { hard: ["GPU_RECOVERY_ACTION"], fault: fault({ recovery: "GPU Reset" }) }, "reset", "reset-needed"],
    ["a pending row remap (soft)", { soft: ["GPU_ROW_REMAP_PENDING"], fault: fault({ remap: "pending" }) }, "reset", "reset-needed"],
    ["XID 79 (off the bus)", { hard: ["GPU_XID_FATAL"], fault: fault({ xids: [79] }) }, "reboot", "off-bus"],
    ["a GPU gone from the PCI bus, no XID", { hard: ["GPU_OFF_BUS"] }, "reboot", "off-bus"],
    ["the driver asks for a node reboot", { hard: ["GPU_RECOVERY_ACTION"], fault: fault({ recovery: "Node Reboot" }) }, "reboot", "reboot-needed"],
    ["another fatal XID (GSP timeout)", { hard: ["GPU_XID_FATAL"], fault: fault({ xids: [119] }) }, "reboot", "gpu-fault"],
    ["an uncorrected ECC error", { hard: ["GPU_ECC_UNCORRECTED"] }, "reboot", "gpu-fault"],
    ["a failed DCGM quick diagnostic (the deep check before traffic)", { hard: ["GPU_DIAG_FAILED"] }, "reboot", "gpu-fault"],
    ["a deep check still pending (not a fault)", { hard: ["DEEP_CHECK_PENDING"] }, null, null],
    ["a fatal XID with no facts (an older agent)", { hard: ["GPU_XID_FATAL"] }, "reboot", "gpu-fault"],
    ["a row-remap failure", { hard: ["GPU_ROW_REMAP_FAILURE"], fault: fault({ remap: "failure" }) }, "replace", "remap-failure"],
    ["a row-remap failure beside XID 79", { hard: ["GPU_XID_FATAL", "GPU_ROW_REMAP_FAILURE"], fault: fault({ xids: [79], remap: "failure" }) }, "replace", "remap-failure"],
    ["an engine fault, no GPU fault", { hard: ["PROBE_STUCK"] }, null, null],
    ["a healthy node", {}, null, null],
  ];
  it.each(rows)("%s → %s", (_name, n, action, cls) => {
    const d = diagnose(node("n", n));
    expect(d?.action ?? null).toBe(action);
    expect(d?.fault ?? null).toBe(cls);
  });
});

describe("the host's history escalates a fault that came back", () => {
  const past = (action: RepairRecord["action"], doneAgoMs: number, f: RepairRecord["fault"] = "off-bus"): RepairRecord[] => [
    { nodeId: "n", host: "i-n", action, fault: f, at: NOW - doneAgoMs - 60_000, doneAt: NOW - doneAgoMs },
  ];
  const xid79 = { hard: ["GPU_XID_FATAL"], fault: fault({ xids: [79] }) };
  const ecc = { hard: ["GPU_ECC_UNCORRECTED"] };
  const app = { hard: ["GPU_XID_REPEATED"], fault: fault({ xids: [13] }) };
  const rows: [string, Partial<RepairNode>, RepairRecord[], string][] = [
    ["off the bus again 2 h after a reboot → replace", xid79, past("reboot", 2 * H), "replace"],
    ["off the bus again 30 h after a reboot (outside the window) → reboot", xid79, past("reboot", 30 * H), "reboot"],
    ["another fault 3 h after a reboot → quarantine the host", ecc, past("reboot", 3 * H, "gpu-fault"), "quarantine"],
    ["the diag failing again 1 h after the reboot it caused → quarantine the host", { hard: ["GPU_DIAG_FAILED"] }, past("reboot", H, "gpu-fault"), "quarantine"],
    ["application XID again 1 h after a restart → reboot", app, past("restart", H, "app-xid"), "reboot"],
    ["application XID 1 h after a reboot → quarantine", app, past("reboot", H, "gpu-fault"), "quarantine"],
    ["a fault on another host's history → its own rung", ecc, [{ ...past("reboot", H)[0], host: "i-other", nodeId: "other" }], "reboot"],
  ];
  it.each(rows)("%s", (_name, n, history, action) => {
    const plan = repairLadder({ nodes: [node("n", n)], history, capacity: cap({ a: {} }), now: NOW });
    expect(plan.decisions).toHaveLength(1);
    expect(plan.decisions[0].action).toBe(action);
  });

  it("a quarantined host stays quarantined, and is listed", () => {
    const history: RepairRecord[] = [{ nodeId: "old", host: "i-n", action: "quarantine", fault: "gpu-fault", at: NOW - 100 * H, doneAt: NOW - 99 * H }];
    const plan = repairLadder({ nodes: [node("n", ecc)], history, capacity: cap({ a: { spare: 0 } }), now: NOW });
    expect(plan.decisions[0]).toMatchObject({ action: "quarantine", reason: expect.stringContaining("quarantined") });
    expect(plan.quarantined).toEqual(["i-n"]);
  });
});

describe("capacity first: the bounds hold a repair with a reason", () => {
  const xid79 = { hard: ["GPU_XID_FATAL"], fault: fault({ xids: [79] }) };
  const fleet = (n: number, az = "a"): RepairNode[] => Array.from({ length: n }, (_, i) => healthy(`h${az}${i}`, az));

  it("one node per AZ in repair: the second broken node of an AZ is held, another AZ's is not", () => {
    const nodes = [node("x1", { ...xid79, since: NOW - 2000 }), node("x2", { ...xid79, since: NOW - 1000 }), node("y1", { ...xid79, az: "b" }), ...fleet(20), ...fleet(20, "b")];
    const plan = repairLadder({ nodes, history: [], capacity: cap({ a: {}, b: {} }), now: NOW });
    const by = new Map(plan.decisions.map((d) => [d.nodeId, d]));
    expect(by.get("x1")).toMatchObject({ action: "reboot" });
    expect(by.get("x2")).toMatchObject({ action: "held", wanted: "reboot", bound: "az", reason: expect.stringContaining("x1 is already in repair in a") });
    expect(by.get("y1")).toMatchObject({ action: "reboot" });
  });

  it("a repair under way holds the AZ's others", () => {
    const history: RepairRecord[] = [{ nodeId: "ha0", host: "i-ha0", action: "reboot", fault: "off-bus", at: NOW - 60_000, doneAt: null }];
    const plan = repairLadder({ nodes: [node("x1", xid79), ...fleet(20)], history, capacity: cap({ a: {} }), now: NOW });
    expect(plan.decisions.find((d) => d.nodeId === "x1")).toMatchObject({ action: "held", bound: "az" });
  });

  it("no more than the fleet share (10 % by default, at least one node) at once", () => {
    const azs = ["a", "b", "c", "d"];
    const nodes = [...azs.map((az) => node(`x${az}`, { ...xid79, az })), ...azs.flatMap((az) => fleet(4, az))];
    // 20 nodes: 10 % is 2 repairs at once; the AZs sorted by how long each node has been broken.
    const plan = repairLadder({ nodes, history: [], capacity: cap({ a: {}, b: {}, c: {}, d: {} }), now: NOW });
    expect(plan.decisions.filter((d) => d.action === "reboot")).toHaveLength(2);
    expect(plan.decisions.filter((d) => d.action === "held").map((d) => d.bound)).toEqual(["share", "share"]);
    expect(plan.decisions.find((d) => d.bound === "share")?.reason).toContain("the most at once is 2 (10 % of 20)");
    // A smaller fleet still repairs one node at a time.
    const small = repairLadder({ nodes: [node("x", xid79), healthy("h")], history: [], capacity: cap({ a: {} }), now: NOW });
    expect(small.decisions[0].action).toBe("reboot");
    // The share is a setting.
    const wide = repairLadder({ nodes, history: [], capacity: cap({ a: {}, b: {}, c: {}, d: {} }), now: NOW, settings: { maxShare: 0.25 } });
    expect(wide.decisions.filter((d) => d.action === "reboot")).toHaveLength(4);
  });

  it("never below an AZ's floor by taking out a node that still serves; a node already out costs nothing", () => {
    // Predictive drains off: a serving node's pending row remap is a reset now (with them on it waits for a low-load moment: predictive.test.ts).
    const pending = { takesTraffic: true, gpus: 8, soft: ["GPU_ROW_REMAP_PENDING"], fault: fault({ remap: "pending" }) };
    const settings = { predictive: false };
    const below = repairLadder({ nodes: [node("p", pending), healthy("h")], history: [], capacity: cap({ a: { healthy: 16, floor: 12 } }), now: NOW, settings });
    expect(below.decisions[0]).toMatchObject({ action: "held", wanted: "reset", bound: "floor", reason: expect.stringContaining("a would keep 8 healthy GPUs, below its floor of 12") });
    const above = repairLadder({ nodes: [node("p", pending), healthy("h")], history: [], capacity: cap({ a: { healthy: 16, floor: 8 } }), now: NOW, settings });
    expect(above.decisions[0].action).toBe("reset");
    const out = repairLadder({ nodes: [node("x", xid79), healthy("h")], history: [], capacity: cap({ a: { healthy: 8, floor: 12 } }), now: NOW });
    expect(out.decisions[0].action).toBe("reboot");
  });

  it("never replace or quarantine without a replacement in sight in the AZ; each one uses one up", () => {
    const remap = { hard: ["GPU_ROW_REMAP_FAILURE"], fault: fault({ remap: "failure" }) };
    const none = repairLadder({ nodes: [node("r", remap)], history: [], capacity: cap({ a: { spare: 0 } }), now: NOW });
    expect(none.decisions[0]).toMatchObject({ action: "held", wanted: "replace", bound: "replacement", reason: expect.stringContaining("no replacement in sight in a") });
    const one = repairLadder({ nodes: [node("r", remap)], history: [], capacity: cap({ a: { spare: 1 } }), now: NOW });
    expect(one.decisions[0].action).toBe("replace");
    const history: RepairRecord[] = [{ nodeId: "q", host: "i-q", action: "reboot", fault: "gpu-fault", at: NOW - 2 * H, doneAt: NOW - H }];
    const q = repairLadder({ nodes: [node("q", { hard: ["GPU_ECC_UNCORRECTED"] })], history, capacity: cap({ a: { spare: 0 } }), now: NOW });
    expect(q.decisions[0]).toMatchObject({ action: "held", wanted: "quarantine", bound: "replacement" });
    expect(q.quarantined).toEqual([]);
  });

  it("dead nodes and healthy ones get no decision", () => {
    const plan = repairLadder({ nodes: [node("d", { ...xid79, alive: false }), healthy("h")], history: [], capacity: cap({ a: {} }), now: NOW });
    expect(plan.decisions).toEqual([]);
  });
});

describe("gpuFault: the facts the agent publishes for the ladder", () => {
  it("from the signals, and back", () => {
    const f = gpuFaultOf({
      fatalXids: [{ code: 79, busId: "0000:53:00.0" } as never],
      xidRepeated: [{ code: 13, busId: "0000:53:00.0", count: 5, windowMs: 600_000 }],
      gpu: { value: { kind: "ok", gpus: [{ recoveryAction: "Node Reboot", remappedRowsFailure: false, remappedRowsPending: true } as never] } } as never,
    });
    expect(f).toEqual({ xids: [13, 79], recovery: "Node Reboot", remap: "pending" });
    expect(parseGpuFault(encodeGpuFault(f))).toEqual(f);
    expect(gpuFaultOf({ fatalXids: [], xidRepeated: [] })).toBeNull();
    expect(encodeGpuFault(null)).toBe("");
    for (const bad of ["", "{", "[]", '{"xids":"79"}', "x".repeat(600)]) expect(parseGpuFault(bad)).toBeNull();
    expect(parseGpuFault('{"xids":[79,-1,"x"],"recovery":5,"remap":"odd"}')).toEqual({ xids: [79], recovery: null, remap: null });
  });
});
