import { beforeAll, describe, expect, it } from "vitest";
import { inferenceOneModel } from "../../policies/model";
import { runPolicies } from "../../policies/runner";
import { captureStack, type CapturedResource } from "../../infra/capture";

/**
 * inference-one-model over the real program's prod stack (under Pulumi's mocks; one stack per
 * file, as Pulumi's runtime state is process-global): it passes, and it is not vacuous.
 */
describe("inference-one-model over the captured prod stack", () => {
  let rs: CapturedResource[];
  beforeAll(async () => {
    rs = await captureStack("prod");
  }, 60_000);

  const inference = (r: CapturedResource[]) =>
    r.filter((x) => x.type === "kubernetes:apps/v1:Deployment" && JSON.stringify(x.props).includes('"nvidia.com/gpu"'));

  it("passes, over an inference Deployment in every AZ", async () => {
    const deps = inference(rs);
    const azs = new Set(deps.map((d) => (d.props as { spec: { template: { metadata: { labels: Record<string, string> } } } }).spec.template.metadata.labels["llm-ha.io/az"]));
    expect(azs.size).toBeGreaterThanOrEqual(2);
    expect(await runPolicies([inferenceOneModel], rs)).toEqual([]);
  });

  it("refuses it once one Deployment's --model is changed", async () => {
    const broken = structuredClone(rs);
    const target = inference(broken)[1];
    const c = (target.props as { spec: { template: { spec: { containers: { args: string[] }[] } } } }).spec.template.spec.containers[0];
    const i = c.args.indexOf("--model");
    const was = c.args[i + 1];
    c.args[i + 1] = "facebook/opt-125m";
    const v = await runPolicies([inferenceOneModel], broken);
    expect(v.map((x) => [x.policy, x.enforcementLevel, x.urn])).toEqual([["inference-one-model", "mandatory", target.urn]]);
    expect(v[0].message).toContain(`vllm --model "facebook/opt-125m" (not ${JSON.stringify(was)})`);
  });
});
