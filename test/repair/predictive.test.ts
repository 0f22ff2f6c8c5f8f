/**
 * The ladder's predictive rung (`drain`): a serving node whose warning facts pass a threshold is
 * drained at a low-load moment within the 24 h budget and the ladder's bounds; a hard fault wins;
 * held predictive drains are information (not counted as held repairs); the agent's warning facts
 * (coarse steps, windows) and their record encoding, read both ways by older and newer leaders.
 */
import { describe, expect, it } from "vitest";
import { repairLadder, type AzRepairCapacity, type RepairNode, type RepairRecord } from "../../agent/src/fleet/repair/ladder";
import { isPredictiveHold } from "../../agent/src/fleet/repair/advise";
import { encodeGpuFault, gpuFaultOf, parseGpuFault, type GpuFault } from "../../agent/src/node/sources/gpu-fault";
import { coarse, GpuWarningTracker, type GpuWarnings } from "../../agent/src/node/sources/gpu-warn";
import type { GpuInfo, GpuObservation, Sample } from "../../agent/src/node/sources/signals";

const NOW = 1_800_000_000_000;
const H = 3_600_000;

const warn = (w: Partial<GpuWarnings>): GpuFault => ({ xids: [], recovery: null, remap: null, warn: { ecc: 0, eccRise: 0, slow: 0, ...w } });
function node(id: string, o: Partial<RepairNode> = {}): RepairNode {
  return { nodeId: id, az: "a", host: `i-${id}`, alive: true, takesTraffic: true, gpus: 8, hard: [], soft: [], fault: null, load: 1, ...o };
}
const cap = (o: Record<string, Partial<AzRepairCapacity>>): Map<string, AzRepairCapacity> =>
  new Map(Object.entries(o).map(([az, c]) => [az, { healthy: 32, floor: 0, spare: 0, ...c }]));
/** An AZ of four serving nodes, the first warned. */
const az4 = (w: Partial<RepairNode>, az = "a", load = 1): RepairNode[] => [node(`w${az}`, { az, ...w, load }), ...[1, 2, 3].map((i) => node(`${az}${i}`, { az, load }))];

describe("predictive drain: thresholds", () => {
  const rows: [string, Partial<RepairNode>, string | null, string | null][] = [
    ["corrected ECC rose 100 in 24 h", { fault: warn({ ecc: 200, eccRise: 100 }) }, "drain", "ecc-rising"],
    ["corrected ECC rose 50 in 24 h (below)", { fault: warn({ ecc: 500, eccRise: 50 }) }, null, null],
    ["3 slowdown episodes in an hour", { fault: warn({ slow: 3 }) }, "drain", "slowdowns-repeated"],
    ["2 slowdown episodes (below)", { fault: warn({ slow: 2 }) }, null, null],
    ["a pending row remap on a serving node", { soft: ["GPU_ROW_REMAP_PENDING"], fault: { xids: [], recovery: null, remap: "pending" } }, "drain", "remap-pending"],
    ["warnings on a node already out (not serving)", { takesTraffic: false, fault: warn({ eccRise: 1000 }) }, null, null],
  ];
  it.each(rows)("%s", (_n, w, action, fault) => {
    const plan = repairLadder({ nodes: az4(w), history: [], capacity: cap({ a: {} }), now: NOW });
    const d = plan.decisions.find((x) => x.nodeId === "wa");
    if (action === null) expect(d).toBeUndefined();
    else expect(d).toMatchObject({ action, wanted: "drain", fault });
  });

  it("a hard fault wins over warnings: its rung, not a predictive drain", () => {
    const plan = repairLadder({ nodes: az4({ hard: ["GPU_XID_FATAL"], fault: { ...warn({ eccRise: 1000, slow: 9 }), xids: [79] } }), history: [], capacity: cap({ a: {} }), now: NOW });
    expect(plan.decisions[0]).toMatchObject({ nodeId: "wa", action: "reboot", fault: "off-bus" });
  });

  it("off: no predictive drain, a serving node's pending remap is a reset as before", () => {
    const off = { predictive: false };
    expect(repairLadder({ nodes: az4({ fault: warn({ eccRise: 1000 }) }), history: [], capacity: cap({ a: {} }), now: NOW, settings: off }).decisions).toEqual([]);
    const pending = repairLadder({ nodes: az4({ soft: ["GPU_ROW_REMAP_PENDING"], fault: { xids: [], recovery: null, remap: "pending" } }), history: [], capacity: cap({ a: {} }), now: NOW, settings: off });
    expect(pending.decisions[0]).toMatchObject({ action: "reset" });
  });

  it("the thresholds are settings", () => {
    const plan = repairLadder({ nodes: az4({ fault: warn({ eccRise: 50 }) }), history: [], capacity: cap({ a: {} }), now: NOW, settings: { eccRise: 50 } });
    expect(plan.decisions[0].action).toBe("drain");
  });
});

describe("predictive drain: bounds", () => {
  const ecc = { fault: warn({ ecc: 1000, eccRise: 1000 }) };
  const drained = (host: string, hoursAgo: number, done = true): RepairRecord => ({ nodeId: host.slice(2), host, action: "drain", fault: "ecc-rising", at: NOW - hoursAgo * H, doneAt: done ? NOW - hoursAgo * H : null });

  it("budget: at most predictiveBudget drains per 24 h fleet-wide, counted from the history", () => {
    const nodes = [...az4(ecc, "a"), ...az4(ecc, "b"), ...az4(ecc, "c")];
    const capacity = cap({ a: {}, b: {}, c: {} });
    const settings = { maxShare: 1 };
    // None in the last 24 h: two of the three (the budget), the third held.
    const plan = repairLadder({ nodes, history: [], capacity, now: NOW, settings });
    expect(plan.decisions.filter((d) => d.action === "drain")).toHaveLength(2);
    const held = plan.decisions.find((d) => d.action === "held")!;
    expect(held).toMatchObject({ wanted: "drain", bound: "budget", reason: expect.stringContaining("2 predictive drains in the last 24 h, the budget is 2") });
    expect(held.reason).toContain("the node serves on");
    // Two elsewhere within 24 h (one done, one under way): none now; one 25 h ago does not count.
    const history = [drained("i-x", 3), drained("i-y", 1, false), drained("i-z", 25)];
    const spent = repairLadder({ nodes, history, capacity, now: NOW, settings });
    expect(spent.decisions.filter((d) => d.action === "drain")).toHaveLength(0);
    expect(spent.decisions.every((d) => d.bound === "budget")).toBe(true);
    expect(repairLadder({ nodes, history: [drained("i-z", 25)], capacity, now: NOW, settings }).decisions.filter((d) => d.action === "drain")).toHaveLength(2);
    // The budget is a setting.
    expect(repairLadder({ nodes, history: [], capacity, now: NOW, settings: { ...settings, predictiveBudget: 3 } }).decisions.filter((d) => d.action === "drain")).toHaveLength(3);
  });

  it("load: only at a low-load moment; an unknown load is not a low one", () => {
    // 4 nodes at 5 each: 20 over the 3 others is 6.67 ≤ 8 → drain; at 7 each, 28 / 3 = 9.33 > 8 → held.
    expect(repairLadder({ nodes: az4(ecc, "a", 5), history: [], capacity: cap({ a: {} }), now: NOW }).decisions[0].action).toBe("drain");
    const busy = repairLadder({ nodes: az4(ecc, "a", 7), history: [], capacity: cap({ a: {} }), now: NOW });
    expect(busy.decisions[0]).toMatchObject({ action: "held", wanted: "drain", bound: "load", reason: expect.stringContaining("not a low-load moment: a's load would be 9.33 per serving node without it, above 8") });
    const unknown = az4(ecc);
    delete unknown[2].load;
    expect(repairLadder({ nodes: unknown, history: [], capacity: cap({ a: {} }), now: NOW }).decisions[0]).toMatchObject({ action: "held", bound: "load" });
    // The only serving node of its AZ: nobody would carry its load.
    expect(repairLadder({ nodes: [node("w", ecc)], history: [], capacity: cap({ a: {} }), now: NOW }).decisions[0]).toMatchObject({ action: "held", bound: "load", reason: expect.stringContaining("no other node serves in a") });
  });

  it("floor: a serving node is not drained below the AZ's floor", () => {
    const plan = repairLadder({ nodes: az4(ecc), history: [], capacity: cap({ a: { healthy: 32, floor: 28 } }), now: NOW });
    expect(plan.decisions[0]).toMatchObject({ action: "held", wanted: "drain", bound: "floor", reason: expect.stringContaining("a would keep 24 healthy GPUs, below its floor of 28") });
  });

  it("one node per AZ, and broken nodes come first", () => {
    const xid79 = node("x", { takesTraffic: false, gpus: 0, hard: ["GPU_XID_FATAL"], fault: { xids: [79], recovery: null, remap: null } });
    const plan = repairLadder({ nodes: [xid79, ...az4(ecc)], history: [], capacity: cap({ a: {} }), now: NOW, settings: { maxShare: 1 } });
    expect(plan.decisions.find((d) => d.nodeId === "x")?.action).toBe("reboot");
    expect(plan.decisions.find((d) => d.nodeId === "wa")).toMatchObject({ action: "held", bound: "az", reason: expect.stringContaining("x is already in repair in a") });
  });

  it("one per host per window: warnings back after a repair wait for the hard fault", () => {
    const plan = repairLadder({ nodes: az4(ecc), history: [drained("i-wa", 30)].map((r) => ({ ...r, at: NOW - 2 * H, doneAt: NOW - 2 * H })), capacity: cap({ a: {} }), now: NOW, settings: { predictiveBudget: 5 } });
    expect(plan.decisions[0]).toMatchObject({ action: "held", bound: "budget", reason: expect.stringContaining("warnings back 2 h after its drain") });
  });

  it("escalation: a node drained predictively that goes hard within the window escalates as after a reboot", () => {
    const history: RepairRecord[] = [{ nodeId: "wa", host: "i-wa", action: "drain", fault: "ecc-rising", at: NOW - 3 * H, doneAt: NOW - 3 * H }];
    const hard = node("wa", { takesTraffic: false, gpus: 0, hard: ["GPU_ECC_UNCORRECTED"] });
    const plan = repairLadder({ nodes: [hard, node("h")], history, capacity: cap({ a: { spare: 1 } }), now: NOW });
    expect(plan.decisions[0]).toMatchObject({ action: "quarantine", reason: expect.stringContaining("failed again 3 h after its drain") });
    const offBus = node("wa", { takesTraffic: false, gpus: 0, hard: ["GPU_OFF_BUS"] });
    expect(repairLadder({ nodes: [offBus, node("h")], history, capacity: cap({ a: { spare: 1 } }), now: NOW }).decisions[0].action).toBe("replace");
  });

  it("held predictive drains are information: not counted as held repairs (the held alert)", () => {
    const plan = repairLadder({ nodes: az4(ecc, "a", 9), history: [], capacity: cap({ a: {} }), now: NOW });
    expect(isPredictiveHold(plan.decisions[0])).toBe(true);
    expect(isPredictiveHold({ action: "held", wanted: "reboot", bound: "floor" })).toBe(false);
    expect(isPredictiveHold({ action: "held", wanted: "drain", bound: "failed" })).toBe(false);
  });
});

describe("warning facts on the node", () => {
  const gpu = (i: number, ecc: number | null, slow: string[] = []): GpuInfo => ({
    index: i, uuid: `GPU-${i}`, busId: null, temperatureC: 40, powerW: 100, utilizationPct: 0, memoryUsedMiB: 0, memoryTotalMiB: 81559,
    eccUncorrectedVolatile: 0, eccCorrectedVolatile: ecc, remappedRowsPending: false, remappedRowsFailure: false, retiredPagesPending: null, slowdowns: slow, recoveryAction: null, fabricState: null, fabricStatus: null,
  });
  let seq = 0;
  const sample = (gpus: GpuInfo[]): Sample<GpuObservation> => ({ seq: ++seq, at: 0, value: { kind: "ok", gpus } });

  it("coarse steps: 1, 2, 5, 10, 20, 50, …", () => {
    expect([0, 1, 2, 3, 4, 5, 9, 10, 19, 99, 100, 149, 250, 999, 1000].map(coarse)).toEqual([0, 1, 2, 2, 2, 5, 5, 10, 10, 50, 100, 100, 200, 500, 1000]);
  });

  it("corrected ECC: the count now and its rise over 24 h; a creeping count changes the facts only at a step; a driver reload restarts the window", () => {
    const t = new GpuWarningTracker();
    const at = (h: number): number => NOW + h * H;
    t.observe(sample([gpu(0, 10), gpu(1, 0)]), at(0));
    expect(t.current(at(0))).toEqual({ ecc: 10, eccRise: 0, slow: 0 });
    const seen = new Set<string>();
    for (let h = 1; h <= 20; h++) {
      t.observe(sample([gpu(0, 10 + h * 6), gpu(1, 0)]), at(h));
      seen.add(JSON.stringify(t.current(at(h))));
    }
    // 20 hours of a creeping count, few distinct facts (each a step crossed).
    expect(seen.size).toBeLessThanOrEqual(8);
    expect(t.current(at(20))).toEqual({ ecc: 100, eccRise: 100, slow: 0 });
    // 30 h on: the first samples left the window.
    t.observe(sample([gpu(0, 130), gpu(1, 0)]), at(30));
    expect(t.current(at(30))!.eccRise).toBe(50);
    // A reboot: the volatile count restarts.
    t.observe(sample([gpu(0, 0), gpu(1, 0)]), at(31));
    expect(t.current(at(31))).toBeNull();
    // The same result seen twice counts once; a failed read changes nothing.
    const s = sample([gpu(0, 3, ["hw_thermal_slowdown"])]);
    t.observe(s, at(32));
    t.observe(s, at(32));
    t.observe({ seq: ++seq, at: 0, value: { kind: "timeout", detail: "x" } }, at(32));
    expect(t.current(at(32))).toEqual({ ecc: 2, eccRise: 2, slow: 1 });
  });

  it("slowdown episodes: entries into a thermal/hardware slowdown per GPU within an hour; power brake left out", () => {
    const t = new GpuWarningTracker();
    const min = (m: number): number => NOW + m * 60_000;
    const states = [["hw_slowdown"], [], ["sw_thermal_slowdown"], ["sw_thermal_slowdown"], [], ["hw_thermal_slowdown"], []];
    states.forEach((slow, i) => t.observe(sample([gpu(0, 0, slow), gpu(1, 0, ["hw_power_brake_slowdown"])]), min(i * 5)));
    expect(t.current(min(30))?.slow).toBe(3);
    // An hour after the first: it leaves the window.
    t.observe(sample([gpu(0, 0), gpu(1, 0)]), min(62));
    expect(t.current(min(62))?.slow).toBe(2);
    t.observe(sample([gpu(0, 0), gpu(1, 0)]), min(200));
    expect(t.current(min(200))).toBeNull();
  });

  it("the record: written without a fault, read both ways by older and newer leaders", () => {
    const w: GpuWarnings = { ecc: 200, eccRise: 100, slow: 3 };
    const f = gpuFaultOf({ fatalXids: [], xidRepeated: [] }, w);
    expect(f).toEqual({ xids: [], recovery: null, remap: null, warn: w });
    const text = encodeGpuFault(f);
    expect(parseGpuFault(text)).toEqual(f);
    // An older leader's parser (xids, recovery, remap only) reads it as no fault: diagnose gives nothing.
    const old = JSON.parse(text) as Record<string, unknown>;
    expect(old.xids).toEqual([]);
    expect(old.recovery).toBeNull();
    expect(old.remap).toBeNull();
    // A record from an older agent (no warn) reads as no warning; unknown fields are ignored; bad warnings read as none.
    expect(parseGpuFault('{"xids":[48],"recovery":null,"remap":null}')).toEqual({ xids: [48], recovery: null, remap: null });
    expect(parseGpuFault('{"xids":[],"recovery":null,"remap":null,"warn":{"ecc":5,"eccRise":2,"slow":1,"future":true},"next":[1]}')).toEqual(warn({ ecc: 5, eccRise: 2, slow: 1 }));
    expect(parseGpuFault('{"xids":[],"recovery":null,"remap":null,"warn":{"ecc":-1,"eccRise":"x","slow":1.5}}')).toEqual({ xids: [], recovery: null, remap: null });
    expect(gpuFaultOf({ fatalXids: [], xidRepeated: [] }, null)).toBeNull();
    // Bounded: the largest warning still fits the record's limit.
    expect(encodeGpuFault({ ...f!, xids: Array.from({ length: 40 }, (_, i) => 9000 + i), recovery: "x".repeat(100), warn: { ecc: 1e9, eccRise: 1e9, slow: 99 } }).length).toBeGreaterThan(0);
  });
});
