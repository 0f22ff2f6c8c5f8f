import type * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig } from "../config";
import { appLabels, DaemonSet, GPU_TOLERATION, gpuNodeSelector, objectName, SKIP_AWAIT, type ServiceAccount } from "./common";
import { DRAIN_DIR, DRAIN_FILE } from "../../contracts/drain";
import { NODE_IDENTITY, PORTS } from "../../contracts/names";
import { APP } from "../names";
import { redisCredential } from "./redis-secret";

/**
 * XIDs in Kubernetes, with no privileged container. The kernel log is read through syslog(2)
 * (`dmesg --syslog`), not `/dev/kmsg`: the device file needs the device cgroup to allow char
 * device 1:11, which only `privileged` lifts, while syslog(2)'s read-all needs CAP_SYSLOG alone
 * (with `kernel.dmesg_restrict=1`), and containerd's default seccomp profile allows the call
 * when that capability is held. Kubernetes gives an added capability to a root process only, so
 * the relay runs as root with every capability dropped but SYSLOG, no privilege escalation, a
 * read-only root file system, no ServiceAccount token and no secret: it can read the kernel
 * log and write its small memory-backed volume, nothing else. syslog(2) cannot follow, so it
 * polls every 2 s: lines after the last timestamp it has seen (kept in the volume, so a restart
 * of either container neither replays nor loses the past), XID lines only, appended to the file
 * the unprivileged agent reads as `LLMHA_XID_LOG` (a growing file: the reader skips what was
 * there at its start). The first poll only records where the log stands.
 */
export const XID_VOLUME = "xid-log";
/** The node directory of the planned-drain file, shared with the inference pod (read-only here). */
export const DRAIN_VOLUME = "llmha-run";
export const XID_DIR = "/run/llmha-xid";
export const XID_LOG = `${XID_DIR}/kmsg.log`;
/** The relay's position: the kernel timestamp (seconds since boot) of the newest line seen. */
export const XID_STATE = `${XID_DIR}/.last`;
/** Kernel timestamp of a `[ 8812.901234] …` line, as awk reads it. */
const AWK_TS = 't = substr($0, 2, index($0, "]") - 2) + 0';
/** One poll of the relay: new XID lines appended, the position moved on. */
export const XID_RELAY_STEP = [
  "buf=$(dmesg --syslog --nopager) || exit 1",
  `if [ -f ${XID_STATE} ]; then printf '%s\n' "$buf" | awk -v last="$(cat ${XID_STATE})" '/NVRM: Xid/ { ${AWK_TS}; if (t > last + 0) print }' >> ${XID_LOG}; fi`,
  `printf '%s\n' "$buf" | awk -v last="$(cat ${XID_STATE} 2>/dev/null || echo -1)" 'BEGIN { m = last + 0 } { ${AWK_TS}; if (t > m) m = t } END { printf "%.6f\\n", m }' > ${XID_STATE}.new`,
  `mv ${XID_STATE}.new ${XID_STATE}`,
].join("; ");
/** The sidecar's loop. */
export const XID_RELAY = `while :; do ${XID_RELAY_STEP}; sleep 2; done`;

/** The relay's only privilege: reading the kernel log. */
export const XID_RELAY_SECURITY = Object.freeze({
  runAsUser: 0,
  runAsNonRoot: false,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ["ALL"], add: ["SYSLOG"] },
});


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
  /** Secret holding `endpoint` (the Redis URL without its password) and `password`. */
  redisSecretName: string;
  /** Secret holding `key` = the inference API key (vLLM `VLLM_API_KEY`), mounted as `LLMHA_INFERENCE_API_KEY_FILE`. Default none. */
  inferenceKeySecretName?: string;
  /**
   * Node identities (`llm-ha:nodeIdentities`): the pods run as `AGENT_SERVICE_ACCOUNT` with a
   * projected token of audience `llm-ha` at `IDENTITY_TOKEN_FILE` (`LLMHA_IDENTITY_TOKEN_FILE`).
   * False: no token, and the DaemonSet says so (`NODE_IDENTITY.optOutAnnotation`). Default true.
   */
  nodeIdentities?: boolean;
}

/**
 * The agents' own ServiceAccount: a name for their projected identity tokens (the token's `sub`),
 * bound to no role at all, and no API token mounted from it: the agent never calls the
 * Kubernetes API (a token with audience `llm-ha` is refused there anyway).
 */
export const AGENT_SERVICE_ACCOUNT = "llm-ha-agent";
/** Where the agent reads its identity token: a projected volume of that token alone, in the agent container only. */
export const IDENTITY_TOKEN_DIR = "/var/run/secrets/llm-ha/identity";
export const IDENTITY_TOKEN_FILE = `${IDENTITY_TOKEN_DIR}/token`;
const IDENTITY_VOLUME = "identity-token";
/**
 * An hour: the kubelet renews a projected token at 80 % of its life, and the agent re-reads the
 * file at every enrolment, so an old token is never sent. (The API server's minimum is 600 s.)
 */
export const IDENTITY_TOKEN_SECONDS = 3600;

export function agentServiceAccount(namespace: string): ServiceAccount {
  return {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: AGENT_SERVICE_ACCOUNT, namespace, labels: { "app.kubernetes.io/name": APP.agent, "app.kubernetes.io/part-of": "llm-ha" } },
    automountServiceAccountToken: false,
  };
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
  // The URL without its password; the password as a file, group-readable for fsGroup 10001 (the agent's user, not the relay).
  const redis = redisCredential(s.redisSecretName, "llm-ha-redis", 0o440);
  const labels = appLabels(APP.agent, s.az, s.gpuClass.name);
  const env = (name: string, value: string) => ({ name, value });
  const identity = s.nodeIdentities ?? true;
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    // On a sleeping standby AZ, or during a slow GPU node roll, the rollout outlasts pulumi's wait.
    metadata: {
      name: objectName("agent", s.az, s.gpuClass.name),
      namespace: s.namespace,
      labels,
      annotations: { [SKIP_AWAIT]: "true", ...(identity ? {} : { [NODE_IDENTITY.optOutAnnotation]: NODE_IDENTITY.optOut }) },
    },
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
          // No ServiceAccount with a cloud role: the controller Deployment alone acts.
          // The agent never calls the Kubernetes API either: no API token. With node identities its
          // own ServiceAccount (no role bound) names the projected identity token below.
          ...(identity ? { serviceAccountName: AGENT_SERVICE_ACCOUNT } : {}),
          automountServiceAccountToken: false,
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
                // The URL without its password; the password as a file (never in the environment children inherit).
                ...redis.env,
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
                // Node identity: the projected token that names this node; the agent enrols with it.
                ...(identity ? [env("LLMHA_IDENTITY_TOKEN_FILE", IDENTITY_TOKEN_FILE)] : []),
              ],
              volumeMounts: [
                { name: XID_VOLUME, mountPath: XID_DIR, readOnly: true },
                { name: DRAIN_VOLUME, mountPath: DRAIN_DIR, readOnly: true },
                redis.mount,
                ...(s.inferenceKeySecretName ? [{ name: INFERENCE_KEY_VOLUME, mountPath: INFERENCE_KEY_DIR, readOnly: true }] : []),
                ...(identity ? [{ name: IDENTITY_VOLUME, mountPath: IDENTITY_TOKEN_DIR, readOnly: true }] : []),
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
              // CAP_SYSLOG for syslog(2), root because Kubernetes grants added capabilities to root only (see XID_VOLUME).
              securityContext: XID_RELAY_SECURITY,
            },
          ],
          volumes: [
            { name: XID_VOLUME, emptyDir: { medium: "Memory", sizeLimit: "8Mi" } },
            { name: DRAIN_VOLUME, hostPath: { path: DRAIN_DIR, type: "DirectoryOrCreate" } },
            redis.volume,
            // 0400 for the agent's user (fsGroup is not needed: the kubelet writes it owned by root, readable by mode).
            ...(s.inferenceKeySecretName ? [{ name: INFERENCE_KEY_VOLUME, secret: { secretName: s.inferenceKeySecretName, defaultMode: 0o444 } }] : []),
            // The identity token alone (no CA, no namespace file: nothing for the API). With fsGroup
            // set the kubelet writes it 0600 and then makes it group-readable for fsGroup 10001: the
            // agent's user reads it; it is mounted in the agent container only, not the relay's.
            ...(identity
              ? [{ name: IDENTITY_VOLUME, projected: { sources: [{ serviceAccountToken: { audience: NODE_IDENTITY.audience, expirationSeconds: IDENTITY_TOKEN_SECONDS, path: "token" } }] } }]
              : []),
          ],
        },
      },
    },
  };
}
