import { describe, expect, it } from "vitest";
import { gpuImagesFromEcr } from "../../policies/wake";
import { at, changed, happyStack, messages } from "./fixtures";

type C = Record<string, unknown>;
const containers = (p: Record<string, unknown>) => at(p, "spec.template.spec").containers as C[];

describe("gpu-images-from-ecr", () => {
  it("passes GPU pods whose vLLM image comes from the stack's ECR (pull-through cache) by digest", async () => {
    expect(await messages(gpuImagesFromEcr, happyStack())).toEqual([]);
  });

  it("fails a GPU pod pulling vLLM from Docker Hub, even by digest: a wake would cross the internet", async () => {
    const rs = changed("inference-us-east-1a", (p) => (containers(p)[0].image = `vllm/vllm-openai:v0.31.0@sha256:${"c1".repeat(32)}`));
    expect(await messages(gpuImagesFromEcr, rs)).toEqual([
      `inference-us-east-1a: container vllm of a GPU pod runs vllm/vllm-openai:v0.31.0@sha256:${"c1".repeat(32)}, not an image of the stack's ECR by digest: a wake would pull it across the internet. Name it through the pull-through cache (infra/images.ts pullRef: <account>.dkr.ecr.<region>.amazonaws.com/<cluster>/docker-hub/…@sha256:…).`,
    ]);
  });

  it("fails an ECR image by tag, and an init container of the GPU pod from elsewhere", async () => {
    const tag = changed("inference-us-east-1a", (p) => (containers(p)[0].image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/docker-hub/vllm/vllm-openai:v0.31.0"));
    expect(await messages(gpuImagesFromEcr, tag)).toHaveLength(1);
    const init = changed("inference-us-east-1a", (p) => (at(p, "spec.template.spec").initContainers = [{ name: "weights", image: `public.ecr.aws/aws-cli/aws-cli@sha256:${"d".repeat(64)}` }]));
    expect((await messages(gpuImagesFromEcr, init))[0]).toMatch(/^inference-us-east-1a: container weights of a GPU pod runs public\.ecr\.aws/);
  });

  it("leaves pods without GPUs alone (the agent, the L1 proxies)", async () => {
    const rs = changed("agent", (p) => (containers(p)[0].image = `docker.io/library/busybox@sha256:${"e".repeat(64)}`));
    expect(await messages(gpuImagesFromEcr, rs)).toEqual([]);
  });
});
