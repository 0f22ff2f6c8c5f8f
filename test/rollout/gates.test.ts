/**
 * Each gate on its own: a bad new revision rolls the rollout back with that gate as the cause,
 * and the same rollout is not rolled back once that gate is taken out of the list (so each test
 * fails without its gate). Plus the evidence rules: stale perf waits, one canary node passes.
 */
import { describe, expect, it } from "vitest";
import { canaryGate, ERRORS_MIN_EXCESS, errorsGate, evaluateGates, LATENCY_MIN_PROBES, latencyGate } from "../../agent/src/fleet/rollout/gates";
import { GATES, type GateName, type NodePerf } from "../../agent/src/fleet/rollout/types";
import type { Expectation } from "../../agent/src/node/canary/learn";
import { drive, fleet, observe, start, SETTINGS, type SimFleet, type SimNode } from "./fixture";

const without = (g: GateName): GateName[] => GATES.filter((x) => x !== g);
const onNew = (f: (n: SimNode) => Partial<NodePerf>) => (n: SimNode): Partial<NodePerf> => (n.revision === "v2" ? f(n) : {});

function expectGate(gate: GateName, make: () => SimFleet, settings = SETTINGS): void {
  const f = make();
  const run = drive(f, { 0: start() }, { settings });
  expect(run.state?.phase).toBe("rolled-back");
  expect(run.state?.cause).toBe(gate);
  expect(run.state?.reason).toContain(`${gate}: `);
  expect(f.nodes.every((n) => n.revision === "v1")).toBe(true);
  // The same rollout without the gate is not rolled back.
  const g = make();
  const other = drive(g, { 0: start() }, { settings, gates: without(gate), periods: 120 });
  expect(other.state?.phase).not.toBe("rolled-back");
  expect(other.state?.phase).not.toBe("rolling-back");
}

describe("rollout gates", () => {
  it("latency: a revision 30 % slower fails at the default 20 % tolerance (and passes without the gate)", () => {
    expectGate("latency", () => fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ p50Ms: 130 })) }));
    const f = fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ p50Ms: 130 })) });
    const run = drive(f, { 0: start() });
    expect(run.state?.reason).toMatch(/latency: probe p50 median 130 ms on v2 vs 100 ms on v1 \(\+30 %\); limit 120 ms/);
    // 15 % slower is within the tolerance: promoted.
    const ok = drive(fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ p50Ms: 115 })) }), { 0: start() });
    expect(ok.state?.phase).toBe("promoted");
  });

  it("errors: the new revision's probe error share above the old one's by more than the tolerance", () => {
    expectGate("errors", () => fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ errors: 3, probes: 20 })) }));
  });

  it("continuation: a new node whose continuation check was refused", () => {
    expectGate("continuation", () => fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ continuation: "refused" })) }));
  });

  it("corruption: a new node whose engine reports corrupted requests", () => {
    expectGate("corruption", () => fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ corrupted: 2 })) }));
  });

  it("load-time: a new load over loadRatio × the old median", () => {
    expectGate("load-time", () => fleet({ a: 3, b: 3 }, { perf: onNew(() => ({ loadMs: 40_000 })) }));
  });

  it("load-time: only loads this rollout caused count (a node already on the new revision, back from a long wake, does not fail it)", () => {
    // c1 is out of traffic (not in any step) and serves v2 already, with a 100 s load behind it:
    // the rollback that a standby node woken onto the target revision caused in the full drill.
    const make = (c1Load: number) => {
      const f = fleet({ a: 3, b: 3, c: 1 }, { perf: (n) => (n.nodeId === "c1" ? { loadMs: c1Load } : n.revision === "v2" ? { loadMs: 11_000 } : {}) });
      Object.assign(f.nodes.find((n) => n.nodeId === "c1")!, { revision: "v2", wanted: "v2", broken: true });
      return f;
    };
    const run = drive(make(100_000), { 0: start() });
    expect(run.state?.phase).toBe("promoted");
    const seen = run.states.flatMap((s) => s.gates).filter((x) => x.gate === "load-time").map((x) => x.detail);
    expect(seen.some((d) => d.includes("slowest load of v2 11.0 s"))).toBe(true);
    // A switched node's slow load still fails it.
    const slow = drive(fleet({ a: 3, b: 3 }, { perf: onNew((n) => ({ loadMs: n.nodeId === "a2" ? 100_000 : 11_000 })) }), { 0: start() });
    expect(slow.state?.cause).toBe("load-time");
  });

  it("load-time: a new load within the noise floor passes whatever the ratio (3× of 1 s)", () => {
    const f = fleet({ a: 3, b: 3 }, { perf: (n) => ({ loadMs: n.revision === "v2" ? 4_000 : 1_000 }) });
    expect(drive(f, { 0: start() }).state?.phase).toBe("promoted");
    const g = fleet({ a: 3, b: 3 }, { perf: (n) => ({ loadMs: n.revision === "v2" ? 7_000 : 1_000 }) });
    expect(drive(g, { 0: start() }).state?.cause).toBe("load-time");
  });

  it("load-time: a switched node not serving the new revision loadTimeoutMs after its switch", () => {
    const settings = { ...SETTINGS, loadTimeoutMs: 5000 };
    expectGate("load-time", () => fleet({ a: 3, b: 3 }, { loadPeriods: Infinity }), settings);
    const f = fleet({ a: 3, b: 3 }, { loadPeriods: Infinity });
    const run = drive(f, { 0: start() }, { settings });
    expect(run.state?.reason).toMatch(/a1 not serving v2 and HEALTHY 6\.0 s after the switch \(limit 5\.0 s\)/);
  });

  it("load-time: a switched node that serves the new revision but never becomes HEALTHY (the step would wait forever)", () => {
    const settings = { ...SETTINGS, loadTimeoutMs: 5000 };
    expectGate("load-time", () => fleet({ a: 3, b: 3 }, { unhealthyOn: "v2" }), settings);
  });

  it("canary: a step node whose answers differ from the expectation for the new model key", () => {
    const canary = (f: SimFleet) => {
      const v2 = f.nodes.filter((n) => n.revision === "v2").map((n) => n.nodeId);
      const e: Expectation = { source: "operator", at: 0, answers: {}, nodes: v2.length, agreeing: 0, disagreeing: v2, capped: false };
      return { modelKey: v2.length ? "m@v2" : null, expectation: v2.length ? e : null, answered: v2 };
    };
    expectGate("canary", () => fleet({ a: 3, b: 3 }, { canary }));
  });

  it("capacity: the AZ in flux DOWN with another of its nodes out", () => {
    // AZ b: one node broken before the rollout reaches it; switching another takes it DOWN (1 GPU of 3 out, then 2: DEGRADED → DOWN at 0).
    const make = (): SimFleet => {
      const f = fleet({ a: 2, b: 2 }, { floorShare: 0.5, loadPeriods: 3 });
      f.nodes.find((n) => n.nodeId === "b2")!.broken = true;
      return f;
    };
    expectGate("capacity", make);
  });

  it("evidence: perf samples older than the limit are no evidence (wait); one canary node with no recorded answers passes", () => {
    const f = fleet({ a: 3 }, { perf: (_n, now) => ({ at: now - 60_000 }) });
    f.nodes[0].revision = "v2";
    const obs = observe(f, 100_000);
    const state = drive(fleet({ a: 3 }), { 0: start() }, { periods: 1 }).state!;
    const gates = evaluateGates({ state, obs, settings: SETTINGS, now: 100_000 });
    for (const g of ["errors", "latency", "continuation", "corruption"] as const) expect(gates.find((x) => x.gate === g)?.verdict).toBe("wait");
    const fresh = observe(fleet({ a: 3 }), 0);
    fresh.nodes[0].revision = "v2";
    fresh.canary = { modelKey: "m@v2", expectation: null, answered: ["a1"] };
    expect(canaryGate({ state, obs: fresh, settings: SETTINGS, now: 0 })).toMatchObject({ verdict: "pass", detail: expect.stringContaining("no recorded answers to compare with") });
    fresh.canary = { modelKey: "m@v2", expectation: null, answered: [] };
    expect(canaryGate({ state, obs: fresh, settings: SETTINGS, now: 0 }).verdict).toBe("wait");
    fresh.nodes[0].perf = { ...fresh.nodes[0].perf!, p50Ms: 100 };
    expect(latencyGate({ state, obs: fresh, settings: SETTINGS, now: 0 }).verdict).toBe("pass");
  });

  it("errors: one or two failed probes beyond the old share are noise (pass); ERRORS_MIN_EXCESS of them fail", () => {
    const state = drive(fleet({ a: 3 }), { 0: start() }, { periods: 1 }).state!;
    const obs = observe(fleet({ a: 3 }), 0);
    obs.nodes[0].revision = "v2";
    obs.nodes[0].perf = { ...obs.nodes[0].perf!, revision: "v2", probes: 40, errors: ERRORS_MIN_EXCESS - 1 };
    expect(errorsGate({ state, obs, settings: SETTINGS, now: 0 })).toMatchObject({ verdict: "pass", detail: expect.stringContaining("noise") });
    obs.nodes[0].perf = { ...obs.nodes[0].perf!, errors: ERRORS_MIN_EXCESS };
    expect(errorsGate({ state, obs, settings: SETTINGS, now: 0 }).verdict).toBe("fail");
  });

  it("latency: a new server's first few probes are no evidence (wait), however slow; from LATENCY_MIN_PROBES they count", () => {
    const state = drive(fleet({ a: 3 }), { 0: start() }, { periods: 1 }).state!;
    const obs = observe(fleet({ a: 3 }), 0);
    obs.nodes[0].revision = "v2";
    obs.nodes[0].perf = { ...obs.nodes[0].perf!, revision: "v2", p50Ms: 480, probes: LATENCY_MIN_PROBES - 1 };
    expect(latencyGate({ state, obs, settings: SETTINGS, now: 0 })).toMatchObject({ verdict: "wait", detail: expect.stringContaining(`fewer than ${LATENCY_MIN_PROBES} probes`) });
    obs.nodes[0].perf = { ...obs.nodes[0].perf!, probes: LATENCY_MIN_PROBES };
    expect(latencyGate({ state, obs, settings: SETTINGS, now: 0 }).verdict).toBe("fail");
  });
});
