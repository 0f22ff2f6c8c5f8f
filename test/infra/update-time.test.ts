/**
 * The second `pulumi up`: the prod program run twice under Pulumi's mocks, first on an empty
 * account, then against the node groups the first run left running, with a config change
 * that makes Pulumi send each GPU group's whole scalingConfig (maxPerAz raised, desiredPerAz
 * lowered). What the provider is sent for desiredSize is the new input, or, for a property in
 * `ignoreChanges`, the first run's input (Pulumi keeps the old input of an ignored property):
 * it must never be below what the group runs.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { captureStackGraph, ofType, stackConfig, type CapturedResource, type InvokeAnswers } from "../../infra/capture";
import { DESIRED_FROM_TAG } from "../../contracts/scarce-gpus";
import { policies } from "../../policies/all";
import { runPolicies } from "../../policies/runner";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const GROUPS = "aws:eks/getNodeGroups:getNodeGroups";
const GROUP = "aws:eks/getNodeGroup:getNodeGroup";
const gpuGroups = (rs: CapturedResource[]) => ofType(rs, "aws:eks/nodeGroup:NodeGroup").filter((g) => (g.props as O).amiType === "AL2023_x86_64_NVIDIA");
const scaling = (g: CapturedResource) => (g.props as O).scalingConfig as { minSize: number; desiredSize: number; maxSize: number };

/** An account where each of `first`'s GPU groups runs at `running(group)`, under the physical name Pulumi gave it (logical name and a 7-hex suffix). */
function runningAccount(first: CapturedResource[], running: (g: CapturedResource) => number): InvokeAnswers {
  const physical = new Map<string, CapturedResource>(gpuGroups(first).map((g, i) => [`${g.name}-${(0x1a2b3c0 + i).toString(16)}`, g]));
  return {
    [GROUPS]: () => ({ id: "eks", clusterName: "x", names: [...physical.keys(), "someone-elses-group"] }),
    [GROUP]: (args) => {
      const g = physical.get(String(args.nodeGroupName));
      if (!g) throw new Error(`no node group ${String(args.nodeGroupName)}`);
      return { ...args, scalingConfigs: [{ ...scaling(g), desiredSize: running(g) }] };
    },
  };
}

/** prod's gpuClasses with maxPerAz raised by 2 and desiredPerAz lowered by 1: every GPU group's scalingConfig changes. */
function changedClasses(): string {
  const classes = JSON.parse(stackConfig("prod")["llm-ha:gpuClasses"]) as O[];
  return JSON.stringify(classes.map((c) => ({ ...c, maxPerAz: c.maxPerAz + 2, desiredPerAz: Math.max(0, c.desiredPerAz - 1) })));
}

/** What the provider is sent for `g`'s desiredSize on the second run. */
function sent(g: CapturedResource, first: CapturedResource[]): number {
  if (g.opts.ignoreChanges.includes("scalingConfig.desiredSize") || g.opts.ignoreChanges.includes("scalingConfig")) {
    return scaling(first.find((f) => f.name === g.name)!).desiredSize;
  }
  return scaling(g).desiredSize;
}

let first: CapturedResource[];
beforeAll(async () => {
  first = (await captureStackGraph("prod")).resources;
}, 120_000);

describe("a second pulumi up after a config change never lowers a running GPU group", () => {
  const scenarios: [string, (g: CapturedResource) => number][] = [
    ["each group at the size the first run gave it", (g) => scaling(g).desiredSize],
    ["each group scaled up to its maximum since (the leader's wake, the scale-up after creation)", (g) => scaling(g).maxSize],
    ["each group at 1 (a partial scale-up)", () => 1],
  ];
  for (const [what, running] of scenarios) {
    it(what, async () => {
      const { resources: second, invokes } = await captureStackGraph("prod", { "llm-ha:gpuClasses": changedClasses() }, undefined, undefined, runningAccount(first, running));
      const groups = gpuGroups(second);
      expect(groups.length).toBe(gpuGroups(first).length);
      // The config change does reach each group's scalingConfig: maxSize is sent anew.
      for (const g of groups) expect(scaling(g).maxSize, g.name).toBe(scaling(first.find((f) => f.name === g.name)!).maxSize + 2);
      for (const g of groups) {
        const was = running(first.find((f) => f.name === g.name)!);
        expect(sent(g, first), `${g.name} runs ${was}`).toBeGreaterThanOrEqual(was);
        expect((g.props as O).tags[DESIRED_FROM_TAG], g.name).toBe("running");
      }
      // Only this stack's groups were read; another group in the cluster is left alone.
      expect(invokes.filter((i) => i.token === GROUP).map((i) => i.args.nodeGroupName)).not.toContain("someone-elses-group");
      // The create-time policies let running groups keep their size: the second up is not refused.
      expect(await runPolicies(policies, second)).toEqual([]);
    }, 120_000);
  }

  it("a group not yet in the account is sent its create-time size", async () => {
    const { resources: second } = await captureStackGraph("prod", { "llm-ha:gpuClasses": changedClasses() }, undefined, undefined, { [GROUPS]: () => ({ id: "eks", names: [] }) });
    for (const g of gpuGroups(second)) {
      expect(scaling(g).desiredSize, g.name).toBe(0);
      expect((g.props as O).tags[DESIRED_FROM_TAG], g.name).toBe("create");
    }
  }, 120_000);
});
