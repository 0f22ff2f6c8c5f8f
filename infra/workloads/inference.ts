import type * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig } from "../config";
import { appLabels, Deployment, GPU_TOLERATION, gpuNodeSelector, objectName, onePodAtATime, PodDisruptionBudget, Service, SKIP_AWAIT } from "./common";
import { clearDrainCommand, DRAIN_DIR, INFERENCE_TERMINATION_GRACE_S, preStopCommand } from "../../contracts/drain";
import { PORTS } from "../../contracts/names";
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
  /** `s3://bucket/prefix` holding a copy of the Hugging Face cache (`HF_HOME`) to sync before start. Default none. */
  weightsS3Uri?: string;
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
/** `HF_HOME` inside the inference container. */
export const HF_HOME = "/root/.cache/huggingface";

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
  const env: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[] = [{ name: "HF_HOME", value: HF_HOME }];
  if (s.hfTokenSecretName) env.push({ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: s.hfTokenSecretName, key: "token" } } });
  // vLLM reads the key from VLLM_API_KEY as from --api-key; the environment keeps it out of `ps`.
  if (s.apiKeySecretName) env.push({ name: "VLLM_API_KEY", valueFrom: { secretKeyRef: { name: s.apiKeySecretName, key: "key" } } });
  const cache = { name: "cache", mountPath: HF_HOME };
  // A woken standby node is a new instance with an empty NVMe: fetch the weights from S3 in
  // the region (GB/s) rather than from the Hugging Face hub; `sync` copies only what is missing.
  const run = { name: "llmha-run", mountPath: DRAIN_DIR };
  const initContainers = [
    // The node's agent serves this node again only once a new server starts.
    { name: "clear-drain", image: s.image, command: clearDrainCommand(), volumeMounts: [run], securityContext: { allowPrivilegeEscalation: false } },
    ...(s.weightsS3Uri
      ? [
          {
            name: "weights",
            image: s.awsCliImage ?? "",
            command: ["aws", "s3", "sync", "--only-show-errors", s.weightsS3Uri, HF_HOME],
            volumeMounts: [cache],
            securityContext: { allowPrivilegeEscalation: false },
          },
        ]
      : []),
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
        metadata: { labels },
        spec: {
          ...(s.serviceAccountName ? { serviceAccountName: s.serviceAccountName } : {}),
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
                "--model",
                s.model,
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
              securityContext: { allowPrivilegeEscalation: false },
              volumeMounts: [
                { name: "shm", mountPath: "/dev/shm" },
                cache,
                run,
              ],
            },
          ],
          volumes: [
            // NCCL between tensor-parallel workers needs far more than the default 64 MiB.
            { name: "shm", emptyDir: { medium: "Memory", sizeLimit: "32Gi" } },
            // The node's NVMe, not an emptyDir: a restarted or rescheduled pod finds the weights there.
            { name: "cache", hostPath: { path: s.cacheHostPath ?? MODEL_CACHE_HOST_PATH, type: "DirectoryOrCreate" } },
            // The drain file the node's agent reads (read-only there).
            { name: "llmha-run", hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } },
          ],
        },
      },
    },
  };
  // A Deployment on a sleeping standby AZ, or one still downloading its first model, is not
  // ready for a long time: `pulumi up` does not wait for it (the agent and HAProxy do).
  deployment.metadata = { ...(deployment.metadata as object), annotations: { [SKIP_AWAIT]: "true" } };
  return { deployment, pdb: onePodAtATime(name, s.namespace, labels) };
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
