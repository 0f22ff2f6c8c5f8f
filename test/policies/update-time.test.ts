/**
 * The update-time checks (policies/update-time.ts) over prod's captured graph: clean on the
 * program as it is, and each fault they guard put back into the graph as a fixture: a GPU
 * group on the DEFAULT (surge) update strategy, one system node group across the AZs, a
 * group on a reservation or Capacity Block created at its full size.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Policy } from "@pulumi/policy";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { DESIRED_FROM_TAG } from "../../contracts/scarce-gpus";
import { gpuNodeGroupMinimalUpdate, gpuReservedStartAtZero, systemNodeGroupPerAz } from "../../policies/update-time";
import { policies } from "../../policies/all";
import { runPolicies } from "../../policies/runner";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

let graph: CapturedResource[];
beforeAll(async () => {
  graph = await captureStack("prod");
}, 120_000);

function regress(change: (rs: CapturedResource[]) => void): CapturedResource[] {
  const rs = structuredClone(graph);
  change(rs);
  return rs;
}
const named = (rs: CapturedResource[], name: string) => rs.find((r) => r.name === name) ?? expect.fail(`no resource ${name}`);
async function messages(p: Policy, rs: CapturedResource[]): Promise<string[]> {
  return (await runPolicies([p], rs)).map((v) => v.message);
}

describe("the program as it is", () => {
  it("passes the update-time checks, which the pack runs", async () => {
    for (const p of [gpuNodeGroupMinimalUpdate, gpuReservedStartAtZero, systemNodeGroupPerAz]) {
      expect(policies).toContain(p);
      expect(p.enforcementLevel).toBe("mandatory");
      expect(await messages(p, graph), p.name).toEqual([]);
    }
  });
});

describe("gpu-node-group-minimal-update", () => {
  it("refuses a GPU group that rolls with the DEFAULT (surge first) strategy, or none", async () => {
    const rs = regress((rs) => {
      (named(rs, "gpu-us-east-1a-h100").props as O).updateConfig = { updateStrategy: "DEFAULT", maxUnavailable: 1 };
      (named(rs, "gpu-us-east-1b-a100").props as O).updateConfig = { maxUnavailable: 1 };
    });
    const m = await messages(gpuNodeGroupMinimalUpdate, rs);
    expect(m).toHaveLength(2);
    expect(m[0]).toMatch(/^GPU node group gpu-us-east-1a-h100 updates with strategy DEFAULT: each roll first launches an extra GPU node/);
    expect(m[1]).toMatch(/^GPU node group gpu-us-east-1b-a100 updates with strategy DEFAULT/);
  });
});

describe("system-node-group-per-az", () => {
  it("refuses one system node group across the three AZs, and names the AZs left without one", async () => {
    const rs = regress((rs) => {
      const groups = ofType(rs, "aws:eks/nodeGroup:NodeGroup").filter((g) => g.name.startsWith("eks-system-"));
      expect(groups).toHaveLength(3);
      const [one, ...rest] = groups;
      (one.props as O).subnetIds = groups.flatMap((g) => (g.props as O).subnetIds);
      one.opts.propertyDependencies.subnetIds = groups.flatMap((g) => g.opts.propertyDependencies.subnetIds ?? []);
      one.name = "eks-system";
      for (const g of rest) rs.splice(rs.indexOf(g), 1);
    });
    const m = await messages(systemNodeGroupPerAz, rs);
    expect(m[0]).toMatch(/^System node group eks-system spans 3 AZs \(us-east-1a, us-east-1b, us-east-1c\): EKS may leave an AZ without a system node/);
    expect(m.slice(1)).toEqual(["us-east-1a", "us-east-1b", "us-east-1c"].map((az) => `AZ ${az} has L1 pods pinned to system nodes but no single-AZ system node group there with minSize ≥ 1: they stay Pending.`));
  });

  it("refuses an AZ whose system group may be empty", async () => {
    const rs = regress((rs) => ((named(rs, "eks-system-us-east-1b").props as O).scalingConfig.minSize = 0));
    expect(await messages(systemNodeGroupPerAz, rs)).toEqual(["AZ us-east-1b has L1 pods pinned to system nodes but no single-AZ system node group there with minSize ≥ 1: they stay Pending."]);
  });
});

describe("gpu-reserved-start-at-zero", () => {
  /** prod's graph with gpu-us-east-1a-h100 launching into a reservation, created at `desired`. */
  const reserved = (desired: number, from = "create") =>
    regress((rs) => {
      (named(rs, "gpu-us-east-1a-h100-lt").props as O).capacityReservationSpecification = { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } };
      const g = named(rs, "gpu-us-east-1a-h100").props as O;
      g.scalingConfig = { minSize: 0, desiredSize: desired, maxSize: 4 };
      g.tags[DESIRED_FROM_TAG] = from;
    });

  it("refuses a reserved group created at its full size", async () => {
    expect(await messages(gpuReservedStartAtZero, reserved(2))).toEqual([
      "GPU node group gpu-us-east-1a-h100 on reservation cr-0123456789abcdef0 is created with desiredSize 2, minSize 0: a reservation not yet active, or smaller than that, leaves it CREATE_FAILED. Create it at 0 and size it once the reservation is active.",
    ]);
  });

  it("refuses a Capacity Block group created with a minimum", async () => {
    const rs = regress((rs) => {
      const g = named(rs, "gpu-us-east-1b-h100").props as O;
      g.capacityType = "CAPACITY_BLOCK";
      g.scalingConfig = { minSize: 2, desiredSize: 2, maxSize: 4 };
    });
    expect((await messages(gpuReservedStartAtZero, rs))[0]).toMatch(/^GPU node group gpu-us-east-1b-h100 on a Capacity Block is created with desiredSize 2, minSize 2/);
  });

  it("lets a reserved group that already runs keep its running size", async () => {
    expect(await messages(gpuReservedStartAtZero, reserved(2, "running"))).toEqual([]);
    expect(await messages(gpuReservedStartAtZero, reserved(0))).toEqual([]);
  });
});
