/**
 * inference-rollout-handover over the real program's prod stack (under Pulumi's mocks): it
 * passes as built, and refuses the stack once an inference Deployment would take a model or
 * engine change fleet-wide: Pulumi updating its image (no ignoreChanges), no handover marker, or
 * no `llm-ha-rollout` ConfigMap for the leader to read.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { inferenceRolloutHandover } from "../../policies/rollout";
import { runPolicies } from "../../policies/runner";
import { captureStack, type CapturedResource } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const inference = (rs: CapturedResource[]) => rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "inference");

describe("inference-rollout-handover over the captured prod stack", () => {
  let rs: CapturedResource[];
  beforeAll(async () => {
    rs = await captureStack("prod");
  }, 60_000);

  it("is in the pack and passes as built, over an inference Deployment per AZ", async () => {
    expect(policies).toContain(inferenceRolloutHandover);
    expect(inference(rs).length).toBeGreaterThanOrEqual(2);
    expect(await runPolicies([inferenceRolloutHandover], rs)).toEqual([]);
  });

  it("refuses a Deployment whose inference image Pulumi would update in place (no ignoreChanges)", async () => {
    const broken = structuredClone(rs);
    const target = inference(broken)[1];
    target.opts.ignoreChanges = target.opts.ignoreChanges.filter((p) => !p.startsWith("spec.template.spec.containers"));
    const v = await runPolicies([inferenceRolloutHandover], broken);
    expect(v.map((x) => [x.policy, x.enforcementLevel, x.urn])).toEqual([["inference-rollout-handover", "mandatory", target.urn]]);
    expect(v[0].message).toContain("ignoreChanges on spec.template.spec.containers[0].image (the inference image)");
    expect(v[0].message).toContain("bypassing the rollout");
  });

  it("refuses every inference Deployment when the ConfigMap is gone, and one without the marker", async () => {
    const noCm = rs.filter((r) => !(r.type === "kubernetes:core/v1:ConfigMap" && (r.props as O).metadata.name === "llm-ha-rollout"));
    const v = await runPolicies([inferenceRolloutHandover], noCm);
    expect(v.map((x) => x.urn).sort()).toEqual(inference(noCm).map((r) => r.urn).sort());
    expect(v[0].message).toContain("the llm-ha-rollout ConfigMap in namespace llm-ha");

    const broken = structuredClone(rs);
    const target = inference(broken)[0];
    delete (target.props as O).metadata.annotations["llm-ha.io/rollout"];
    const w = await runPolicies([inferenceRolloutHandover], broken);
    expect(w.map((x) => x.urn)).toEqual([target.urn]);
    expect(w[0].message).toContain("the llm-ha.io/rollout: handover annotation");
  });

  it("refuses a ConfigMap that names another revision than the Deployments load", async () => {
    const broken = structuredClone(rs);
    const cm = broken.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && (r.props as O).metadata.name === "llm-ha-rollout")!;
    (cm.props as O).data["to.revision"] = "s3://elsewhere/other";
    const v = await runPolicies([inferenceRolloutHandover], broken);
    expect(v.length).toBe(inference(broken).length);
    expect(v[0].message).toContain('to.revision equal to its revision');
  });
});
