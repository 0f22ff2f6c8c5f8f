import { L1_CPU } from "../workloads/l1-proxy";
import { MAX_CONTINUE_WORKERS } from "../../contracts/continuation";
import { IMAGES } from "../images";
import { digestRefProblem } from "./edge";
import { isPosInt, type Settings } from "./read";
import type { StackConfig, WeightsLoad } from "./stack-config";

/** Hugging Face organisations whose models are gated: a stack serving one needs `llm-ha:hfToken`. */
export const GATED_MODEL_ORGS = Object.freeze(["meta-llama", "mistralai", "google", "CohereForAI", "bigcode"]);

/**
 * Stacks whose nodes must load the model from the S3 copy, never from the Hugging Face hub: a
 * standby wake there pulls ~140 GB per node, and the hub (through NAT, rate-limited, outside
 * the region) is no dependency a failover may have. Dev keeps the hub path.
 */
export const S3_WEIGHTS_STACKS = Object.freeze(["prod"]);

/** The ways a pod reads `inference.weightsS3Uri`; the first is the default. */
export const WEIGHTS_LOADS: readonly WeightsLoad[] = Object.freeze(["stream", "sync"]);

/** A Hugging Face commit: the 40 hex digits of the model repository's revision. */
export const HF_REVISION = /^[0-9a-f]{40}$/;

/** The command that reads a model's current commit on the hub (for pinning `inference.revision`). */
export function revisionCommand(model: string): string {
  return `curl -s https://huggingface.co/api/models/${model}/revision/main | jq -r .sha`;
}

/** `llm-ha:inference` and `hfToken`: the engine, the model and where its weights come from. */
export function inferenceOf(s: Settings, stack: string): Pick<StackConfig, "inference" | "hfToken"> {
  const { cfg, p, key } = s;
  const inf = s.obj("inference");
  const gpusPerPod = inf.gpusPerPod;
  if (gpusPerPod !== undefined && !isPosInt(gpusPerPod)) p.add(key("inference.gpusPerPod"), "must be a positive integer");
  const extraArgs = inf.extraArgs ?? [];
  if (!Array.isArray(extraArgs) || !extraArgs.every((a) => typeof a === "string")) p.add(key("inference.extraArgs"), "must be a list of strings");
  const weightsS3Uri = inf.weightsS3Uri;
  if (weightsS3Uri !== undefined && (typeof weightsS3Uri !== "string" || !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(weightsS3Uri))) {
    p.add(key("inference.weightsS3Uri"), "must be an s3://bucket/prefix URI");
  }
  const model = s.str(inf, "model", key("inference.model"));
  const weightsLoad = inf.weightsLoad ?? WEIGHTS_LOADS[0];
  if (!WEIGHTS_LOADS.includes(weightsLoad as WeightsLoad)) p.add(key("inference.weightsLoad"), `must be one of ${WEIGHTS_LOADS.join(", ")}`);
  const revision = inf.revision;
  if (revision !== undefined && (typeof revision !== "string" || !HF_REVISION.test(revision))) {
    p.add(key("inference.revision"), `must be the model's 40-hex commit on the hub (${revisionCommand(model)})`);
  } else if (revision === undefined && (weightsS3Uri !== undefined || S3_WEIGHTS_STACKS.includes(stack))) {
    p.add(key("inference.revision"), `is required with ${key("inference.weightsS3Uri")}: the commit the S3 copy holds, which preflight checks the copy's manifest against (${revisionCommand(model)})`);
  }
  if (S3_WEIGHTS_STACKS.includes(stack) && weightsS3Uri === undefined) {
    p.add(
      key("inference.weightsS3Uri"),
      `is required in ${stack}: its nodes load the model from S3 in the VPC, never from the Hugging Face hub (copy it with the steps of docs/infra.md "Wake path", then pulumi config set --path '${key("inference.weightsS3Uri")}' s3://<bucket>/<prefix>)`,
    );
  }
  const hfToken = cfg.getSecret("hfToken");
  if (S3_WEIGHTS_STACKS.includes(stack) && hfToken !== undefined) {
    p.add(key("hfToken"), `must not be set in ${stack}: no pod there reaches the hub (pulumi config rm ${key("hfToken")}; the weights come from ${key("inference.weightsS3Uri")})`);
  }
  const org = model.split("/")[0];
  if (hfToken === undefined && GATED_MODEL_ORGS.includes(org) && weightsS3Uri === undefined && !S3_WEIGHTS_STACKS.includes(stack)) {
    p.add(
      key("hfToken"),
      `is required: ${model} is a gated Hugging Face model (accept its licence, then pulumi config set --secret ${key("hfToken")} hf_…), or prefetch it from S3 with ${key("inference.weightsS3Uri")}`,
    );
  }
  return {
    hfToken,
    inference: {
      image: imageRef(s, inf, "image", key("inference.image"), `${IMAGES.vllm.repository}:${IMAGES.vllm.tag}@${IMAGES.vllm.digest}`),
      model,
      gpusPerPod: isPosInt(gpusPerPod) ? gpusPerPod : undefined,
      extraArgs: Array.isArray(extraArgs) ? (extraArgs as string[]) : [],
      weightsS3Uri: typeof weightsS3Uri === "string" ? weightsS3Uri : undefined,
      weightsLoad: WEIGHTS_LOADS.includes(weightsLoad as WeightsLoad) ? (weightsLoad as WeightsLoad) : WEIGHTS_LOADS[0],
      revision: typeof revision === "string" ? revision : undefined,
    },
  };
}

/** `llm-ha:agentImage` / `agentImageBuild`: the agent image, by digest or built by the stack. */
export function agentImageOf(s: Settings): Pick<StackConfig, "agentImage" | "agentImageBuild"> {
  const { cfg, p, key } = s;
  const agentImageBuild = cfg.getBoolean("agentImageBuild") ?? false;
  const agentImage = cfg.get("agentImage") ?? "";
  if (agentImageBuild && agentImage) p.add(key("agentImage"), `give either ${key("agentImage")} (a digest) or ${key("agentImageBuild")}: true, not both`);
  else if (!agentImageBuild) {
    if (!agentImage) {
      p.add(key("agentImage"), `is required: the agent image by digest (<repo>@sha256:<64 hex>, e.g. pushed to the stack's ECR repository), or ${key("agentImageBuild")}: true to build and push it with Docker`);
    } else if (agentImage.startsWith("ghcr.io/llm-ha/")) {
      p.add(key("agentImage"), `${agentImage} is the documentation's example: nobody publishes it; build agent/Dockerfile and push it (or set ${key("agentImageBuild")}: true)`);
    } else if (!/^[a-z0-9.-]+(:[0-9]+)?\/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$/.test(agentImage)) {
      p.add(key("agentImage"), `${agentImage} must name the image by digest (<repo>@sha256:<64 hex>): a tag can move under running nodes`);
    }
  }
  return { agentImage, agentImageBuild };
}

/** `llm-ha:haproxy`: the L1 proxy. */
export function haproxyOf(s: Settings): StackConfig["haproxy"] {
  const hap = s.obj("haproxy");
  // Empty default: the ECR Public mirror of Docker's haproxy at `llm-ha:images.haproxyDigest` (resolve.ts requires it then).
  const cpuMillis = cpuMillisOf(s, hap.cpu, s.key("haproxy.cpu"));
  const nbthread = hap.nbthread === undefined ? undefined : s.int(hap, "nbthread", s.key("haproxy.nbthread"), 1);
  const relayWorkers = hap.relayWorkers === undefined ? undefined : s.int(hap, "relayWorkers", s.key("haproxy.relayWorkers"), 1);
  if (relayWorkers !== undefined && relayWorkers > MAX_CONTINUE_WORKERS) s.p.add(s.key("haproxy.relayWorkers"), `must be at most ${MAX_CONTINUE_WORKERS} (the continuation relay's processes in each L1 pod)`);
  return {
    image: imageRef(s, hap, "image", s.key("haproxy.image"), ""),
    replicas: s.int(hap, "replicas", s.key("haproxy.replicas"), 2),
    cpuMillis,
    ...(nbthread !== undefined ? { nbthread } : {}),
    ...(relayWorkers !== undefined ? { relayWorkers } : {}),
  };
}

/**
 * A CPU amount as Kubernetes writes it (`2`, `1.5`, `1500m`; a YAML number too), in millicores.
 * Default `L1_CPU` (2 cores): HAProxy's limit, from which its `nbthread` is rendered.
 */
function cpuMillisOf(s: Settings, v: unknown, path: string): number {
  if (v === undefined) return L1_CPU.limitMillis;
  const text = typeof v === "number" ? String(v) : typeof v === "string" ? v.trim() : "";
  const m = /^(\d+(?:\.\d{1,3})?)$|^(\d+)m$/.exec(text);
  const millis = m ? (m[1] !== undefined ? Math.round(Number(m[1]) * 1000) : Number(m[2])) : NaN;
  if (!Number.isSafeInteger(millis) || millis < 100) {
    s.p.add(path, `${JSON.stringify(v)} must be a CPU amount of at least 100m, e.g. 2, 1.5 or 1500m (HAProxy's CPU limit; its nbthread is that rounded up)`);
    return L1_CPU.limitMillis;
  }
  return millis;
}

/** An image setting: by digest when given (`images-by-digest`), else the default. */
function imageRef(s: Settings, o: Record<string, unknown>, k: string, path: string, dflt: string): string {
  if (o[k] === undefined) return dflt;
  const ref = s.str(o, k, path);
  const problem = ref ? digestRefProblem(ref) : null;
  if (problem) s.p.add(path, problem);
  return ref;
}
