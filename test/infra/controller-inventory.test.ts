/**
 * The controller's read of the GPU Nodes (its inventory): a ClusterRole that may get, list and
 * watch Nodes and nothing else, bound to the controller's ServiceAccount, which the controller
 * pods run as with `LLMHA_INVENTORY=kubernetes` and the stack's GPU label as the selector.
 * Over the prod stack: the role, its binding and the ServiceAccount are shipped even without
 * an actuator, and no other llm-ha workload gets a token.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { controllerRepairAccess } from "../../infra/workloads/controller-access";
import { Deployment } from "kubernetes-models/apps/v1";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { LABELS } from "../../infra/names";
import { CONTROLLER_SERVICE_ACCOUNT, controllerManifests, controllerNodeReader } from "../../infra/workloads/controller";
import { DEFAULT_GPU_SELECTOR } from "../../agent/src/fleet/inventory/inventory";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

describe("the controller's inventory read", () => {
  it("is nodes get/list/watch only, bound to the controller's ServiceAccount; the pods use it with the GPU label", () => {
    const { clusterRole, binding } = controllerNodeReader("llm-ha-edge");
    expect(() => new ClusterRole(clusterRole as never).validate()).not.toThrow();
    expect(() => new ClusterRoleBinding(binding as never).validate()).not.toThrow();
    expect(clusterRole.rules).toEqual([{ apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] }]);
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: "llm-ha-edge" }]);
    const { deployment } = controllerManifests({ namespace: "llm-ha-edge", image: `agent@sha256:${"ab".repeat(32)}`, clusterName: "prod", redisSecretName: "llm-ha-redis", replicas: 3 });
    expect(() => new Deployment(deployment as never).validate()).not.toThrow();
    const pod = (deployment as O).spec.template.spec;
    expect(pod.serviceAccountName).toBe(CONTROLLER_SERVICE_ACCOUNT);
    expect(pod.automountServiceAccountToken).toBe(true);
    const env = Object.fromEntries(pod.containers[0].env.filter((e: O) => "value" in e).map((e: O) => [e.name, e.value]));
    expect(env).toMatchObject({ LLMHA_INVENTORY: "kubernetes", LLMHA_INVENTORY_SELECTOR: LABELS.gpuClass });
    // The agent's default selector is the stack's GPU label.
    expect(DEFAULT_GPU_SELECTOR).toBe(LABELS.gpuClass);
  });

  it("with the repair ladder acting: patch on Nodes (cordon), and pods list/delete/evict in the inference namespace only", () => {
    const { clusterRole } = controllerNodeReader("llm-ha-edge", false, true);
    expect(clusterRole.rules).toEqual([{ apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] }, { apiGroups: [""], resources: ["nodes"], verbs: ["patch"] }]);
    const { role, binding } = controllerRepairAccess("llm-ha", "llm-ha-edge");
    expect(() => new Role(role as never).validate()).not.toThrow();
    expect(() => new RoleBinding(binding as never).validate()).not.toThrow();
    expect((role as O).metadata.namespace).toBe("llm-ha");
    expect((role as O).rules).toEqual([{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "delete"] }, { apiGroups: [""], resources: ["pods/eviction"], verbs: ["create"] }]);
    expect((binding as O).subjects).toEqual([{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: "llm-ha-edge" }]);
  });

  describe("in the prod stack", () => {
    let rs: CapturedResource[];
    beforeAll(async () => {
      rs = await captureStack("prod");
    });
    it("ships the role, its binding and the ServiceAccount; only the controller mounts a token", () => {
      const roles = ofType(rs, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").map((r) => r.props as O);
      // With node identities (the default) also the issuer's keys, to verify enrolments (test/infra/node-identities.test.ts).
      expect(roles.find((r) => r.metadata.name === "llm-ha-controller-nodes")?.rules).toEqual([
        { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
        { nonResourceURLs: ["/openid/v1/jwks", "/.well-known/openid-configuration"], verbs: ["get"] },
      ]);
      const binding = ofType(rs, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").map((r) => r.props as O).find((b) => b.metadata.name === "llm-ha-controller-nodes");
      const sa = ofType(rs, "kubernetes:core/v1:ServiceAccount").map((r) => r.props as O).find((s) => s.metadata.name === CONTROLLER_SERVICE_ACCOUNT);
      expect(sa).toBeDefined();
      expect(binding?.subjects).toEqual([{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: sa!.metadata.namespace }]);
      const withToken = ofType(rs, "kubernetes:apps/v1:Deployment").concat(ofType(rs, "kubernetes:apps/v1:DaemonSet"))
        .map((r) => r.props as O)
        .filter((w) => String(w.metadata.namespace ?? "").startsWith("llm-ha") && w.spec.template.spec.automountServiceAccountToken !== false)
        .map((w) => w.metadata.name);
      expect(withToken).toEqual(["llm-ha-controller"]);
    });
  });
});
