/**
 * The repair scenarios' pure pieces: what a reboot heals in the fake nvidia-smi's state, how the
 * drill sizes its world for the planned scenarios (spare slots, nodes in the first AZ, the first
 * scenario's agent settings), and how a run reads the local cloud's log of repair steps (their
 * order, the most nodes of an AZ in repair at once).
 */
import { DRILL_KARPENTER_ENV } from "../../lab/drill/settings";
import { describe, expect, it } from "vitest";
import { worldNeeds } from "../../lab/drill/command";
import type { LocalCloud } from "../../lab/drill/local-cloud";
import type { InstanceAction } from "../../lab/drill/local-instances";
import { REPAIR_SCENARIOS } from "../../lab/drill/repair-specs";
import { ROLLOUT_SCENARIOS } from "../../lab/drill/rollout-specs";
import { SCENARIOS } from "../../lab/drill/scenarios";
import { effectiveSteps, maxInRepair, outOfOrder, stepsText } from "../../lab/drill/scenarios/repair-watch";
import { renderTable, summarize } from "../../lab/drill/report";
import { blank } from "../../lab/drill/scenarios/runner";
import { DRILL_REPAIR_ENV, DRILL_ROLLOUT_ENV } from "../../lab/drill/settings";
import { afterReboot, NVSMI_FAULTS } from "../../lab/sim/nvsmi-state";

const act = (t: number, node: string, step: InstanceAction["step"], outcome: InstanceAction["outcome"] = "applied"): InstanceAction => ({ t, node, step, outcome, target: node, detail: "", token: 1 });
const cloudWith = (actions: InstanceAction[]): LocalCloud => ({ instances: { actions } }) as unknown as LocalCloud;

describe("a reboot in the fake nvidia-smi's state", () => {
  it("brings back a GPU off the bus or lost and applies a pending row remap; keeps a row-remap failure", () => {
    expect(afterReboot({ ...NVSMI_FAULTS.gpuMissing })).toEqual({});
    expect(afterReboot({ ...NVSMI_FAULTS.gpuLost })).toEqual({});
    expect(afterReboot({ ...NVSMI_FAULTS.rowRemapPending })).toEqual({});
    expect(afterReboot({ ...NVSMI_FAULTS.recoveryAction })).toEqual({});
    expect(afterReboot({ ...NVSMI_FAULTS.rowRemapFailure })).toEqual(NVSMI_FAULTS.rowRemapFailure);
    expect(afterReboot({ ...NVSMI_FAULTS.gpuMissing, overrides: { 3: { "remapped_rows.failure": "Yes", "remapped_rows.pending": "Yes" } } })).toEqual({ overrides: { 3: { "remapped_rows.failure": "Yes" } } });
    // Not what a reboot heals: the driver not loaded stays.
    expect(afterReboot({ ...NVSMI_FAULTS.driverNotLoaded })).toEqual(NVSMI_FAULTS.driverNotLoaded);
  });
});

describe("the drill's world for the repair scenarios", () => {
  it("spare slots, 6 nodes in the first AZ for the storm, the first scenario's agent settings from the start", () => {
    expect(worldNeeds(REPAIR_SCENARIOS, 6)).toEqual({ spares: 1, firstAzExtra: 4, agentEnv: DRILL_REPAIR_ENV });
    expect(worldNeeds(REPAIR_SCENARIOS.filter((s) => s.name === "repair-reboot"), 6)).toEqual({ spares: 0, firstAzExtra: 0, agentEnv: DRILL_REPAIR_ENV });
    // Other scenarios: nothing more than --nodes, the drill's own agent settings.
    expect(worldNeeds(SCENARIOS.filter((s) => s.name === "crash" || s.name === "xid"), 6)).toEqual({ spares: 0, firstAzExtra: 0 });
    expect(worldNeeds(REPAIR_SCENARIOS, 18).firstAzExtra).toBe(0);
    expect(REPAIR_SCENARIOS.every((s) => s.agentEnv?.LLMHA_REPAIR_MODE === "act" && s.needsFleet)).toBe(true);
    // Only the repair scenarios act, only the rollout scenarios bake 10 s, and only standby-wake-karpenter runs the
    // standby on the Karpenter engine: every other row runs with the drill's own settings.
    expect(SCENARIOS.filter((s) => s.agentEnv).map((s) => s.name)).toEqual([...REPAIR_SCENARIOS, ...ROLLOUT_SCENARIOS].map((s) => s.name).concat("standby-wake-karpenter"));
    expect(SCENARIOS.find((s) => s.name === "standby-wake-karpenter")?.agentEnv).toBe(DRILL_KARPENTER_ENV);
    expect(ROLLOUT_SCENARIOS.every((s) => s.agentEnv === DRILL_ROLLOUT_ENV && s.needsFleet)).toBe(true);
  });
});

describe("the repair steps a run reads from the local cloud", () => {
  const reboot = [act(1, "a1", "cordon"), act(2, "a1", "drain", "pending"), act(3, "a1", "drain", "pending"), act(4, "a1", "drain"), act(5, "a1", "reboot"), act(9, "a1", "uncordon")];
  it("folds pending drains, and checks the order", () => {
    expect(stepsText(reboot)).toBe("cordon, drain (pending ×2), reboot, uncordon");
    expect(effectiveSteps(reboot)).toEqual(["cordon", "drain", "reboot", "uncordon"]);
    expect(outOfOrder(reboot, ["cordon", "drain", "reboot", "uncordon"])).toBe(0);
    expect(outOfOrder([act(1, "a1", "cordon"), act(2, "a1", "reboot"), act(3, "a1", "drain")], ["cordon", "drain", "reboot", "uncordon"])).toBe(1);
    expect(stepsText([act(1, "a1", "cordon"), act(2, "a1", "surge", "error")])).toBe("cordon, surge ERROR");
  });
  it("counts the most nodes in repair at once, from cordon to uncordon or termination", () => {
    const serial = [...reboot, act(10, "a2", "cordon"), act(12, "a2", "uncordon"), act(13, "a3", "cordon"), act(20, "a3", "terminate")];
    expect(maxInRepair(cloudWith(serial), ["a1", "a2", "a3"], 0, 30)).toBe(1);
    const overlap = [...serial, act(6, "a4", "cordon"), act(11, "a4", "uncordon")];
    expect(maxInRepair(cloudWith(overlap), ["a1", "a2", "a3", "a4"], 0, 30)).toBe(2);
    // A node still cordoned at the end counts until then.
    expect(maxInRepair(cloudWith([act(1, "a1", "cordon"), act(2, "a2", "cordon")]), ["a1", "a2"], 0, 30)).toBe(2);
  });
  it("a missed scenario figure is named in the report's target and misses", () => {
    const spec = REPAIR_SCENARIOS.find((s) => s.name === "repair-storm")!;
    const r = { ...blank(spec.name, 1), extra: { maxInRepairPerAz: 2, floorBreaches: 0, notRepaired: 0 } };
    const sum = summarize(spec, [r]);
    expect(sum.pass).toBe(false);
    expect(sum.misses).toContain("maxInRepairPerAz: 2 > 1");
    expect(renderTable([sum])).toMatch(/maxInRepairPerAz≤1, floorBreaches=0, notRepaired=0/);
  });
});
