import { ANY_GPU_NODE_AFFINITY, DaemonSet, GPU_TOLERATION } from "./common";
import { IMAGES } from "../images";
import { APP } from "../names";

/** Image of the NVIDIA device plugin, which the EKS NVIDIA AMI does not ship: by digest (infra/images.ts). */
export const DEVICE_PLUGIN_IMAGE = `${IMAGES.devicePlugin.repository}:${IMAGES.devicePlugin.tag}@${IMAGES.devicePlugin.digest}`;

/** The NVIDIA device plugin on every llm-ha GPU node: advertises `nvidia.com/gpu`. */
export function devicePluginDaemonSet(image: string = DEVICE_PLUGIN_IMAGE): DaemonSet {
  const labels = { "app.kubernetes.io/name": APP.devicePlugin, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: APP.devicePlugin, namespace: "kube-system", labels },
    spec: {
      selector: { matchLabels: labels },
      updateStrategy: { type: "RollingUpdate" },
      template: {
        metadata: { labels },
        spec: {
          priorityClassName: "system-node-critical",
          // It talks to the kubelet's socket, never to the API server.
          automountServiceAccountToken: false,
          tolerations: [GPU_TOLERATION],
          affinity: ANY_GPU_NODE_AFFINITY,
          containers: [
            {
              name: "nvidia-device-plugin",
              image,
              env: [{ name: "FAIL_ON_INIT_ERROR", value: "false" }],
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
              volumeMounts: [{ name: "device-plugin", mountPath: "/var/lib/kubelet/device-plugins" }],
            },
          ],
          volumes: [{ name: "device-plugin", hostPath: { path: "/var/lib/kubelet/device-plugins" } }],
        },
      },
    },
  };
}
