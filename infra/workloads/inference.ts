import { GpuClassConfig } from "../config";
import { appLabels, Deployment, GPU_TOLERATION, gpuNodeSelector, objectName, onePodAtATime, PodDisruptionBudget, Service } from "./common";
import { PORTS } from "../../contracts/names";
import { APP, LABELS } from "../names";

export interface InferenceSpec {
  namespace: string;
  az: string;
  gpuClass: GpuClassConfig;
  /** vLLM OpenAI server image. */
  image: string;
  /** Model id (`--model`), the one the agent requires to be served. */
  model: string;
  /** GPUs per pod (tensor parallel size). Default: every GPU of the node. */
  gpusPerPod?: number;
  /** Extra `vllm serve` arguments. Default none. */
  extraArgs?: string[];
}

/** The inference Deployment of one (AZ, GPU class) and its PDB. */
export function inferenceManifests(s: InferenceSpec): { deployment: Deployment; pdb: PodDisruptionBudget } {
  const name = objectName("inference", s.az, s.gpuClass.name);
  const labels = appLabels(APP.inference, s.az, s.gpuClass.name);
  const gpus = s.gpusPerPod ?? s.gpuClass.gpusPerNode;
  const health = { httpGet: { path: "/health", port: PORTS.inference } };
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
          terminationGracePeriodSeconds: 60,
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
              resources: { limits: { "nvidia.com/gpu": String(gpus) }, requests: { "nvidia.com/gpu": String(gpus) } },
              // Loading a large model takes minutes; the startup probe holds liveness off until then.
              startupProbe: { ...health, periodSeconds: 10, failureThreshold: 180 },
              readinessProbe: { ...health, periodSeconds: 5, failureThreshold: 2 },
              livenessProbe: { ...health, periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 5 },
              securityContext: { allowPrivilegeEscalation: false },
              volumeMounts: [
                { name: "shm", mountPath: "/dev/shm" },
                { name: "cache", mountPath: "/root/.cache/huggingface" },
              ],
            },
          ],
          volumes: [
            // NCCL between tensor-parallel workers needs far more than the default 64 MiB.
            { name: "shm", emptyDir: { medium: "Memory", sizeLimit: "32Gi" } },
            { name: "cache", emptyDir: {} },
          ],
        },
      },
    },
  };
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
