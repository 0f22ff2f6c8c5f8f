import { describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";
import { standbyCapacityFallback } from "../../policies/standby-capacity";
import { captureStack } from "../../infra/capture";
import { changed, find, happyStack, messages, settled } from "./fixtures";

const NO_FALLBACK =
  "Standby GPU node group gpu-us-east-1c-h100 (h100 in us-east-1c) launches only p5.48xlarge with no capacity fallback: " +
  'add a second instance type or a fallback group (llm-ha:standbyFallback), a capacity reservation in that AZ or a capacity block, or waive it with llm-ha:standbyCapacityWaiver "<reason>".';

const withoutFallback = () => happyStack().filter((r) => !r.name.startsWith("gpu-us-east-1c-h100-fallback"));

describe("standby-capacity-fallback over hand-made resources", () => {
  it("passes a standby group with a fallback group of the class's next type in its AZ", async () => {
    expect(await messages(standbyCapacityFallback, happyStack())).toEqual([]);
  });

  it("fails a standby group with one instance type and nothing else", async () => {
    expect(await messages(standbyCapacityFallback, withoutFallback())).toEqual([NO_FALLBACK]);
  });

  it("does not take a fallback group in another AZ, of another class, or of the same type", async () => {
    const elsewhere = happyStack();
    const f = find(elsewhere, "gpu-us-east-1c-h100-fallback");
    f.props.subnetIds = ["private-us-east-1a-id"];
    (f.props.labels as Record<string, string>)["llm-ha.io/az"] = "us-east-1a";
    expect(await messages(standbyCapacityFallback, elsewhere)).toEqual([NO_FALLBACK]);
    const otherClass = changed("gpu-us-east-1c-h100-fallback", (p) => ((p.labels as Record<string, string>)["llm-ha.io/gpu-class"] = "a100"));
    expect(await messages(standbyCapacityFallback, otherClass)).toEqual([NO_FALLBACK]);
    const sameType = changed("gpu-us-east-1c-h100-fallback", (p) => (p.instanceTypes = ["p5.48xlarge"]));
    expect(await messages(standbyCapacityFallback, sameType)).toEqual([NO_FALLBACK]);
    const unlabelled = changed("gpu-us-east-1c-h100-fallback", (p) => delete (p.labels as Record<string, string>)["llm-ha.io/standby-fallback"]);
    // Without its label it is a second standby group, and itself has no fallback.
    expect(await messages(standbyCapacityFallback, unlabelled)).toHaveLength(2);
  });

  it("passes a second instance type, a capacity reservation in the AZ, a capacity block, or a waiver", async () => {
    const second = withoutFallback();
    find(second, "gpu-us-east-1c-h100").props.instanceTypes = ["p5.48xlarge", "p5e.48xlarge"];
    expect(await messages(standbyCapacityFallback, second)).toEqual([]);
    const reserved = withoutFallback();
    find(reserved, "gpu-us-east-1c-lt").props.capacityReservationSpecification = { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } };
    expect(await messages(standbyCapacityFallback, reserved)).toEqual([]);
    const block = withoutFallback();
    find(block, "gpu-us-east-1c-h100").props.capacityType = "CAPACITY_BLOCK";
    expect(await messages(standbyCapacityFallback, block)).toEqual([]);
    const waived = withoutFallback();
    (find(waived, "gpu-us-east-1c-h100").props.tags as Record<string, string>)["llm-ha.io/capacity-waiver"] = "dev: a failed wake costs nothing";
    expect(await messages(standbyCapacityFallback, waived)).toEqual([]);
    const blank = withoutFallback();
    (find(blank, "gpu-us-east-1c-h100").props.tags as Record<string, string>)["llm-ha.io/capacity-waiver"] = " ";
    expect(await messages(standbyCapacityFallback, blank)).toEqual([NO_FALLBACK]);
  });

  it("leaves active groups alone", async () => {
    const rs = withoutFallback().map((r) => (r.name === "gpu-us-east-1c-h100" ? { ...r, props: { ...r.props, labels: { ...(r.props.labels as object), "llm-ha.io/az-role": "active" } } } : r));
    expect(await messages(standbyCapacityFallback, rs)).toEqual([]);
  });
});

describe("standby-capacity-fallback over captured stacks", () => {
  it("dev as shipped: a p4de fallback group for the p4d standby, no violation of the pack", async () => {
    const rs = await captureStack("dev");
    const fb = rs.find((r) => r.name === "gpu-us-east-1b-a100-fallback");
    expect(fb?.props).toMatchObject({ instanceTypes: ["p4de.24xlarge"], scalingConfig: { minSize: 0, desiredSize: 0 } });
    expect((await runPolicies(policies, rs)).filter(settled)).toEqual([]);
  });

  it("dev with the fallback turned off fails, naming the group; the waiver in the stack config passes it", async () => {
    const off = await captureStack("dev", { "llm-ha:standbyFallback": JSON.stringify({ a100: [] }) });
    expect(off.some((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && r.name.endsWith("-fallback"))).toBe(false);
    const found = mandatory(await runPolicies(policies, off));
    expect(found.map((v) => [v.policy, v.urn?.split("::").pop()])).toEqual([["standby-capacity-fallback", "gpu-us-east-1b-a100"]]);
    expect(found[0].message).toContain("launches only p4d.24xlarge with no capacity fallback");
    const waived = await captureStack("dev", { "llm-ha:standbyFallback": JSON.stringify({ a100: [] }), "llm-ha:standbyCapacityWaiver": "dev only: a failed wake is a test" });
    expect(waived.find((r) => r.name === "gpu-us-east-1b-a100")?.props.tags).toMatchObject({ "llm-ha.io/capacity-waiver": "dev only: a failed wake is a test" });
    expect((await runPolicies(policies, waived)).filter(settled)).toEqual([]);
  });

  it("prod: the a100 standby's second type (p4de) and the h100 standby's p5e fallback group pass", async () => {
    const rs = await captureStack("prod");
    expect(rs.some((r) => r.name === "gpu-us-east-1c-a100-fallback")).toBe(false);
    expect(rs.find((r) => r.name === "gpu-us-east-1c-h100-fallback")?.props).toMatchObject({ instanceTypes: ["p5e.48xlarge"] });
    expect(await messages(standbyCapacityFallback, rs)).toEqual([]);
  });
});
