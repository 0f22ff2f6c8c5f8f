/**
 * NVIDIA's DCGM exporter on every llm-ha GPU node: the GPUs' own telemetry (utilization,
 * memory, temperature, power, XID errors, ECC and row-remap counters) as `DCGM_FI_*` series
 * on :9400, scraped by the stack's Prometheus jobs (infra/observability/manifests.ts, job
 * `dcgm-exporter`). The agent acts on faults it reads itself; these series are what an
 * operator reads beside its alerts (the GPU fault and canary runbooks).
 *
 * In kube-system beside the device plugin: it reads the kubelet's pod-resources socket (a
 * hostPath, allowed there, not in the edge namespace) to label each GPU's series with the pod
 * that holds it. It asks for no GPU (`NVIDIA_VISIBLE_DEVICES=all` through the NVIDIA runtime
 * the EKS NVIDIA AMI makes containerd's default), runs without privilege and without
 * SYS_ADMIN, so the profiling counters (`DCGM_FI_PROF_*`) stay off; the device counters do not
 * need it. No ServiceAccount token: it never talks to the API server.
 */
import type * as pulumi from "@pulumi/pulumi";
import { ANY_GPU_NODE_AFFINITY, DaemonSet, GPU_TOLERATION } from "./common";
import { APP } from "../names";

/** The exporter's listener (its default): the pod's own address, not the host's (the agent holds :9400 on the host network). */
export const DCGM_EXPORTER_PORT = 9400;
/** Container port name the scrape jobs select. */
export const DCGM_EXPORTER_PORT_NAME = "metrics";
export const DCGM_EXPORTER_NAMESPACE = "kube-system";

export function dcgmExporterDaemonSet(image: pulumi.Input<string>): DaemonSet {
  const labels = { "app.kubernetes.io/name": APP.dcgmExporter, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: APP.dcgmExporter, namespace: DCGM_EXPORTER_NAMESPACE, labels },
    spec: {
      selector: { matchLabels: labels },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%" } },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          // GPU nodes only: the taint lets it on, the class label keeps it off every other node.
          tolerations: [GPU_TOLERATION],
          affinity: ANY_GPU_NODE_AFFINITY,
          containers: [
            {
              name: "dcgm-exporter",
              image,
              env: [
                { name: "DCGM_EXPORTER_LISTEN", value: `:${DCGM_EXPORTER_PORT}` },
                { name: "DCGM_EXPORTER_KUBERNETES", value: "true" },
                { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
              ],
              ports: [{ name: DCGM_EXPORTER_PORT_NAME, containerPort: DCGM_EXPORTER_PORT, protocol: "TCP" }],
              readinessProbe: { httpGet: { path: "/health", port: DCGM_EXPORTER_PORT }, periodSeconds: 10 },
              resources: { requests: { cpu: "50m", memory: "128Mi" }, limits: { memory: "512Mi" } },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, readOnlyRootFilesystem: false },
              volumeMounts: [{ name: "pod-resources", mountPath: "/var/lib/kubelet/pod-resources", readOnly: true }],
            },
          ],
          volumes: [{ name: "pod-resources", hostPath: { path: "/var/lib/kubelet/pod-resources" } }],
        },
      },
    },
  };
}
