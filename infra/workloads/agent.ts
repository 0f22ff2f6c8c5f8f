import { GpuClassConfig } from "../config";
import { APP, appLabels, DaemonSet, GPU_TOLERATION, gpuNodeSelector, objectName, PORTS } from "./common";

export interface AgentSpec {
  namespace: string;
  az: string;
  gpuClass: GpuClassConfig;
  /** The image built from agent/Dockerfile. */
  image: string;
  /** `LLMHA_CLUSTER`: the Redis key namespace. */
  clusterName: string;
  /** `LLMHA_MODEL`: the model id that must be served. */
  model: string;
  /** Secret holding `url` = `rediss://:<token>@<primary>:6379`. */
  redisSecretName: string;
}

/**
 * The health agent on every GPU node of one (AZ, GPU class).
 *
 * One DaemonSet per AZ, because the downward API cannot read node labels: each DaemonSet
 * sets `LLMHA_AZ` from its own node selector, so the AZ is in the manifest and start-up
 * does not hang on an IMDS call (the agent's fallback). Per class, for `LLMHA_GPU_COUNT`.
 */
export function agentDaemonSet(s: AgentSpec): DaemonSet {
  const labels = appLabels(APP.agent, s.az, s.gpuClass.name);
  const env = (name: string, value: string) => ({ name, value });
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: objectName("agent", s.az, s.gpuClass.name), namespace: s.namespace, labels },
    spec: {
      selector: { matchLabels: labels },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels },
        spec: {
          // Same network as the inference server (127.0.0.1:8000) and reachable by HAProxy
          // at the node IP on 9400/9401.
          hostNetwork: true,
          dnsPolicy: "ClusterFirstWithHostNet",
          priorityClassName: "system-node-critical",
          nodeSelector: gpuNodeSelector(s.az, s.gpuClass.name),
          tolerations: [GPU_TOLERATION],
          terminationGracePeriodSeconds: 15,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "agent",
              image: s.image,
              args: ["agent"],
              env: [
                { name: "LLMHA_NODE_ID", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
                env("LLMHA_AZ", s.az),
                env("LLMHA_CLUSTER", s.clusterName),
                env("LLMHA_GPU_COUNT", String(s.gpuClass.gpusPerNode)),
                env("LLMHA_INFERENCE_URL", `http://127.0.0.1:${PORTS.inference}`),
                env("LLMHA_INFERENCE_KIND", "vllm"),
                env("LLMHA_MODEL", s.model),
                env("LLMHA_HTTP_PORT", String(PORTS.agentHttp)),
                env("LLMHA_AGENT_CHECK_PORT", String(PORTS.agentCheck)),
                { name: "LLMHA_REDIS_URL", valueFrom: { secretKeyRef: { name: s.redisSecretName, key: "url" } } },
                // The NVIDIA runtime mounts nvidia-smi and every GPU for reading without the
                // pod requesting `nvidia.com/gpu` (which would take GPUs from inference).
                env("NVIDIA_VISIBLE_DEVICES", "all"),
                env("NVIDIA_DRIVER_CAPABILITIES", "utility"),
              ],
              ports: [
                { name: "http", containerPort: PORTS.agentHttp },
                { name: "agent-check", containerPort: PORTS.agentCheck },
              ],
              // Liveness only: a readiness probe on /readyz would pull the agent's own pod out
              // of service exactly when it reports its node unhealthy, which helps no one.
              livenessProbe: { httpGet: { path: "/livez", port: PORTS.agentHttp }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 2 },
              resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "256Mi" } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
            },
          ],
        },
      },
    },
  };
}
