/**
 * The rollout scenarios' pure figures (lab/drill/scenarios/rollout-watch.ts): AZs in flux at a
 * sample and the most at once, the AZs and nodes that served the new revision, how long one was
 * in rotation, the terminal sample and the first rollback of a rollout.
 */
import { describe, expect, it } from "vitest";
import type { RolloutState } from "../../agent/src/fleet/rollout/types";
import { azsInFlux, azsThatServed, exposureMs, firstRollback, maxAzsInFlux, nodesThatServed, terminalSample, type NodeRevision, type RolloutSample } from "../../lab/drill/scenarios/rollout-watch";

const n = (id: string, revision: string, switching = false, inRotation = true): NodeRevision => ({ id, az: `az-${id[4]}`, revision, switching, inRotation });
const sample = (t: number, nodes: NodeRevision[], o: Partial<RolloutSample> = {}): RolloutSample => ({ t, id: "r1", phase: "switching", current: "rev-1", state: null, nodes, ...o });
const state = (o: Partial<RolloutState>): RolloutState =>
  ({ id: "r1", from: { revision: "rev-1" }, to: { revision: "rev-2" }, steps: [], step: 0, phase: "switching", startedAt: 0, since: 0, switchedAt: null, bakeMs: 10_000, gates: [], reason: "", by: "operator", updatedAt: 0, ...o }) as RolloutState;

describe("AZs in flux", () => {
  it("is an AZ whose nodes serve two revisions, or with a switch under way", () => {
    expect(azsInFlux([n("gpu-a1", "rev-1"), n("gpu-a2", "rev-1"), n("gpu-b1", "rev-1")])).toEqual([]);
    expect(azsInFlux([n("gpu-a1", "rev-2"), n("gpu-a2", "rev-1"), n("gpu-b1", "rev-1")])).toEqual(["az-a"]);
    // A single-node AZ switching: its one node is in flux, though it names one revision.
    expect(azsInFlux([n("gpu-a1", "rev-2"), n("gpu-a2", "rev-2"), n("gpu-b1", "rev-2", true)])).toEqual(["az-b"]);
    expect(azsInFlux([n("gpu-a1", "rev-2"), n("gpu-a2", "rev-1"), n("gpu-b1", "rev-2"), n("gpu-b2", "rev-1")])).toEqual(["az-a", "az-b"]);
  });

  it("takes the most over the samples within the window", () => {
    const s = [
      sample(0, [n("gpu-a1", "rev-1"), n("gpu-b1", "rev-1")]),
      sample(250, [n("gpu-a1", "rev-2", true), n("gpu-b1", "rev-1")]),
      sample(500, [n("gpu-a1", "rev-2", true), n("gpu-b1", "rev-2", true)]),
    ];
    expect(maxAzsInFlux(s)).toBe(2);
    expect(maxAzsInFlux(s, 0, 250)).toBe(1);
    expect(maxAzsInFlux([])).toBe(0);
  });
});

describe("who served the new revision", () => {
  const s = [
    sample(0, [n("gpu-a1", "rev-2", true, false), n("gpu-b1", "rev-1")]),
    sample(250, [n("gpu-a1", "rev-2", false, false), n("gpu-b1", "rev-1")]),
    sample(500, [n("gpu-a1", "rev-2"), n("gpu-b1", "rev-1")]),
    sample(750, [n("gpu-a1", "rev-2"), n("gpu-b1", "rev-1")]),
    sample(1000, [n("gpu-a1", "rev-2", false, false), n("gpu-b1", "rev-1")]),
    // Rolling back: switching to rev-1 (still serving rev-2 until its server restarts) is not counted.
    sample(1250, [n("gpu-a1", "rev-1", true, false), n("gpu-b1", "rev-1")]),
  ];
  it("counts a node once its switch is done, and its AZ", () => {
    expect(azsThatServed(s, "rev-2")).toEqual(["az-a"]);
    expect(nodesThatServed(s, "rev-2")).toEqual(["gpu-a1"]);
    expect(azsThatServed(s, "rev-3")).toEqual([]);
    expect(azsThatServed(s, "rev-2", 1250)).toEqual([]);
  });
  it("times it in rotation from the first such sample to the last, plus one period", () => {
    expect(exposureMs(s, "rev-2", 250)).toBe(500);
    expect(exposureMs(s, "rev-3", 250)).toBe(0);
  });
});

describe("the rollout's end and its rollback", () => {
  it("finds the first terminal sample of the rollout and the first sample with a cause", () => {
    const s = [
      sample(0, [], { id: "old", phase: "promoted" }),
      sample(250, [], { state: state({}) }),
      sample(500, [], { phase: "rolling-back", state: state({ phase: "rolling-back", cause: "canary", reason: "canary: gpu-a1 differs", step: 0 }) }),
      sample(750, [], { phase: "rolled-back", state: state({ phase: "rolled-back", cause: "canary", reason: "x", step: 0 }) }),
    ];
    expect(terminalSample(s, "r1")?.t).toBe(750);
    expect(terminalSample(s, "nope")).toBeNull();
    expect(firstRollback(s, "r1")).toEqual({ t: 500, cause: "canary", reason: "canary: gpu-a1 differs", step: 0 });
    expect(firstRollback(s.slice(0, 2), "r1")).toBeNull();
  });
});
