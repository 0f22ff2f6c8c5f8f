import type * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig } from "../config";
import { appLabels, DaemonSet, GPU_TOLERATION, gpuNodeSelector, objectName, SKIP_AWAIT } from "./common";
import { DRAIN_DIR, DRAIN_FILE } from "../../contracts/drain";
import { PORTS } from "../../contracts/names";
import { APP } from "../names";

/**
 * XIDs in Kubernetes (issue 16). Reading `/dev/kmsg` from a container needs two things no
 * capability gives an unprivileged container: the device cgroup must allow char device 1:11
 * (only `privileged` lifts it — a hostPath mount of /dev/kmsg still fails with EPERM, even with
 * every capability added), and with `kernel.dmesg_restrict=1` the reader needs CAP_SYSLOG,
 * which Kubernetes grants a non-root process only through `privileged` + root. So the agent
 * stays unprivileged, and a sidecar of a few lines holds that privilege alone: it follows the
 * kernel log for new records only (`dmesg --follow-new`, util-linux in the image), keeps the
 * `NVRM: Xid` lines, and appends them to a small memory-backed volume that the agent mounts
 * read-only and reads as `LLMHA_XID_LOG` (a growing file: the reader skips what was there at
 * its start). A restart of either container neither replays nor loses the log's past.
 */
export const XID_VOLUME = "xid-log";
/** The node directory of the planned-drain file, shared with the inference pod (read-only here). */
export const DRAIN_VOLUME = "llmha-run";
export const XID_DIR = "/run/llmha-xid";
export const XID_LOG = `${XID_DIR}/kmsg.log`;
/** The sidecar's pipeline: new kernel records only, XID lines only, line-buffered into the shared file. */
export const XID_RELAY = `dmesg --follow-new --nopager | grep --line-buffered 'NVRM: Xid' >> ${XID_LOG}`;

export interface AgentSpec {
  namespace: string;
  az: string;
  gpuClass: GpuClassConfig;
  /** The image built from agent/Dockerfile, by digest. */
  image: pulumi.Input<string>;
  /** `LLMHA_CLUSTER`: the Redis key namespace. */
  clusterName: string;
  /** `LLMHA_MODEL`: the model id that must be served. */
  model: string;
  /** Secret holding `url` = `rediss://:<token>@<primary>:6379`. */
  redisSecretName: string;
  /** Secret holding `key` = the inference API key (vLLM `VLLM_API_KEY`), mounted as `LLMHA_INFERENCE_API_KEY_FILE`. Default none. */
  inferenceKeySecretName?: string;
}

/** Where the agent reads the inference API key: a Secret volume (updated in place on rotation), never env or argv. */
export const INFERENCE_KEY_DIR = "/run/secrets/llm-ha-inference";
const INFERENCE_KEY_VOLUME = "inference-key";

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
    // On a sleeping standby AZ, or during a slow GPU node roll, the rollout outlasts pulumi's wait.
    metadata: { name: objectName("agent", s.az, s.gpuClass.name), namespace: s.namespace, labels, annotations: { [SKIP_AWAIT]: "true" } },
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
          // No ServiceAccount with a cloud role (issue 26): the controller Deployment alone acts.
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
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
                // A node agent checks its node and never leads: the controller Deployment does (workloads/controller.ts).
                env("LLMHA_ROLE", "node"),
                // The NVIDIA runtime mounts nvidia-smi and every GPU for reading without the
                // pod requesting `nvidia.com/gpu` (which would take GPUs from inference).
                env("NVIDIA_VISIBLE_DEVICES", "all"),
                env("NVIDIA_DRIVER_CAPABILITIES", "utility"),
                env("LLMHA_XID_LOG", XID_LOG),
                // Written by the inference pod's preStop hook: a planned stop drains the node first.
                env("LLMHA_DRAIN_FILE", DRAIN_FILE),
                ...(s.inferenceKeySecretName ? [env("LLMHA_INFERENCE_API_KEY_FILE", `${INFERENCE_KEY_DIR}/key`)] : []),
              ],
              volumeMounts: [
                { name: XID_VOLUME, mountPath: XID_DIR, readOnly: true },
                { name: DRAIN_VOLUME, mountPath: DRAIN_DIR, readOnly: true },
                ...(s.inferenceKeySecretName ? [{ name: INFERENCE_KEY_VOLUME, mountPath: INFERENCE_KEY_DIR, readOnly: true }] : []),
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
            {
              name: "xid-relay",
              image: s.image,
              command: ["sh", "-c", XID_RELAY],
              volumeMounts: [{ name: XID_VOLUME, mountPath: XID_DIR }],
              resources: { requests: { cpu: "5m", memory: "16Mi" }, limits: { memory: "32Mi" } },
              // privileged for the device cgroup, root for CAP_SYSLOG (see XID_VOLUME); nothing else.
              securityContext: { privileged: true, runAsUser: 0, runAsNonRoot: false, readOnlyRootFilesystem: true },
            },
          ],
          volumes: [
            { name: XID_VOLUME, emptyDir: { medium: "Memory", sizeLimit: "8Mi" } },
            { name: DRAIN_VOLUME, hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } },
            // 0400 for the agent's user (fsGroup is not needed: the kubelet writes it owned by root, readable by mode).
            ...(s.inferenceKeySecretName ? [{ name: INFERENCE_KEY_VOLUME, secret: { secretName: s.inferenceKeySecretName, defaultMode: 0o444 } }] : []),
          ],
        },
      },
    },
  };
}
