// Pod security over the prod stack: who holds what inside the pods and on the nodes.
import { beforeAll, describe, expect, it } from "vitest";
import { Deployment } from "kubernetes-models/apps/v1";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { HF_HOME, HF_TOKEN_DIR, inferenceManifests, INFERENCE_UID } from "../../infra/workloads/inference";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const gpuClass = { name: "h100", instanceType: "p5.48xlarge", instanceTypes: ["p5.48xlarge"], gpusPerNode: 8, desiredPerAz: 2, maxPerAz: 4 } as never;
const base = { namespace: "llm-ha", az: "us-east-1a", gpuClass, image: `vllm/vllm-openai@sha256:${"c".repeat(64)}`, model: "meta-llama/Llama-3.1-70B-Instruct" };
const podOf = (d: O): O => d.spec.template.spec;
const all = (pod: O): O[] => [...(pod.initContainers ?? []), ...pod.containers];

describe("pod security", () => {
  let rs: CapturedResource[];
  beforeAll(async () => {
    rs = await captureStack("prod");
  });

  it("runs vLLM as non-root with no capabilities, no escalation, and the model cache read-only", () => {
    const { deployment } = inferenceManifests({ ...base, hfTokenSecretName: "llm-ha-hf-token", apiKeySecretName: "llm-ha-inference-key" });
    expect(() => new Deployment(deployment as never).validate()).not.toThrow();
    const pod = podOf(deployment as O);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: INFERENCE_UID, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.automountServiceAccountToken).toBe(false);
    const vllm = pod.containers.find((c: O) => c.name === "vllm");
    expect(vllm.securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
    expect(vllm.volumeMounts).toContainEqual({ name: "cache", mountPath: HF_HOME, readOnly: true });
    expect(vllm.env).toContainEqual({ name: "HF_HUB_OFFLINE", value: "1" });
    // Only the fetcher writes the cache and holds the token, as a file.
    const writers = all(pod).filter((c) => c.volumeMounts.some((m: O) => m.name === "cache" && !m.readOnly)).map((c) => c.name);
    expect(writers).toEqual(["own-dirs", "model"]);
    const prepare = pod.initContainers.find((c: O) => c.name === "own-dirs");
    expect(prepare.securityContext.capabilities).toEqual({ drop: ["ALL"], add: ["CHOWN"] });
    const model = pod.initContainers.find((c: O) => c.name === "model");
    expect(model.env).toContainEqual({ name: "HF_TOKEN_PATH", value: `${HF_TOKEN_DIR}/token` });
    expect(all(pod).filter((c) => c.volumeMounts.some((m: O) => m.name === "hf-token")).map((c) => c.name)).toEqual(["model"]);
    for (const c of all(pod)) expect((c.env ?? []).map((e: O) => e.name)).not.toContain("HF_TOKEN");
  });

  it("gives the weights role to the S3 fetcher alone (sync)", () => {
    const { deployment } = inferenceManifests({ ...base, weightsS3Uri: "s3://b/p", weightsLoad: "sync", awsCliImage: `amazon/aws-cli@sha256:${"d".repeat(64)}`, serviceAccountName: "llm-ha-inference" });
    const d = deployment as O;
    expect(d.spec.template.metadata.annotations["eks.amazonaws.com/skip-containers"]).toBe("own-dirs,clear-drain,vllm");
    expect(podOf(d).initContainers.map((c: O) => c.name)).toEqual(["own-dirs", "clear-drain", "weights"]);
  });

  it("streams the weights from S3 into vLLM (Run:ai streamer), served under the hub id, with the weights role on vLLM alone", () => {
    const { deployment } = inferenceManifests({ ...base, weightsS3Uri: "s3://b/p", region: "us-east-1", serviceAccountName: "llm-ha-inference" });
    expect(() => new Deployment(deployment as never).validate()).not.toThrow();
    const d = deployment as O;
    const pod = podOf(d);
    // No fetcher: nothing copies to the node first, nothing reaches the hub.
    expect(pod.initContainers.map((c: O) => c.name)).toEqual(["own-dirs", "clear-drain"]);
    expect(d.spec.template.metadata.annotations["eks.amazonaws.com/skip-containers"]).toBe("own-dirs,clear-drain");
    const vllm = pod.containers.find((c: O) => c.name === "vllm");
    // 8 GPUs (the class's): each tensor-parallel worker streams its own share, not the whole checkpoint.
    // The S3 URI is the pod's revision annotation, which vLLM reads through the downward API (contracts/rollout-kube.ts).
    expect(d.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toBe("s3://b/p");
    expect(vllm.env).toContainEqual({ name: "LLMHA_MODEL_SOURCE", valueFrom: { fieldRef: { fieldPath: "metadata.annotations['llm-ha.io/model-revision']" } } });
    expect(vllm.args.slice(0, 8)).toEqual(["--model", "$(LLMHA_MODEL_SOURCE)", "--load-format", "runai_streamer", "--served-model-name", base.model, "--model-loader-extra-config", '{"distributed":true}']);
    const one = inferenceManifests({ ...base, gpusPerPod: 1, weightsS3Uri: "s3://b/p", region: "us-east-1", serviceAccountName: "llm-ha-inference" });
    expect(podOf(one.deployment as O).containers[0].args).not.toContain("--model-loader-extra-config");
    expect(vllm.env).toEqual(expect.arrayContaining([{ name: "AWS_REGION", value: "us-east-1" }, { name: "RUNAI_STREAMER_CONCURRENCY", value: "32" }, { name: "HF_HUB_OFFLINE", value: "1" }]));
    expect(pod.volumes.map((v: O) => v.name)).not.toContain("hf-token");
  });

  it("prod as built: every inference Deployment streams from the S3 copy; no hub token, no fetcher", () => {
    const deps = ofType(rs, "kubernetes:apps/v1:Deployment").map((r) => r.props as O).filter((d) => d.metadata.name.startsWith("inference-"));
    expect(deps.length).toBeGreaterThan(0);
    for (const d of deps) {
      const vllm = podOf(d).containers.find((c: O) => c.name === "vllm");
      expect(vllm.args).toEqual(expect.arrayContaining(["--load-format", "runai_streamer"]));
      expect(vllm.args[vllm.args.indexOf("--model") + 1]).toBe("$(LLMHA_MODEL_SOURCE)");
      expect(d.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toMatch(/^s3:\/\//);
      expect(podOf(d).initContainers.map((c: O) => c.name)).not.toContain("model");
    }
    expect(ofType(rs, "kubernetes:core/v1:Secret").map((r) => (r.props as O).metadata?.name)).not.toContain("llm-ha-hf-token");
  });

  it("labels every namespace the stack creates with its Pod Security Admission level", () => {
    const nss = rs.filter((r) => r.type === "kubernetes:core/v1:Namespace").map((r) => r.props as O);
    expect(nss.length).toBeGreaterThan(0);
    for (const ns of nss) expect(["privileged", "baseline", "restricted"]).toContain(ns.metadata.labels["pod-security.kubernetes.io/enforce"]);
  });

  it("sets IMDSv2 with hop limit 1 on every node group's launch template, the system group's included", () => {
    const lts = ofType(rs, "aws:ec2/launchTemplate:LaunchTemplate");
    expect(lts.map((l) => l.name)).toContain("eks-system-lt");
    for (const lt of lts) expect((lt.props as O).metadataOptions).toMatchObject({ httpTokens: "required", httpPutResponseHopLimit: 1 });
    for (const g of ofType(rs, "aws:eks/nodeGroup:NodeGroup")) expect((g.props as O).launchTemplate?.id, g.name).toBeTruthy();
  });

  it("mounts no API token into pods that never call the API, and runs nothing privileged", () => {
    const workloads = rs.filter((r) => ["kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet"].includes(r.type)).map((r) => r.props as O);
    const llmha = workloads.filter((w) => w.metadata.namespace === "llm-ha" || w.metadata.name === "nvidia-device-plugin");
    expect(llmha.length).toBeGreaterThan(3);
    for (const w of llmha) expect(podOf(w).automountServiceAccountToken, w.metadata.name).toBe(false);
    expect(JSON.stringify(workloads)).not.toContain('"privileged":true');
  });
});
