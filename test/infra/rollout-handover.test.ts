/**
 * A stack change of the model revision or the inference image is a rollout, not a fleet-wide
 * rolling update: every inference Deployment keeps its revision annotation and its inference
 * images once it exists (`ignoreChanges`) and carries the handover marker; the stack's wanted
 * revision and image go to the `llm-ha-rollout` ConfigMap the controller reads; the controller
 * may read and patch the inference Deployments and read that ConfigMap, in the inference
 * namespace only.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { WORKLOADS_NAMESPACE } from "../../infra/names";
import { pulumiRolloutId } from "../../contracts/rollout-kube";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const inference = (rs: CapturedResource[]) => rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "inference");

describe("the rollout handover (prod, as built)", () => {
  let rs: CapturedResource[];
  beforeAll(async () => {
    rs = await captureStack("prod");
  }, 60_000);

  it("keeps each inference Deployment's revision and inference images once it exists, and marks it so", () => {
    const deps = inference(rs);
    expect(deps.length).toBeGreaterThanOrEqual(2);
    for (const d of deps) {
      const p = d.props as O;
      expect(p.metadata.annotations["llm-ha.io/rollout"]).toBe("handover");
      const rev = p.spec.template.metadata.annotations["llm-ha.io/model-revision"];
      expect(rev).toMatch(/^s3:\/\//);
      const image = p.spec.template.spec.containers[0].image;
      // vllm, own-dirs and clear-drain run the inference image (prod streams: no fetcher).
      expect(d.opts.ignoreChanges).toEqual([
        'spec.template.metadata.annotations["llm-ha.io/model-revision"]',
        "spec.template.spec.containers[0].image",
        "spec.template.spec.initContainers[0].image",
        "spec.template.spec.initContainers[1].image",
      ]);
      expect(p.spec.template.spec.initContainers.map((c: O) => c.image)).toEqual([image, image]);
    }
  });

  it("writes the wanted revision and image to the llm-ha-rollout ConfigMap, with an id of both", () => {
    const cms = rs.filter((r) => r.type === "kubernetes:core/v1:ConfigMap" && (r.props as O).metadata.name === "llm-ha-rollout");
    expect(cms).toHaveLength(1);
    const p = cms[0].props as O;
    expect(p.metadata.namespace).toBe(WORKLOADS_NAMESPACE);
    const d = inference(rs)[0].props as O;
    const revision = d.spec.template.metadata.annotations["llm-ha.io/model-revision"];
    const image = d.spec.template.spec.containers[0].image;
    expect(p.data).toEqual({ id: pulumiRolloutId(revision, image), "to.revision": revision, "to.image": image, by: "pulumi" });
    expect(p.data.id).toMatch(/^pulumi-[0-9a-f]{12}$/);
  });

  it("lets the controller list, read and patch the inference Deployments and read the ConfigMap, in the inference namespace only", () => {
    const role = rs.find((r) => r.type === "kubernetes:rbac.authorization.k8s.io/v1:Role" && (r.props as O).metadata.name === "llm-ha-controller-rollout")!.props as O;
    expect(role.metadata.namespace).toBe(WORKLOADS_NAMESPACE);
    const names = inference(rs).map((d) => (d.props as O).metadata.name).sort();
    expect(role.rules).toEqual([
      { apiGroups: ["apps"], resources: ["deployments"], verbs: ["list"] },
      { apiGroups: ["apps"], resources: ["deployments"], resourceNames: names, verbs: ["get", "patch"] },
      { apiGroups: [""], resources: ["configmaps"], resourceNames: ["llm-ha-rollout"], verbs: ["get"] },
    ]);
    const binding = rs.find((r) => r.type === "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding" && (r.props as O).metadata.name === "llm-ha-controller-rollout")!.props as O;
    expect(binding.metadata.namespace).toBe(WORKLOADS_NAMESPACE);
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "llm-ha-controller", namespace: `${WORKLOADS_NAMESPACE}-edge` }]);
    // Nothing of the rollout's cluster-wide: the ClusterRole has no Deployment or ConfigMap rule.
    const cluster = rs.filter((r) => r.type === "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole" && (r.props as O).metadata.name === "llm-ha-controller-nodes").map((r) => r.props as O);
    expect(JSON.stringify(cluster)).not.toMatch(/deployments|configmaps/);
    // The controller is told that namespace (its rollout actuator and the ConfigMap read).
    const ctl = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.name === "llm-ha-controller")!.props as O;
    const env = Object.fromEntries((ctl.spec.template.spec.containers[0].env as O[]).map((e) => [e.name, e.value]));
    expect(env.LLMHA_ROLLOUT_NAMESPACE).toBe(WORKLOADS_NAMESPACE);
  });
});
