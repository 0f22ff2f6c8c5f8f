import type * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig } from "../config";
import { appLabels, Deployment, GPU_TOLERATION, gpuNodeSelector, objectName, onePodAtATime, PodDisruptionBudget, Service, SKIP_AWAIT } from "./common";
import { clearDrainCommand, DRAIN_DIR, INFERENCE_TERMINATION_GRACE_S, preStopCommand } from "../../contracts/drain";
import { PORTS } from "../../contracts/names";
import { HANDOVER, MODEL_REVISION_ANNOTATION, MODEL_SOURCE_ENV, ROLLOUT_HANDOVER_ANNOTATION } from "../../contracts/rollout-kube";
import { APP, LABELS } from "../names";

export interface InferenceSpec {
  namespace: string;
  az: string;
  gpuClass: GpuClassConfig;
  /** vLLM OpenAI server image, by digest. */
  image: pulumi.Input<string>;
  /** Model id (`--model`), the one the agent requires to be served. */
  model: string;
  /** GPUs per pod (tensor parallel size). Default: every GPU of the node. */
  gpusPerPod?: number;
  /** Extra `vllm serve` arguments. Default none. */
  extraArgs?: string[];
  /** Secret with `token` = the Hugging Face token (`HF_TOKEN`), for gated models. Default none. */
  hfTokenSecretName?: string;
  /**
   * `s3://bucket/prefix` holding a copy of the model. Default none (the hub). With
   * `weightsLoad: "stream"` it holds the model's files (config, tokenizer, safetensors) and
   * vLLM streams them; with `"sync"` a copy of the Hugging Face cache (`HF_HOME`) that an
   * init container copies to the node first.
   */
  weightsS3Uri?: string;
  /** How the pod reads `weightsS3Uri`. Default `stream`. */
  weightsLoad?: "stream" | "sync";
  /** Region of the weights bucket (the stack's: read through the VPC's S3 gateway endpoint). Required to stream. */
  region?: string;
  /** ServiceAccount of the pods (IRSA: read access to `weightsS3Uri`). Default none. */
  serviceAccountName?: string;
  /** Image of the S3 prefetch init container, by digest. Required with `weightsS3Uri`. */
  awsCliImage?: pulumi.Input<string>;
  /** Secret with `key` = the API key vLLM requires on its `/v1` routes (`VLLM_API_KEY`: never in argv). Default none. */
  apiKeySecretName?: string;
  /** Node directory of the model cache: the instance-store NVMe array. Default `MODEL_CACHE_HOST_PATH`. */
  cacheHostPath?: string;
}

/** The model cache on the node's instance-store NVMe (nodeadm RAID0 at /mnt/k8s-disks/0). */
export const MODEL_CACHE_HOST_PATH = "/mnt/k8s-disks/0/llm-ha/huggingface";
/** `HF_HOME` inside the inference containers (outside /root: the server runs as `INFERENCE_UID`). */
export const HF_HOME = "/models/huggingface";
/** The user vLLM and the model fetchers run as: not root, no capabilities. */
export const INFERENCE_UID = 1000;
/** Where the model fetcher alone finds the Hugging Face token, as a file (`HF_TOKEN_PATH`), never in its environment. */
export const HF_TOKEN_DIR = "/run/secrets/llm-ha-hf";

/** Parallel S3 readers of the Run:ai streamer per pod (`RUNAI_STREAMER_CONCURRENCY`; the streamer's default is 16). */
export const STREAMER_CONCURRENCY = 32;

/**
 * The revision an inference pod loads, as a rollout names it: what vLLM reports as `root` (its
 * `--model`): the S3 copy's URI where the weights come from S3 (each revision its own prefix),
 * else the hub id. It lives in the pod template's `llm-ha.io/model-revision` annotation; the
 * containers read it as `$(LLMHA_MODEL_SOURCE)` (contracts/rollout-kube.ts).
 */
export function modelRevisionOf(s: Pick<InferenceSpec, "model" | "weightsS3Uri">): string {
  return s.weightsS3Uri ?? s.model;
}

/** `$(LLMHA_MODEL_SOURCE)`: Kubernetes puts the variable's value (the pod's revision annotation) in its place in args and commands. */
export const MODEL_SOURCE_REF = `$(${MODEL_SOURCE_ENV})`;

/** The variable each container that loads the weights reads the revision annotation into (downward API). */
export const MODEL_SOURCE_VAR = Object.freeze({ name: MODEL_SOURCE_ENV, valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${MODEL_REVISION_ANNOTATION}']` } } });

/**
 * vLLM's arguments for the model: its hub id, or (streaming) the S3 prefix read by the Run:ai
 * Model Streamer straight into GPU memory, served under the hub id (the agents and the
 * clients ask for that name, not for the bucket). With tensor parallelism the streamer runs
 * `distributed`: each of the `gpus` workers reads its share of the files instead of every
 * worker reading the whole checkpoint (8 × 140 GB from S3 on an 8-GPU node).
 */
export function modelArgs(s: Pick<InferenceSpec, "model" | "weightsS3Uri" | "weightsLoad">, gpus = 1): string[] {
  // sync: vLLM reads the hub id from the cache the fetcher filled from the revision's S3 copy.
  if (s.weightsS3Uri && s.weightsLoad === "sync") return ["--model", s.model];
  if (!s.weightsS3Uri) return ["--model", MODEL_SOURCE_REF];
  return [
    "--model",
    MODEL_SOURCE_REF,
    "--load-format",
    "runai_streamer",
    "--served-model-name",
    s.model,
    ...(gpus > 1 ? ["--model-loader-extra-config", JSON.stringify({ distributed: true })] : []),
  ];
}

/** The model fetcher's command without an S3 copy: the hub, with the token read from `HF_TOKEN_PATH`. */
export function hubFetchCommand(model: string): string[] {
  return ["python3", "-c", "import sys\nfrom huggingface_hub import snapshot_download\nsnapshot_download(sys.argv[1])", model];
}

/**
 * The readiness check of an inference pod, run in its container: the node's agent decides
 * (`/readyz` on the host network: 200 takes traffic, anything else does not, so a GPU-faulty
 * or wedged node leaves every Service's endpoints), and only when the agent cannot be reached
 * at all (not deployed yet, restarting) the server's own `/health` does. Python is in every
 * vLLM image; no curl is needed.
 */
export function readinessCommand(agentPort: number = PORTS.agentHttp, inferencePort: number = PORTS.inference, host = "127.0.0.1"): string[] {
  const script = [
    "import sys, urllib.request as r, urllib.error as e",
    "def code(port, path):",
    "    try:",
    `        return r.urlopen('http://${host}:%d%s' % (port, path), timeout=2).status`,
    "    except e.HTTPError as x:",
    "        return x.code",
    "try:",
    `    ok = code(${agentPort}, '/readyz') == 200`,
    "except Exception:",
    `    ok = code(${inferencePort}, '/health') == 200`,
    "sys.exit(0 if ok else 1)",
  ].join("\n");
  return ["python3", "-c", script];
}

/** The inference Deployment of one (AZ, GPU class) and its PDB. */
export function inferenceManifests(s: InferenceSpec): { deployment: Deployment; pdb: PodDisruptionBudget } {
  const name = objectName("inference", s.az, s.gpuClass.name);
  const labels = appLabels(APP.inference, s.az, s.gpuClass.name);
  const gpus = s.gpusPerPod ?? s.gpuClass.gpusPerNode;
  const health = { httpGet: { path: "/health", port: PORTS.inference } };
  // The server reads the cache only (a compromised server cannot plant weights every later pod
  // would serve) and never reaches the hub; its home and caches are on a scratch volume.
  type Env = { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } | { fieldRef: { fieldPath: string } } };
  const env: Env[] = [
    MODEL_SOURCE_VAR,
    { name: "HF_HOME", value: HF_HOME },
    { name: "HF_HUB_OFFLINE", value: "1" },
    { name: "HOME", value: "/tmp" },
  ];
  const streaming = !!s.weightsS3Uri && s.weightsLoad !== "sync";
  // The streamer reads S3 with the pod's weights role (IRSA), in the stack's region: through the
  // VPC's S3 gateway endpoint, never the NAT or the hub.
  if (streaming) env.push({ name: "AWS_REGION", value: s.region ?? "" }, { name: "RUNAI_STREAMER_CONCURRENCY", value: String(STREAMER_CONCURRENCY) });
  // vLLM reads the key from VLLM_API_KEY or --api-key only (no file); the environment keeps it out of `ps`.
  if (s.apiKeySecretName) env.push({ name: "VLLM_API_KEY", valueFrom: { secretKeyRef: { name: s.apiKeySecretName, key: "key" } } });
  const cacheRo = { name: "cache", mountPath: HF_HOME, readOnly: true };
  const cacheRw = { name: "cache", mountPath: HF_HOME };
  const scratch = { name: "scratch", mountPath: "/tmp" };
  const run = { name: "llmha-run", mountPath: DRAIN_DIR };
  const nonRoot = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
  // The one container that writes the cache, and the only one with the means to fetch: the hub
  // token as a file, or the weights role (IRSA: the other containers are skipped). A woken
  // standby node is a new instance with an empty NVMe: S3 in the region (GB/s) beats the hub;
  // `sync` copies only what is missing.
  const fetcher = streaming
    ? undefined
    : s.weightsS3Uri
    ? { name: "weights", image: s.awsCliImage ?? "", command: ["aws", "s3", "sync", "--only-show-errors", MODEL_SOURCE_REF, HF_HOME], env: [{ name: "HOME", value: "/tmp" }, MODEL_SOURCE_VAR], volumeMounts: [cacheRw, scratch], securityContext: nonRoot }
    : {
        name: "model",
        image: s.image,
        command: hubFetchCommand(MODEL_SOURCE_REF),
        env: [{ name: "HF_HOME", value: HF_HOME }, { name: "HOME", value: "/tmp" }, MODEL_SOURCE_VAR, ...(s.hfTokenSecretName ? [{ name: "HF_TOKEN_PATH", value: `${HF_TOKEN_DIR}/token` }] : [])],
        volumeMounts: [cacheRw, scratch, ...(s.hfTokenSecretName ? [{ name: "hf-token", mountPath: HF_TOKEN_DIR, readOnly: true }] : [])],
        securityContext: nonRoot,
      };
  const initContainers = [
    // The kubelet creates hostPath directories owned by root: hand the node's cache and drain
    // directories to the server's user (root with CAP_CHOWN alone, nothing else).
    {
      name: "own-dirs",
      image: s.image,
      command: ["chown", `${INFERENCE_UID}:${INFERENCE_UID}`, HF_HOME, DRAIN_DIR],
      volumeMounts: [cacheRw, run],
      securityContext: { runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"], add: ["CHOWN"] } },
    },
    // The node's agent serves this node again only once a new server starts.
    { name: "clear-drain", image: s.image, command: clearDrainCommand(), volumeMounts: [run], securityContext: nonRoot },
    ...(fetcher ? [fetcher] : []),
  ];
  const deployment: Deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: s.namespace, labels },
    spec: {
      replicas: s.gpuClass.desiredPerAz,
      selector: { matchLabels: labels },
      // Every GPU node is taken: a surge pod would only sit Pending.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      template: {
        // The weights role (IRSA) reaches the one container that reads S3 (the sync fetcher, or
        // vLLM itself when it streams): the webhook skips the other containers.
        // The revision the pods load (contracts/rollout-kube.ts): a rollout changes it here, AZ by AZ.
        metadata: {
          labels,
          annotations: {
            [MODEL_REVISION_ANNOTATION]: modelRevisionOf(s),
            ...(s.serviceAccountName ? { "eks.amazonaws.com/skip-containers": streaming ? "own-dirs,clear-drain" : "own-dirs,clear-drain,vllm" } : {}),
          },
        },
        spec: {
          ...(s.serviceAccountName ? { serviceAccountName: s.serviceAccountName } : {}),
          // Nothing here calls the Kubernetes API.
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: INFERENCE_UID, runAsGroup: INFERENCE_UID, fsGroup: INFERENCE_UID, seccompProfile: { type: "RuntimeDefault" } },
          // The agent on the same node reaches the server at 127.0.0.1:8000 and HAProxy at
          // the node IP the headless Service returns, so the server shares the node's network.
          hostNetwork: true,
          dnsPolicy: "ClusterFirstWithHostNet",
          nodeSelector: gpuNodeSelector(s.az, s.gpuClass.name),
          tolerations: [GPU_TOLERATION],
          affinity: {
            // One server per node: port 8000 on the node IP is one server, and one node's
            // loss takes out one replica.
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                { topologyKey: "kubernetes.io/hostname", labelSelector: { matchLabels: { "app.kubernetes.io/name": APP.inference } } },
              ],
            },
          },
          // Each Deployment is pinned to its AZ by the node selector (the hard spread); this
          // constraint keeps the fleet spread over zones should anyone loosen that pin.
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: LABELS.zone,
              whenUnsatisfiable: "ScheduleAnyway",
              nodeAffinityPolicy: "Ignore",
              labelSelector: { matchLabels: { "app.kubernetes.io/name": APP.inference } },
            },
          ],
          // A planned stop waits for the requests in flight (preStop below), up to the proxy's `timeout server`.
          terminationGracePeriodSeconds: INFERENCE_TERMINATION_GRACE_S,
          initContainers,
          containers: [
            {
              name: "vllm",
              image: s.image,
              args: [
                ...modelArgs(s, gpus),
                "--host",
                "0.0.0.0",
                "--port",
                String(PORTS.inference),
                "--tensor-parallel-size",
                String(gpus),
                ...(s.extraArgs ?? []),
              ],
              ports: [{ name: "http", containerPort: PORTS.inference }],
              env,
              resources: { limits: { "nvidia.com/gpu": String(gpus) }, requests: { "nvidia.com/gpu": String(gpus) } },
              // Loading a large model takes minutes; the startup probe holds liveness off until then.
              startupProbe: { ...health, periodSeconds: 10, failureThreshold: 180 },
              // Readiness follows the node's agent (GPU faults, a wedged engine, latency), not /health alone.
              readinessProbe: { exec: { command: readinessCommand() }, periodSeconds: 5, failureThreshold: 2, timeoutSeconds: 5 },
              livenessProbe: { ...health, periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 5 },
              // A rolling update, scale-in or node drain: out of rotation first, then stopped once idle.
              lifecycle: { preStop: { exec: { command: preStopCommand() } } },
              securityContext: nonRoot,
              volumeMounts: [{ name: "shm", mountPath: "/dev/shm" }, cacheRo, scratch, run],
            },
          ],
          volumes: [
            // NCCL between tensor-parallel workers needs far more than the default 64 MiB.
            { name: "shm", emptyDir: { medium: "Memory", sizeLimit: "32Gi" } },
            // The node's NVMe, not an emptyDir: a restarted or rescheduled pod finds the weights there.
            { name: "cache", hostPath: { path: s.cacheHostPath ?? MODEL_CACHE_HOST_PATH, type: "DirectoryOrCreate" } },
            // The drain file the node's agent reads (read-only there).
            { name: "llmha-run", hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } },
            { name: "scratch", emptyDir: { sizeLimit: "20Gi" } },
            ...(s.hfTokenSecretName && !s.weightsS3Uri ? [{ name: "hf-token", secret: { secretName: s.hfTokenSecretName, defaultMode: 0o440 } }] : []),
          ],
        },
      },
    },
  };
  // A Deployment on a sleeping standby AZ, or one still downloading its first model, is not
  // ready for a long time: `pulumi up` does not wait for it (the agent and HAProxy do).
  // Its image and revision are the rollout's once it exists (`rolloutIgnoreChanges`, docs/infra.md "Model and engine changes").
  deployment.metadata = { ...(deployment.metadata as object), annotations: { [SKIP_AWAIT]: "true", [ROLLOUT_HANDOVER_ANNOTATION]: HANDOVER } };
  return { deployment, pdb: onePodAtATime(name, s.namespace, labels) };
}

/**
 * The paths Pulumi leaves as they are on an existing inference Deployment (`ignoreChanges`):
 * the revision annotation and the image of every container that runs the inference image. A
 * stack change of either goes to the `llm-ha-rollout` ConfigMap instead, and the leader rolls
 * it out AZ by AZ; every other field still updates in place.
 */
export function rolloutIgnoreChanges(d: Deployment, image: unknown): string[] {
  const spec = (d.spec as { template: { spec: { containers: { image?: unknown }[]; initContainers?: { image?: unknown }[] } } }).template.spec;
  const paths = [`spec.template.metadata.annotations["${MODEL_REVISION_ANNOTATION}"]`];
  spec.containers.forEach((c, i) => c.image === image && paths.push(`spec.template.spec.containers[${i}].image`));
  (spec.initContainers ?? []).forEach((c, i) => c.image === image && paths.push(`spec.template.spec.initContainers[${i}].image`));
  return paths;
}

/**
 * The headless Service of one AZ's inference servers: its DNS name resolves to the
 * node IPs HAProxy's `server-template` fills its slots from.
 */
export function inferenceHeadlessService(namespace: string, az: string): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: objectName("inference", az), namespace, labels: appLabels(APP.inference, az) },
    spec: {
      clusterIP: "None",
      // HAProxy, fed by the agent, decides who takes traffic (a loading node answers
      // `drain`); DNS must not hide a node for the readiness probe's slower verdict.
      publishNotReadyAddresses: true,
      selector: { "app.kubernetes.io/name": APP.inference, [LABELS.az]: az },
      ports: [
        { name: "http", port: PORTS.inference, targetPort: PORTS.inference },
        { name: "agent-http", port: PORTS.agentHttp, targetPort: PORTS.agentHttp },
        { name: "agent-check", port: PORTS.agentCheck, targetPort: PORTS.agentCheck },
      ],
    },
  };
}
