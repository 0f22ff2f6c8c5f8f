/**
 * NVIDIA's DCGM exporter in the stack: a DaemonSet that lands on the GPU nodes only (the GPU
 * class label required, the GPU taint tolerated), runs an image pinned by digest, takes no GPU
 * of the node's and no privilege, and serves the port the stack's scrape job reads (the job
 * itself: test/observability/stack-checks.ts, which every stack suite runs).
 */
import { DaemonSet } from "kubernetes-models/apps/v1";
import { beforeAll, describe, expect, it } from "vitest";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { IMAGES } from "../../infra/images";
import { LABELS } from "../../infra/names";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

describe("the DCGM exporter", () => {
  let rs: CapturedResource[];
  let ds: O;
  beforeAll(async () => {
    rs = await captureStack("prod");
    ds = rs.find((r) => r.type === "kubernetes:apps/v1:DaemonSet" && (r.props as O).metadata.name === "dcgm-exporter")!.props as O;
  });

  it("schedules on GPU nodes only: the GPU class label required, the GPU taint tolerated", () => {
    const pod = ds.spec.template.spec;
    expect(pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([{ matchExpressions: [{ key: LABELS.gpuClass, operator: "Exists" }] }]);
    expect(pod.tolerations).toEqual([{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }]);
    expect(pod.nodeSelector).toBeUndefined();
    // The GPU node groups carry that label (and the system nodes do not).
    const groups = rs.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup").map((r) => (r.props as O).labels ?? {});
    expect(groups.filter((l) => l[LABELS.gpuClass] !== undefined).length).toBeGreaterThan(0);
    expect(groups.filter((l) => l["llm-ha.io/node-role"] === "system").every((l) => l[LABELS.gpuClass] === undefined)).toBe(true);
  });

  it("runs its image pinned by digest, takes no GPU and no privilege, serves :9400 as port metrics", () => {
    const [c] = ds.spec.template.spec.containers as O[];
    expect(c.image).toMatch(new RegExp(`^${IMAGES.dcgmExporter.repository.replace(/\./g, "\\.")}@sha256:[0-9a-f]{64}$`));
    expect(c.resources.limits?.["nvidia.com/gpu"]).toBeUndefined();
    expect(c.resources.requests?.["nvidia.com/gpu"]).toBeUndefined();
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
    expect(c.securityContext.privileged).toBeUndefined();
    expect(c.ports).toEqual([{ name: "metrics", containerPort: 9400, protocol: "TCP" }]);
    expect(ds.metadata.namespace).toBe("kube-system");
    expect(ds.spec.template.spec.automountServiceAccountToken).toBe(false);
    new DaemonSet(ds).validate();
  });

  it("is refused by the pack once its image goes by tag (images-by-digest)", async () => {
    const broken = structuredClone(rs);
    const d = broken.find((r) => (r.props as O).metadata?.name === "dcgm-exporter" && r.type === "kubernetes:apps/v1:DaemonSet")!;
    (d.props as O).spec.template.spec.containers[0].image = `${IMAGES.dcgmExporter.repository}:${IMAGES.dcgmExporter.tag}`;
    expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([["images-by-digest", d.urn]]);
  });
});
