/**
 * The rollout's plan and state machine, pure: the order (standby AZ, else a canary node, then
 * each AZ), batches within the floor, never two AZs in flux, pause/resume/promote/abort, the
 * rollback order, and a start refused while another rollout is active.
 */
import { describe, expect, it } from "vitest";
import { planSteps } from "../../agent/src/fleet/rollout/plan";
import { drive, fleet, op, start, SETTINGS } from "./fixture";

const nodes = (spec: Record<string, number>) => fleet(spec).nodes.map((n) => ({ nodeId: n.nodeId, az: n.az, alive: true, takesTraffic: true }));
const azsOf = (actions: { az: string; restore: boolean }[], restore: boolean): string[] => actions.filter((a) => a.restore === restore).map((a) => a.az).filter((az, i, xs) => xs[i - 1] !== az);

describe("planSteps", () => {
  it("node granularity: one canary node of the first AZ, then each AZ with its remaining nodes", () => {
    const steps = planSteps({ nodes: nodes({ b: 2, a: 3, c: 2 }), standbyAz: null, granularity: "node" });
    expect(steps.map((s) => `${s.index}:${s.kind}:${s.az}:${s.nodes.join(",")}`)).toEqual(["0:canary:a:a1", "1:az:a:a2,a3", "2:az:b:b1,b2", "3:az:c:c1,c2"]);
    expect(steps.every((s) => s.switched.length === 0)).toBe(true);
  });

  it("the standby AZ first where it has serving nodes (no canary step then); not where it is scaled to zero", () => {
    const withStandby = planSteps({ nodes: nodes({ a: 2, b: 2, s: 1 }), standbyAz: "s", granularity: "node" });
    expect(withStandby.map((s) => `${s.kind}:${s.az}`)).toEqual(["standby:s", "az:a", "az:b"]);
    const asleep = planSteps({ nodes: nodes({ a: 2, b: 2 }), standbyAz: "s", granularity: "node" });
    expect(asleep.map((s) => `${s.kind}:${s.az}`)).toEqual(["canary:a", "az:a", "az:b"]);
  });

  it("az granularity: whole AZs; nodes out of traffic take no part", () => {
    const ns = nodes({ a: 2, b: 2, c: 1 });
    ns[1].takesTraffic = false;
    const steps = planSteps({ nodes: ns, standbyAz: null, granularity: "az" });
    expect(steps.map((s) => `${s.kind}:${s.az}:${s.nodes.join(",")}`)).toEqual(["az:a:a1", "az:b:b1,b2", "az:c:c1"]);
  });
});

describe("stepRollout", () => {
  it("promoted: every AZ asked for the new revision as a whole, once, so a standby scaled to zero starts on it (not on the old one the fleet no longer allows)", () => {
    const f = fleet({ a: 3, b: 3, s: 2 }, { standbyAz: "s" });
    for (const n of f.nodes.filter((x) => x.az === "s")) n.broken = true;
    const run = drive(f, { 0: start() }, { periods: 300 });
    expect(run.state?.phase).toBe("promoted");
    expect(run.state?.steps.map((s) => s.az)).toEqual(["a", "a", "b"]);
    const finish = run.actions.filter((a) => a.finish);
    expect(finish.map((a) => `${a.az}:${a.to.revision}:${a.nodes.length}`)).toEqual(["a:v2:0", "b:v2:0", "s:v2:0"]);
    // Only at the end: after every step's switch.
    expect(run.actions.findIndex((a) => a.finish)).toBe(run.actions.length - 3);
    expect(f.nodes.filter((n) => n.az === "s").map((n) => n.revision)).toEqual(["v2", "v2"]);
    // Scaled to zero the standby has no node record and no AZ state: it is named by the setting.
    const z = fleet({ a: 3, b: 3 }, { standbyAz: "s" });
    expect(drive(z, { 0: start() }).actions.filter((a) => a.finish).map((a) => a.az)).toEqual(["a", "b", "s"]);
    // Not on a rollback or an abort: the standby keeps the revision the fleet keeps.
    const g = fleet({ a: 3, b: 3, s: 2 }, { standbyAz: "s", perf: (n) => (n.revision === "v2" ? { corrupted: 1 } : {}) });
    for (const n of g.nodes.filter((x) => x.az === "s")) n.broken = true;
    const back = drive(g, { 0: start() });
    expect(back.state?.phase).toBe("rolled-back");
    expect(back.actions.some((a) => a.finish)).toBe(false);
  });

  it("a good rollout across 3 AZs: batches within the floor, one AZ in flux at a time, each step baked, promoted", () => {
    const f = fleet({ a: 4, b: 4, c: 4 });
    const run = drive(f, { 0: start() });
    expect(run.state?.phase).toBe("promoted");
    expect(f.nodes.every((n) => n.revision === "v2")).toBe(true);
    // Floor 2 of 4 GPUs: batches of two after the canary node (a1).
    expect(run.actions.filter((a) => !a.finish).map((a) => a.nodes.join(","))).toEqual(["a1", "a2,a3", "a4", "b1,b2", "b3,b4", "c1,c2", "c3,c4"]);
    expect(azsOf(run.actions.filter((a) => !a.finish), false)).toEqual(["a", "b", "c"]);
    // Every step baked (3 s with no gate failing or waiting) before the next began.
    const bakes = run.states.filter((s, i) => s.phase === "switching" && run.states[i - 1]?.phase === "baking");
    expect(bakes).toHaveLength(3);
    for (const s of bakes) expect(s.reason).toContain("baked 3 s");
    expect(run.state?.reason).toContain("the fleet serves v2");
  });

  it("with the default floor (75 %) of a 3-node AZ, one node at a time", () => {
    const f = fleet({ a: 3, b: 3 }, { floorShare: 0.75 });
    const run = drive(f, { 0: start() });
    expect(run.state?.phase).toBe("promoted");
    expect(run.actions.filter((a) => !a.finish).every((a) => a.nodes.length === 1)).toBe(true);
  });

  it("az granularity: one switch per AZ", () => {
    const f = fleet({ a: 2, b: 2 }, { granularity: "az" });
    const run = drive(f, { 0: start() });
    expect(run.state?.phase).toBe("promoted");
    expect(run.actions.map((a) => `${a.az}:${a.nodes.join(",")}${a.finish ? " (finish)" : ""}`)).toEqual(["a:a1,a2", "b:b1,b2", "a: (finish)", "b: (finish)"]);
  });

  it("pause holds the bake and the switching; resume goes on; promote ends a bake now", () => {
    const f = fleet({ a: 2, b: 2 });
    const settings = { ...SETTINGS, bakeMs: 60_000 };
    let run = drive(f, { 0: start() }, { settings, until: (s) => s.phase === "baking" });
    const at = run.states.length;
    run = drive(f, { 0: op("pause") }, { settings, from: run, periods: 100 });
    expect(run.state?.phase).toBe("paused");
    expect(run.state?.pausedFrom).toBe("baking");
    expect(run.state?.step).toBe(0);
    expect(run.now - run.state!.switchedAt!).toBeGreaterThan(settings.bakeMs);
    const actions = run.actions.length;
    run = drive(f, { 0: op("resume") }, { settings, from: run, periods: 1 });
    // The bake time is over: resumed, it ends at once.
    expect(run.state?.phase).toBe("switching");
    expect(run.state?.step).toBe(1);
    expect(run.actions.length).toBe(actions + 1);
    run = drive(f, {}, { settings, from: run, until: (s) => s.phase === "baking" });
    expect(run.state?.step).toBe(1);
    run = drive(f, { 0: op("promote") }, { settings, from: run, periods: 1 });
    expect(run.state?.step).toBe(2);
    expect(run.state?.reason).toContain("promoted by the operator");
    expect(run.states.length).toBeGreaterThan(at);
    // Pausing while switching: no new batch is asked until resumed.
    run = drive(f, { 0: op("pause") }, { settings, from: run, periods: 5 });
    expect(run.state?.phase).toBe("paused");
    const asked = run.actions.length;
    run = drive(f, {}, { settings, from: run, periods: 5 });
    expect(run.actions.length).toBe(asked);
    run = drive(f, { 0: op("resume") }, { settings, from: run });
    expect(run.state?.phase).toBe("promoted");
    expect(f.nodes.every((n) => n.revision === "v2")).toBe(true);
  });

  it("abort: the current step restored first, then the earlier steps in reverse, one AZ at a time, ending aborted", () => {
    const f = fleet({ a: 2, b: 4, c: 2 });
    // Aborted while step 2 (AZ b) has its first batch (b1,b2) switching.
    let run = drive(f, { 0: start() }, { until: (s) => s.step === 2 && s.phase === "switching" && s.steps[2].switched.length > 0 });
    expect(run.state?.steps[2].switched).toEqual(["b1", "b2"]);
    run = drive(f, { 0: op("abort") }, { from: run });
    expect(run.state?.phase).toBe("aborted");
    expect(run.state?.cause).toBe("abort");
    expect(run.state?.reason).toContain("aborted by operator");
    expect(f.nodes.every((n) => n.revision === "v1")).toBe(true);
    const restores = run.actions.filter((a) => a.restore);
    expect(azsOf(restores, true)).toEqual(["b", "a"]);
    // Step 2 (b: only the nodes asked) first, then step 1 (a2), then step 0 (the canary a1); c was never switched.
    expect(restores.map((a) => `${a.step}:${a.nodes.join(",")}`)).toEqual(["2:b1,b2", "1:a2", "0:a1"]);
    expect(restores[restores.length - 1].nodes).toEqual(["a1"]);
  });

  it("a start while another rollout is active is refused and the active one goes on; one that ran is not started again", () => {
    const f = fleet({ a: 2, b: 2 });
    let run = drive(f, { 0: start(), 2: { op: "start", id: "r2", at: 5, to: { revision: "v3" } } }, { periods: 3 });
    expect(run.notices[0]).toMatch(/start r2 refused: rollout r1 is/);
    expect(run.state?.id).toBe("r1");
    run = drive(f, {}, { from: run });
    expect(run.state?.phase).toBe("promoted");
    run = drive(f, { 0: start() }, { from: run, periods: 1 });
    expect(run.notices[1]).toMatch(/start r1 ignored: that rollout already ran/);
    run = drive(f, { 0: { op: "start", id: "r3", at: 9, to: { revision: "v2" } } }, { from: run, periods: 1 });
    expect(run.notices[2]).toMatch(/already serves v2/);
  });

  it("no actuator: a start is refused with the reason", () => {
    const g = fleet({ a: 2 });
    (g as { granularity: unknown }).granularity = null;
    const r2 = drive(g, { 0: start() }, { periods: 1 });
    expect(r2.state).toBeNull();
    expect(r2.notices[0]).toMatch(/no rollout actuator is configured/);
  });

  it("at tier L2 or above (an AZ lost or failing over) a start is refused with the tier's reason; at L1 it starts", () => {
    const l2 = drive(fleet({ a: 2, b: 2 }, { tier: { level: "L2", reason: "az-c DOWN" } }), { 0: start() }, { periods: 1 });
    expect(l2.state).toBeNull();
    expect(l2.notices[0]).toMatch(/start r1 refused: the tier is L2 \(az-c DOWN\): .*start it at L0 or L1/);
    const l1 = drive(fleet({ a: 2, b: 2 }, { tier: { level: "L1", reason: "a node out" } }), { 0: start() });
    expect(l1.state?.phase).toBe("promoted");
  });
});
