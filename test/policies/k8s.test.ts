import { describe, expect, it } from "vitest";
import { agentDaemonSetOnGpuNodes, gpuDeploymentPdb, gpuDeploymentSpread } from "../../policies/k8s";
import { at, changed, happyStack, messages } from "./fixtures";

const DEP = "inference-us-east-1a";
const podSpec = (p: Record<string, unknown>) => at(p, "spec.template.spec");

describe("gpu-deployment-spread", () => {
  it("passes with hostname anti-affinity and zone spread", async () => {
    expect(await messages(gpuDeploymentSpread, happyStack())).toEqual([]);
  });

  it("fails without anti-affinity", async () => {
    expect(await messages(gpuDeploymentSpread, changed(DEP, (p) => delete podSpec(p).affinity))).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but has no requiredDuringScheduling pod anti-affinity on kubernetes.io/hostname.",
    ]);
  });

  it("fails preferred (soft) anti-affinity", async () => {
    const rs = changed(DEP, (p) => {
      const aa = at(podSpec(p), "affinity.podAntiAffinity");
      aa.preferredDuringSchedulingIgnoredDuringExecution = [{ weight: 100, podAffinityTerm: aa.requiredDuringSchedulingIgnoredDuringExecution }];
      delete aa.requiredDuringSchedulingIgnoredDuringExecution;
    });
    expect(await messages(gpuDeploymentSpread, rs)).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but has no requiredDuringScheduling pod anti-affinity on kubernetes.io/hostname.",
    ]);
  });

  it("fails without a zone spread", async () => {
    expect(await messages(gpuDeploymentSpread, changed(DEP, (p) => delete podSpec(p).topologySpreadConstraints))).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but has no topology spread constraint on topology.kubernetes.io/zone.",
    ]);
  });

  it("ignores Deployments that request no GPU", async () => {
    const rs = changed(DEP, (p) => {
      delete podSpec(p).affinity;
      (podSpec(p).containers as Record<string, unknown>[])[0].resources = { limits: { cpu: "1" } };
    });
    expect(await messages(gpuDeploymentSpread, rs)).toEqual([]);
  });
});

describe("gpu-deployment-pdb", () => {
  it("passes when a PDB selects the pods", async () => {
    expect(await messages(gpuDeploymentPdb, happyStack())).toEqual([]);
  });

  it("fails when the PDB selects other pods", async () => {
    const rs = changed("inference-us-east-1a-pdb", (p) => (at(p, "spec.selector").matchLabels = { "app.kubernetes.io/name": "proxy" }));
    expect(await messages(gpuDeploymentPdb, rs)).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but no PodDisruptionBudget in namespace llm-ha selects its pods.",
    ]);
  });

  it("fails when the PDB is in another namespace", async () => {
    const rs = changed("inference-us-east-1a-pdb", (p) => (at(p, "metadata").namespace = "default"));
    expect(await messages(gpuDeploymentPdb, rs)).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but no PodDisruptionBudget in namespace llm-ha selects its pods.",
    ]);
  });

  it("accepts a matchExpressions selector", async () => {
    const rs = changed("inference-us-east-1a-pdb", (p) => {
      at(p, "spec").selector = { matchExpressions: [{ key: "app.kubernetes.io/name", operator: "In", values: ["inference"] }] };
    });
    expect(await messages(gpuDeploymentPdb, rs)).toEqual([]);
  });

  it("fails an empty selector (it would select nothing useful)", async () => {
    const rs = changed("inference-us-east-1a-pdb", (p) => (at(p, "spec").selector = {}));
    expect(await messages(gpuDeploymentPdb, rs)).toEqual([
      "Deployment inference-us-east-1a requests nvidia.com/gpu but no PodDisruptionBudget in namespace llm-ha selects its pods.",
    ]);
  });
});

describe("agent-daemonset-gpu-nodes", () => {
  it("passes the agent with toleration, node selector and /livez", async () => {
    expect(await messages(agentDaemonSetOnGpuNodes, happyStack())).toEqual([]);
  });

  it("fails without the GPU toleration", async () => {
    expect(await messages(agentDaemonSetOnGpuNodes, changed("agent", (p) => (podSpec(p).tolerations = [])))).toEqual([
      "Agent DaemonSet llm-ha-agent does not tolerate the nvidia.com/gpu NoSchedule taint.",
    ]);
  });

  it("fails without a GPU node selector", async () => {
    expect(await messages(agentDaemonSetOnGpuNodes, changed("agent", (p) => delete podSpec(p).nodeSelector))).toEqual([
      "Agent DaemonSet llm-ha-agent does not select GPU nodes (nodeSelector or required node affinity on llm-ha.io/gpu-class).",
    ]);
  });

  it("accepts required node affinity on the GPU class label", async () => {
    const rs = changed("agent", (p) => {
      delete podSpec(p).nodeSelector;
      podSpec(p).affinity = {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: "llm-ha.io/gpu-class", operator: "Exists" }] }],
          },
        },
      };
    });
    expect(await messages(agentDaemonSetOnGpuNodes, rs)).toEqual([]);
  });

  it("fails a liveness probe on another path", async () => {
    const rs = changed("agent", (p) => {
      (podSpec(p).containers as Record<string, unknown>[])[0].livenessProbe = { httpGet: { path: "/readyz", port: 9400 } };
    });
    expect(await messages(agentDaemonSetOnGpuNodes, rs)).toEqual(["Agent DaemonSet llm-ha-agent has no liveness probe on /livez."]);
  });

  it("lists every problem in one message", async () => {
    const rs = changed("agent", (p) => {
      podSpec(p).tolerations = [];
      delete podSpec(p).nodeSelector;
      delete (podSpec(p).containers as Record<string, unknown>[])[0].livenessProbe;
    });
    expect(await messages(agentDaemonSetOnGpuNodes, rs)).toEqual([
      "Agent DaemonSet llm-ha-agent does not tolerate the nvidia.com/gpu NoSchedule taint, does not select GPU nodes (nodeSelector or required node affinity on llm-ha.io/gpu-class) and has no liveness probe on /livez.",
    ]);
  });

  it("ignores other DaemonSets", async () => {
    const rs = changed("agent", (p) => {
      at(p, "spec.template.metadata").labels = { "app.kubernetes.io/name": "nvidia-device-plugin" };
      podSpec(p).tolerations = [];
    });
    expect(await messages(agentDaemonSetOnGpuNodes, rs)).toEqual([]);
  });
});
