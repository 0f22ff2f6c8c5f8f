import { describe, expect, it } from "vitest";
import type { NodeView } from "../../agent/src/fleet/redis/registry";
import {
  blastRadius,
  DEFAULT_CONTROLLER_SETTINGS,
  emptyBlastMemory,
  emptyControllerMemory,
  evaluate,
  nextAzState,
  resolveControllerSettings,
  ControllerSettingsError,
  shiftDecision,
  standbyDecision,
  type ShiftMemory,
  tierLevel,
  type AzMemory,
  type AzState,
} from "../../agent/src/fleet/controller/state";
import { standbyFields } from "../../agent/src/fleet/controller/standby";

const S = DEFAULT_CONTROLLER_SETTINGS;

function node(id: string, az: string, o: Partial<NodeView> = {}): NodeView {
  return {
    nodeId: id, az, alive: true, status: "HEALTHY", phase: "serving", weight: 100,
    gpus: 8, gpusExpected: 8, soft: [], hard: [], takesTraffic: true, ...o,
  };
}
const out = (id: string, az: string, o: Partial<NodeView> = {}): NodeView =>
  node(id, az, { status: "UNHEALTHY", phase: "down", weight: 0, takesTraffic: false, ...o });

describe("AZ state with hysteresis", () => {
  it("maps capacity ratios to OK / DEGRADED / DOWN", () => {
    expect(nextAzState(undefined, 32, 32, S, 0).state).toBe("OK");
    expect(nextAzState(undefined, 24, 32, S, 0).state).toBe("OK"); // one node of four out: still OK (L1)
    expect(nextAzState(undefined, 16, 32, S, 0).state).toBe("DEGRADED");
    expect(nextAzState(undefined, 7, 32, S, 0).state).toBe("DOWN");
    expect(nextAzState(undefined, 0, 32, S, 0).state).toBe("DOWN");
  });

  it("worsens at once but recovers only past threshold + hysteresis for recoverPeriods evaluations", () => {
    let m: AzMemory = nextAzState(undefined, 32, 32, S, 0);
    m = nextAzState(m, 0, 32, S, 1);
    expect(m.state).toBe("DOWN");
    // 0.3 clears downBelow (0.25) but not downBelow + hysteresis (0.35): stays DOWN however long
    for (let i = 0; i < 10; i++) m = nextAzState(m, 9.6, 32, S, 2 + i);
    expect(m.state).toBe("DOWN");
    // full capacity: needs 3 consecutive evaluations, then goes straight to OK
    m = nextAzState(m, 32, 32, S, 20);
    m = nextAzState(m, 32, 32, S, 21);
    expect(m.state).toBe("DOWN");
    m = nextAzState(m, 32, 32, S, 22);
    expect(m.state).toBe("OK");
    expect(m.since).toBe(22);
  });

  it("a flapping AZ does not flap its state", () => {
    let m: AzMemory = nextAzState(undefined, 32, 32, S, 0);
    const seen: AzState[] = [];
    for (let i = 0; i < 20; i++) {
      m = nextAzState(m, i % 2 ? 32 : 16, 32, S, i);
      seen.push(m.state);
    }
    expect(new Set(seen.slice(1))).toEqual(new Set(["DEGRADED"]));
  });

  it("thresholds are configurable and validated", () => {
    const s = resolveControllerSettings({ degradedBelow: 0.9, downBelow: 0.5 });
    expect(nextAzState(undefined, 28, 32, s, 0).state).toBe("DEGRADED");
    expect(() => resolveControllerSettings({ downBelow: 0.8, degradedBelow: 0.5 })).toThrow(ControllerSettingsError);
  });
});

describe("tier level", () => {
  const m = (o: Record<string, AzState>): Map<string, AzState> => new Map(Object.entries(o));
  it("L0 all OK, L1 a node out, L2 an AZ degraded, L3 an AZ down, L4 every AZ down", () => {
    expect(tierLevel(m({ a: "OK", b: "OK" }), []).level).toBe("L0");
    expect(tierLevel(m({ a: "OK", b: "OK" }), ["n1"]).level).toBe("L1");
    expect(tierLevel(m({ a: "DEGRADED", b: "OK" }), ["n1"]).level).toBe("L2");
    expect(tierLevel(m({ a: "DOWN", b: "DEGRADED" }), []).level).toBe("L3");
    expect(tierLevel(m({ a: "DOWN", b: "DOWN" }), []).level).toBe("L4");
    expect(tierLevel(m({ a: "DOWN", b: "DOWN" }), []).reason).toBe("every AZ down: a,b");
  });
});

describe("blast-radius cap", () => {
  it("more than half the live nodes failing one soft check: suspect, and the nodes are kept in", () => {
    const nodes = [
      out("n1", "a", { soft: ["PROBE_LATENCY"] }),
      out("n2", "a", { soft: ["PROBE_LATENCY"] }),
      out("n3", "b", { soft: ["PROBE_LATENCY"] }),
      node("n4", "b"),
    ];
    const r = evaluate({ nodes }, emptyControllerMemory(), S, 1000);
    expect(r.evaluation.suspect).toEqual(["PROBE_LATENCY"]);
    expect(r.evaluation.suspectCounts).toEqual({ PROBE_LATENCY: 3 });
    // kept in: no AZ loses capacity, only node-level L1 at worst
    expect(r.evaluation.azs.map((a) => a.state)).toEqual(["OK", "OK"]);
    expect(r.evaluation.tier.level).toBe("L0");
  });

  it("half or fewer is a real fault: the nodes stay out", () => {
    const nodes = [out("n1", "a", { soft: ["PROBE_LATENCY"] }), out("n2", "a", { soft: ["PROBE_LATENCY"] }), node("n3", "b"), node("n4", "b")];
    const r = evaluate({ nodes }, emptyControllerMemory(), S, 1000);
    expect(r.evaluation.suspect).toEqual([]);
    expect(r.evaluation.azs.find((a) => a.az === "a")?.state).toBe("DOWN");
    expect(r.evaluation.tier.level).toBe("L3");
  });

  it("hard faults are never capped; a node with a hard fault stays out", () => {
    const nodes = [
      out("n1", "a", { soft: ["PROBE_TIMEOUT"], hard: ["GPU_LOST"] }),
      out("n2", "a", { soft: ["PROBE_TIMEOUT"] }),
      out("n3", "a", { soft: ["PROBE_TIMEOUT"] }),
    ];
    const r = evaluate({ nodes }, emptyControllerMemory(), S, 0);
    expect(r.evaluation.suspect).toEqual(["PROBE_TIMEOUT"]);
    expect(r.evaluation.nodesOut).toEqual(["n1"]);
  });

  it("counts flapping nodes within the window and forgets them after it", () => {
    const s = { ...S, blastWindowMs: 10_000 };
    let mem = emptyBlastMemory();
    const ids = ["n1", "n2", "n3", "n4"];
    // each node fails the probe at a different moment: never more than one at once
    ids.forEach((id, i) => {
      const nodes = ids.map((x) => (x === id ? out(x, "a", { soft: ["PROBE_LATENCY"] }) : node(x, "a")));
      mem = blastRadius(mem, nodes, s, i * 1000).memory;
    });
    const calm = ids.map((x) => node(x, "a"));
    expect(blastRadius(mem, calm, s, 4000).suspect).toEqual(["PROBE_LATENCY"]);
    expect(blastRadius(mem, calm, s, 20_000).suspect).toEqual([]);
  });

  it("needs blastMinNodes live nodes", () => {
    const nodes = [out("n1", "a", { soft: ["X"] }), out("n2", "a", { soft: ["X"] })];
    expect(blastRadius(emptyBlastMemory(), nodes, S, 0).suspect).toEqual([]);
  });
});

describe("capacity and standby", () => {
  it("dead (expired) members still count toward the total; degraded nodes that serve count as healthy", () => {
    const nodes = [
      node("n1", "a"),
      node("n2", "a", { status: "DEGRADED", weight: 50 }),
      { ...out("n3", "a"), alive: false, status: "EXPIRED" as const },
      { ...out("n4", "a"), alive: false, status: "EXPIRED" as const },
    ];
    const r = evaluate({ nodes }, emptyControllerMemory(), S, 0);
    expect(r.evaluation.azs[0]).toMatchObject({ az: "a", healthyCapacity: 16, totalCapacity: 32, state: "DEGRADED" });
    expect(r.evaluation.tier.level).toBe("L2");
    expect(r.evaluation.nodesOut).toEqual(["n3", "n4"]);
  });

  it("wants the standby AZ awake when an active AZ loses capacity, and holds it", () => {
    const s = { standbyAz: "c", standbyHoldMs: 60_000 };
    const hurt = new Map<string, AzState>([["a", "DEGRADED"], ["b", "OK"]]);
    const fine = new Map<string, AzState>([["a", "OK"], ["b", "OK"]]);
    const r1 = standbyDecision({ wake: false, lastTriggerAt: null }, hurt, s, 1000);
    expect(r1.decision).toMatchObject({ az: "c", wake: true });
    expect(standbyDecision(r1.memory, fine, s, 30_000).decision.wake).toBe(true);
    expect(standbyDecision(r1.memory, fine, s, 70_000).decision.wake).toBe(false);
    expect(standbyDecision({ wake: false, lastTriggerAt: null }, hurt, { standbyAz: null, standbyHoldMs: 0 }, 0).decision.wake).toBe(false);
  });

  it("a wake-up is decided in the same evaluation that sees the AZ degrade", () => {
    const s = { ...S, standbyAz: "c" };
    const well = evaluate({ nodes: [node("n1", "a"), node("n2", "a"), node("n3", "a"), node("n4", "a"), node("n5", "b")] }, emptyControllerMemory(), s, 0);
    expect(well.evaluation.standby.wake).toBe(false);
    const nodes = [out("n1", "a"), out("n2", "a"), node("n3", "a"), node("n4", "a"), node("n5", "b")];
    const r = evaluate({ nodes }, well.memory, s, 1000);
    expect(r.evaluation.standby).toMatchObject({ az: "c", wake: true });
  });

  it("a standby AZ booting on purpose is not a zone down: it is left out of the tier until it has been OK once", () => {
    const s = { ...S, standbyAz: "c" };
    const booting = (id: string) => out(id, "c", { status: "UNKNOWN", phase: "loading", served: false });
    const hurt = [out("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")];
    let r = evaluate({ nodes: [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")] }, emptyControllerMemory(), s, 0);
    r = evaluate({ nodes: hurt }, r.memory, s, 500);
    expect(r.evaluation.standby.wake).toBe(true);
    // the woken standby's nodes register while they load: DOWN as an AZ, but not L3 "AZ down: c"
    r = evaluate({ nodes: [...hurt, booting("c1"), booting("c2")] }, r.memory, s, 1000);
    expect(r.evaluation.azs.find((a) => a.az === "c")?.state).toBe("DOWN");
    expect(r.evaluation.tier).toMatchObject({ level: "L2", reason: "AZ degraded: a" });
    // once it has served (OK after recoverPeriods evaluations), losing it counts again
    for (let t = 2000; t < 2000 + S.recoverPeriods * 100; t += 100) r = evaluate({ nodes: [...hurt, node("c1", "c"), node("c2", "c")] }, r.memory, s, t);
    expect(r.evaluation.azs.find((a) => a.az === "c")?.state).toBe("OK");
    r = evaluate({ nodes: [...hurt, out("c1", "c"), out("c2", "c")] }, r.memory, s, 3000);
    expect(r.evaluation.tier.level).toBe("L3");
  });

  it("a scale-out is not a capacity loss: nodes that never served are left out while others in the AZ have", () => {
    const s = { ...S, standbyAz: "c" };
    const joining = (id: string, az: string) => out(id, az, { status: "UNKNOWN", phase: "loading", served: false });
    const nodes = [node("a1", "a"), node("a2", "a"), joining("a3", "a"), joining("a4", "a"), joining("a5", "a"), node("b1", "b")];
    const r = evaluate({ nodes }, emptyControllerMemory(), s, 0);
    expect(r.evaluation.azs.find((a) => a.az === "a")).toMatchObject({ state: "OK", healthyCapacity: 16, totalCapacity: 16 });
    expect(r.evaluation.tier.level).toBe("L0");
    expect(r.evaluation.standby.wake).toBe(false);
    // a node that served and is now down (crashed, restarting) is lost capacity
    const r2 = evaluate({ nodes: [...nodes.slice(0, 1), out("a2", "a", { phase: "loading" }), ...nodes.slice(2)] }, r.memory, s, 1000);
    expect(r2.evaluation.azs.find((a) => a.az === "a")).toMatchObject({ state: "DEGRADED", healthyCapacity: 8, totalCapacity: 16 });
    expect(r2.evaluation.standby.wake).toBe(true);
    // a cold start (no node of the AZ ever served) counts them all: DOWN, left to the cold-start grace
    const cold = evaluate({ nodes: [joining("a3", "a"), joining("a4", "a"), node("b1", "b")] }, emptyControllerMemory(), s, 0);
    expect(cold.evaluation.azs.find((a) => a.az === "a")).toMatchObject({ state: "DOWN", totalCapacity: 16 });
  });

  it("a cold start is not a capacity loss: an AZ never OK wakes the standby only after the grace", () => {
    const s = { ...S, standbyAz: "c", coldStartGraceMs: 60_000 };
    const loading = [out("n1", "a", { status: "UNHEALTHY", phase: "loading" }), out("n2", "a", { status: "UNHEALTHY", phase: "loading" }), node("n5", "b")];
    let r = evaluate({ nodes: loading }, emptyControllerMemory(), s, 0);
    expect(r.evaluation.azs.find((a) => a.az === "a")?.state).toBe("DOWN");
    expect(r.evaluation.standby).toMatchObject({ wake: false, reason: "starting, not failing: a never OK yet" });
    r = evaluate({ nodes: loading }, r.memory, s, 59_000);
    expect(r.evaluation.standby.wake).toBe(false);
    // never came up within the grace: that is a capacity loss after all
    r = evaluate({ nodes: loading }, r.memory, s, 60_000);
    expect(r.evaluation.standby).toMatchObject({ wake: true, reason: "capacity lost: a=DOWN" });
  });

  it("once an AZ has been OK, losing it wakes the standby at once, and the memory says so", () => {
    const s = { ...S, standbyAz: "c", coldStartGraceMs: 60_000 };
    let m: AzMemory = nextAzState(undefined, 0, 32, s, 0);
    expect(m).toMatchObject({ state: "DOWN", everOk: false, firstSeen: 0 });
    for (let t = 1; t <= 3; t++) m = nextAzState(m, 32, 32, s, t);
    expect(m).toMatchObject({ state: "OK", everOk: true, firstSeen: 0 });
    m = nextAzState(m, 0, 32, s, 10);
    expect(m).toMatchObject({ state: "DOWN", everOk: true });
  });
});

describe("standby AZ and the tier", () => {
  const s = { ...S, standbyAz: "c", standbyHoldMs: 10_000, coldStartGraceMs: 0 };
  const dead = (id: string, az: string): NodeView => ({ ...out(id, az), alive: false, status: "EXPIRED" as const });

  it("a standby AZ not wanted awake does not count toward the tier, dead members included", () => {
    // the schedule just stopped c's nodes (SIGKILL-like: members kept until forgotten)
    const nodes = [node("a1", "a"), node("b1", "b"), dead("c1", "c"), dead("c2", "c")];
    const r = evaluate({ nodes }, emptyControllerMemory(), s, 0);
    expect(r.evaluation.azs.find((a) => a.az === "c")?.state).toBe("DOWN"); // still published as it is
    expect(r.evaluation.tier).toMatchObject({ level: "L0" });
    expect(r.evaluation.nodesOut).toEqual([]);
    expect(r.evaluation.standbyHealthy).toBe(0);
  });

  it("while it is wanted awake it counts, and its healthy capacity is reported", () => {
    const nodes = [out("a1", "a"), node("b1", "b"), node("c1", "c"), out("c2", "c", { status: "UNHEALTHY", phase: "loading" })];
    const r = evaluate({ nodes }, emptyControllerMemory(), s, 0);
    expect(r.evaluation.standby.wake).toBe(true);
    expect(r.evaluation.standbyHealthy).toBe(8);
    expect(r.evaluation.nodesOut).toEqual(["a1", "c2"]);
    expect(r.evaluation.tier.level).toBe("L3");
    // every active AZ down but the standby serving: L3, not L4
    const all = evaluate({ nodes: [out("a1", "a"), out("b1", "b"), node("c1", "c")] }, emptyControllerMemory(), s, 0);
    expect(all.evaluation.tier).toMatchObject({ level: "L3", reason: "AZ down: a,b" });
  });
});

describe("zonal shift decision", () => {
  const s = { zonalShift: true, standbyAz: "c", shiftRecoverMs: 5000 };
  const none: ShiftMemory = { az: null, since: null, okSince: null };
  const m = (o: Record<string, AzState>): Map<string, AzState> => new Map(Object.entries(o));

  it("shifts away from a DOWN active AZ while another active AZ is OK; off by default", () => {
    const r = shiftDecision(none, m({ a: "DOWN", b: "OK", c: "DOWN" }), s, 1000);
    expect(r.decision).toEqual({ az: "a", reason: "a=DOWN, serving from b" });
    expect(r.memory).toEqual({ az: "a", since: 1000, okSince: null });
    expect(shiftDecision(none, m({ a: "DOWN", b: "OK" }), { ...s, zonalShift: false }, 0).decision.az).toBeNull();
    expect(shiftDecision(none, m({ a: "DEGRADED", b: "OK" }), s, 0).decision.az).toBeNull();
    // the standby AZ is never shifted
    expect(shiftDecision(none, m({ a: "OK", b: "OK", c: "DOWN" }), s, 0).decision.az).toBeNull();
  });

  it("one zone at a time: a second AZ going down does not move or add a shift", () => {
    const three = m({ a: "DOWN", b: "OK", d: "OK" });
    const r1 = shiftDecision(none, three, s, 0);
    const r2 = shiftDecision(r1.memory, m({ a: "DOWN", b: "OK", d: "DOWN" }), s, 1000);
    expect(r2.decision.az).toBe("a");
    expect(r2.memory.since).toBe(0);
  });

  it("never at L4: no shift when no active AZ is OK, and an existing one is cancelled", () => {
    expect(shiftDecision(none, m({ a: "DOWN", b: "DOWN" }), s, 0).decision).toEqual({ az: null, reason: "no active AZ OK: no shift" });
    expect(shiftDecision(none, m({ a: "DOWN", b: "DEGRADED" }), s, 0).decision.az).toBeNull();
    const on = shiftDecision(none, m({ a: "DOWN", b: "OK" }), s, 0).memory;
    expect(shiftDecision(on, m({ a: "DOWN", b: "DOWN" }), s, 1000).decision.az).toBeNull();
  });

  it("cancels only after the AZ has been OK for shiftRecoverMs; a relapse restarts the clock", () => {
    let mem = shiftDecision(none, m({ a: "DOWN", b: "OK" }), s, 0).memory;
    let r = shiftDecision(mem, m({ a: "OK", b: "OK" }), s, 10_000);
    expect(r.decision.az).toBe("a");
    mem = r.memory;
    r = shiftDecision(mem, m({ a: "DEGRADED", b: "OK" }), s, 13_000);
    expect(r.memory.okSince).toBeNull();
    mem = shiftDecision(r.memory, m({ a: "OK", b: "OK" }), s, 14_000).memory;
    expect(shiftDecision(mem, m({ a: "OK", b: "OK" }), s, 18_999).decision.az).toBe("a");
    r = shiftDecision(mem, m({ a: "OK", b: "OK" }), s, 19_000);
    expect(r.decision).toEqual({ az: null, reason: "a OK for 5 s: shift cancelled" });
  });

  it("evaluate carries the shift and its memory; recovery waits for the AZ state hysteresis first", () => {
    const st = { ...S, zonalShift: true, shiftRecoverMs: 0, recoverPeriods: 2 };
    let mem = emptyControllerMemory();
    const down = [out("a1", "a"), node("b1", "b")];
    let r = evaluate({ nodes: down }, mem, st, 0);
    expect(r.evaluation.shift.az).toBe("a");
    mem = r.memory;
    const up = [node("a1", "a"), node("b1", "b")];
    r = evaluate({ nodes: up }, mem, st, 1000); // a still DOWN (hysteresis: 1 of 2)
    expect(r.evaluation.shift.az).toBe("a");
    r = evaluate({ nodes: up }, r.memory, st, 2000); // a OK now, recover hold 0
    expect(r.evaluation.azs[0].state).toBe("OK");
    expect(r.evaluation.shift.az).toBeNull();
  });
});

describe("silence Redis explains (writes refused, a failover that lost heartbeats)", () => {
  const snap = (nodes: NodeView[]) => ({ nodes, azs: [...new Set(nodes.map((n) => n.az))] }) as unknown as Parameters<typeof evaluate>[0];
  const settled = (): ReturnType<typeof emptyControllerMemory> => {
    let mem = emptyControllerMemory();
    for (let i = 0; i < 3; i++) mem = evaluate(snap([node("a1", "a"), node("a2", "a"), node("b1", "b")]), mem, S, i).memory;
    return mem;
  };

  it("expired nodes do not make their AZ worse while Redis trouble explains their silence, and say so", () => {
    const expired = snap([node("a1", "a", { alive: false, status: "EXPIRED", takesTraffic: false }), node("a2", "a", { alive: false, status: "EXPIRED", takesTraffic: false }), node("b1", "b")]);
    const held = evaluate(expired, settled(), S, 10, { silenceExplained: "Redis trouble 2 s ago" }).evaluation;
    expect(held.azs.find((a) => a.az === "a")).toMatchObject({ state: "OK", held: true });
    expect(held.tier.level).toBe("L0");
    expect(held.tier.reason).toContain("held: a");
    expect(held.nodesOut).toEqual([]);
    expect(held.silenceExplained).toBe("Redis trouble 2 s ago");
    // The same snapshot without the explanation is a dead AZ, as before.
    const dead = evaluate(expired, settled(), S, 10).evaluation;
    expect(dead.azs.find((a) => a.az === "a")?.state).toBe("DOWN");
    expect(dead.tier.level).toBe("L3");
  });

  it("a node that reports a real fault still counts during the grace", () => {
    const hurt = snap([out("a1", "a"), out("a2", "a"), node("b1", "b")]);
    const e = evaluate(hurt, settled(), S, 10, { silenceExplained: "Redis trouble 1 s ago" }).evaluation;
    expect(e.azs.find((a) => a.az === "a")?.state).toBe("DOWN");
    expect(e.azs.find((a) => a.az === "a")?.held).toBeUndefined();
  });
});

describe("partial redundancy (seed 004 §5.1): a standby smaller than an active AZ", () => {
  // a and b active with 4 nodes × 8 GPUs each; c is the standby.
  const active = (n: number, az: string, down: number) => Array.from({ length: n }, (_, i) => (i < down ? out(`${az}${i}`, az) : node(`${az}${i}`, az)));

  it("says in the tier that the woken standby covers only part of the lost GPUs", () => {
    const s = resolveControllerSettings({ standbyAz: "c", standbyCapacityRatio: 0.5 });
    const well = evaluate({ nodes: [...active(4, "a", 0), ...active(4, "b", 0)] }, emptyControllerMemory(), s, 0);
    // a loses 3 of 4 nodes (24 GPUs); a standby at half of an active AZ (16 GPUs) cannot take it.
    const r = evaluate({ nodes: [...active(4, "a", 3), ...active(4, "b", 0)] }, well.memory, s, 1000);
    expect(r.evaluation.standby).toMatchObject({ az: "c", wake: true, shortfall: { lost: 24, covers: 16 } });
    expect(r.evaluation.tier.reason).toBe("AZ degraded: a; standby c at 50 % of an active AZ covers at most 16 of 24 lost GPUs");
  });

  it("says nothing when the loss fits in the standby, or when the standby is full size", () => {
    const half = resolveControllerSettings({ standbyAz: "c", standbyCapacityRatio: 0.5 });
    const well = evaluate({ nodes: [...active(4, "a", 0), ...active(4, "b", 0)] }, emptyControllerMemory(), half, 0);
    // 2 of 4 nodes (16 GPUs) lost: DEGRADED, and the half-size standby covers 16.
    const fits = evaluate({ nodes: [...active(4, "a", 2), ...active(4, "b", 0)] }, well.memory, half, 1000).evaluation;
    expect(fits.standby.wake).toBe(true);
    expect(fits.standby.shortfall).toBeUndefined();
    expect(fits.tier.reason).toBe("AZ degraded: a");
    const full = resolveControllerSettings({ standbyAz: "c" });
    const big = evaluate({ nodes: [...active(4, "a", 4), ...active(4, "b", 0)] }, evaluate({ nodes: [...active(4, "a", 0), ...active(4, "b", 0)] }, emptyControllerMemory(), full, 0).memory, full, 1000).evaluation;
    expect(big.standby.shortfall).toBeUndefined();
    expect(big.tier.reason).toBe("AZ down: a");
  });

  it("refuses a ratio outside (0, 1]", () => {
    expect(() => resolveControllerSettings({ standbyCapacityRatio: 0 })).toThrow(/standbyCapacityRatio \(0\) must be in \(0, 1\]/);
    expect(() => resolveControllerSettings({ standbyCapacityRatio: 1.5 })).toThrow(ControllerSettingsError);
    expect(DEFAULT_CONTROLLER_SETTINGS.standbyCapacityRatio).toBe(1);
  });
});

describe("standby back-off in the evaluation (the reconciler's word: the last wake ended with no healthy standby node)", () => {
  const s = resolveControllerSettings({ standbyAz: "c", coldStartGraceMs: 0 });
  const nodes = [out("a1", "a", { hard: ["GPU_LOST"] }), node("b1", "b")];
  const line = "backoff until 2026-12-05T03:05:00.000Z, because the last wake ended with no healthy standby node (unhealthy on c-p5: …)";
  it("wanted awake and held: the decision and the tier reason say so, and the standby hash publishes it", () => {
    const { evaluation } = evaluate({ nodes }, emptyControllerMemory(), s, 1000, { standbyBackoff: line });
    expect(evaluation.standby).toMatchObject({ wake: true, backoff: line });
    expect(evaluation.tier.reason).toBe(`AZ down: a; standby c ${line}`);
    expect(standbyFields(evaluation, 1000, 2000)).toMatchObject({ az: "c", wake: 1, capacity: "backoff", capacityReason: line, lastTriggerAt: 1000, updatedAt: 2000 });
  });
  it("not wanted awake: nothing is held, nothing shown", () => {
    const { evaluation } = evaluate({ nodes: [node("a1", "a"), node("b1", "b")] }, emptyControllerMemory(), s, 1000, { standbyBackoff: line });
    expect(evaluation.standby.backoff).toBeUndefined();
    expect(evaluation.tier.reason).toBe("all AZs OK");
    expect(standbyFields(evaluation, null, 1000)).toMatchObject({ wake: 0, capacity: "ok", capacityReason: "" });
  });
});
