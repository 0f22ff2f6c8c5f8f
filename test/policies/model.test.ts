import { describe, expect, it } from "vitest";
import { inferenceOneModel } from "../../policies/model";
import type { CapturedResource } from "../../policies/runner";
import { at, find, happyStack, messages } from "./fixtures";

/**
 * inference-one-model over hand-made stacks: the fixture's inference Deployment copied to the
 * three AZs with a vLLM command line, then one AZ changed at a time.
 */
const AZS = ["us-east-1a", "us-east-1b", "us-east-1c"];
const ARGS = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--revision", "1605565b47bb9346c5515c34102e054115b4f98b", "--dtype", "bfloat16", "--tensor-parallel-size", "8"];

type Change = (container: Record<string, unknown>, props: Record<string, unknown>) => void;

/** The valid stack with one inference Deployment per AZ; `change` applies to the one in `az`. */
function stack(az?: string, change?: Change): CapturedResource[] {
  const rs = happyStack();
  const a = find(rs, "inference-us-east-1a");
  const container = (at(a.props, "spec.template.spec").containers as Record<string, unknown>[])[0];
  container.args = [...ARGS];
  container.env = [{ name: "HF_HOME", value: "/root/.cache/huggingface" }];
  for (const other of AZS.slice(1)) {
    const copy = structuredClone(a);
    copy.name = `inference-${other}`;
    copy.urn = a.urn.replace("us-east-1a", other);
    at(copy.props, "metadata").name = copy.name;
    at(copy.props, "spec.template.metadata.labels")["llm-ha.io/az"] = other;
    rs.push(copy);
  }
  if (az && change) {
    const d = find(rs, `inference-${az}`);
    change((at(d.props, "spec.template.spec").containers as Record<string, unknown>[])[0], d.props);
  }
  return rs;
}

const setArg = (flag: string, value: string | null): Change => (c) => {
  const args = c.args as string[];
  const i = args.indexOf(flag);
  if (value === null) args.splice(i, 2);
  else if (i >= 0) args[i + 1] = value;
  else args.push(flag, value);
};

const tail = " Every AZ's inference must run one image and one model argument set.";

describe("inference-one-model", () => {
  it("passes when every AZ runs one image and one model argument set", async () => {
    expect(await messages(inferenceOneModel, stack())).toEqual([]);
  });

  it("passes one Deployment alone, and ignores arguments that follow the hardware (tensor parallel size per GPU class)", async () => {
    expect(await messages(inferenceOneModel, happyStack())).toEqual([]);
    expect(await messages(inferenceOneModel, stack("us-east-1b", setArg("--tensor-parallel-size", "4")))).toEqual([]);
  });

  it("refuses an AZ on another image, naming it, its AZ and the Deployments it differs from", async () => {
    const rs = stack("us-east-1b", (c) => (c.image = "vllm/vllm-openai:v0.6.4"));
    expect(await messages(inferenceOneModel, rs)).toEqual([
      `Deployment inference-us-east-1b (AZ us-east-1b) serves another model set than inference-us-east-1a and inference-us-east-1c: vllm image "vllm/vllm-openai:v0.6.4" (not "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/docker-hub/vllm/vllm-openai@sha256:${"c1".repeat(32)}").${tail}`,
    ]);
  });

  it("refuses another revision (also written --flag=value), another dtype, and a model flag set in one AZ only", async () => {
    const rev = stack("us-east-1c", (c) => {
      const args = c.args as string[];
      args.splice(args.indexOf("--revision"), 2, "--revision=0e9e39f249a16976918f6564b8830bc894c89659");
    });
    expect(await messages(inferenceOneModel, rev)).toEqual([
      `Deployment inference-us-east-1c (AZ us-east-1c) serves another model set than inference-us-east-1a and inference-us-east-1b: vllm --revision "0e9e39f249a16976918f6564b8830bc894c89659" (not "1605565b47bb9346c5515c34102e054115b4f98b").${tail}`,
    ]);
    expect(await messages(inferenceOneModel, stack("us-east-1a", setArg("--dtype", "float16")))).toEqual([
      `Deployment inference-us-east-1a (AZ us-east-1a) serves another model set than inference-us-east-1b and inference-us-east-1c: vllm --dtype "float16" (not "bfloat16").${tail}`,
    ]);
    expect(await messages(inferenceOneModel, stack("us-east-1b", setArg("--quantization", "fp8")))).toEqual([
      `Deployment inference-us-east-1b (AZ us-east-1b) serves another model set than inference-us-east-1a and inference-us-east-1c: vllm --quantization "fp8" (not unset).${tail}`,
    ]);
    expect(await messages(inferenceOneModel, stack("us-east-1b", setArg("--revision", null)))).toEqual([
      `Deployment inference-us-east-1b (AZ us-east-1b) serves another model set than inference-us-east-1a and inference-us-east-1c: vllm --revision unset (not "1605565b47bb9346c5515c34102e054115b4f98b").${tail}`,
    ]);
  });

  it("reads `vllm serve <model>` and TGI's environment", async () => {
    const serve = stack("us-east-1b", (c) => {
      c.command = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"];
      setArg("--model", null)(c, {});
    });
    const found = await messages(inferenceOneModel, serve);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain('vllm --model unset (not "meta-llama/Llama-3.1-70B-Instruct"); vllm serve "meta-llama/Llama-3.1-8B-Instruct" (not unset)');
    const tgi = stack("us-east-1c", (c) => (c.env as unknown[]).push({ name: "MODEL_ID", value: "meta-llama/Llama-3.1-8B-Instruct" }));
    expect(await messages(inferenceOneModel, tgi)).toEqual([
      `Deployment inference-us-east-1c (AZ us-east-1c) serves another model set than inference-us-east-1a and inference-us-east-1b: vllm env MODEL_ID "meta-llama/Llama-3.1-8B-Instruct" (not unset).${tail}`,
    ]);
    // Variables that do not name the model (HF_HOME, a token) are not compared.
    const home = stack("us-east-1c", (c) => ((c.env as Record<string, unknown>[])[0].value = "/cache"));
    expect(await messages(inferenceOneModel, home)).toEqual([]);
  });

  it("with two AZs that differ, the first in the stack is the reference; Deployments without GPUs are not compared", async () => {
    const two = stack("us-east-1c", (c) => (c.image = "vllm/vllm-openai:v0.6.4"));
    const b = find(two, "inference-us-east-1b");
    (at(b.props, "spec.template.spec").containers as Record<string, unknown>[])[0].resources = { limits: { cpu: "1" } };
    expect(await messages(inferenceOneModel, two)).toEqual([
      `Deployment inference-us-east-1c (AZ us-east-1c) serves another model set than inference-us-east-1a: vllm image "vllm/vllm-openai:v0.6.4" (not "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/docker-hub/vllm/vllm-openai@sha256:${"c1".repeat(32)}").${tail}`,
    ]);
  });

  it("compares the flags its config names", async () => {
    const rs = stack("us-east-1b", setArg("--tensor-parallel-size", "4"));
    const cfg = { "inference-one-model": { modelArgs: ["--model", "--tensor-parallel-size"] } };
    expect(await messages(inferenceOneModel, rs, cfg)).toEqual([
      `Deployment inference-us-east-1b (AZ us-east-1b) serves another model set than inference-us-east-1a and inference-us-east-1c: vllm --tensor-parallel-size "4" (not "8").${tail}`,
    ]);
  });
});
