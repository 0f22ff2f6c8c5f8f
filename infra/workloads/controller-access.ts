import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { APP } from "../names";
import { CONTROLLER_SERVICE_ACCOUNT, controllerNodeReader } from "./controller";
import type { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "./common";
import { ROLLOUT_CONFIGMAP } from "../../contracts/rollout-kube";

export interface ControllerAccessArgs {
  /** The controller's namespace (the edge namespace). */
  namespace: string;
  /** The actuator's IAM role (IRSA), when the leader acts on AWS. */
  roleArn?: pulumi.Input<string>;
  /** Node identities: the ClusterRole also reads the ServiceAccount issuer's keys. */
  identities: boolean;
  /** The repair ladder acts (`LLMHA_REPAIR_MODE=act`): the inference pods' namespace it drains and restarts in. Default none (advise: no write). */
  repairNamespace?: string;
  /** The Karpenter engine: the pools the leader wakes and releases, and its placeholder Deployment's name in `namespace` (the inference namespace). */
  karpenter?: { pools: string[]; placeholder?: string; namespace: string };
  /** The model and engine rollout (always on): the inference namespace and its inference Deployments' names. */
  rollout?: { namespace: string; deployments: string[] };
}

/**
 * What the rollout actuator may do, in the inference namespace only: list the Deployments (to
 * find an AZ's by label), read and patch the inference Deployments by name (their pod
 * template's image and revision annotation), and read the `llm-ha-rollout` ConfigMap (the
 * stack's wanted revision). No create, no delete, nothing in another namespace.
 */
export function controllerRolloutAccess(workloadsNamespace: string, controllerNamespace: string, deployments: string[]): { role: Role; binding: RoleBinding } {
  const name = "llm-ha-controller-rollout";
  const labels = { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    role: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace: workloadsNamespace, labels },
      rules: [
        { apiGroups: ["apps"], resources: ["deployments"], verbs: ["list"] },
        { apiGroups: ["apps"], resources: ["deployments"], resourceNames: [...deployments].sort(), verbs: ["get", "patch"] },
        { apiGroups: [""], resources: ["configmaps"], resourceNames: [ROLLOUT_CONFIGMAP], verbs: ["get"] },
      ],
    },
    binding: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name, namespace: workloadsNamespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: controllerNamespace }],
    },
  };
}

/**
 * What the Karpenter engine may do (cluster-scoped, as NodePools and NodeClaims are): read and
 * merge-patch the standby and fallback NodePools by name (their `spec.limits`), list NodePools,
 * and read, list and delete NodeClaims (release: Karpenter drains and terminates their nodes).
 * NodeClaims are named by Karpenter, so their verbs cannot be narrowed by name.
 */
export function controllerKarpenterAccess(controllerNamespace: string, pools: string[]): { clusterRole: ClusterRole; binding: ClusterRoleBinding } {
  const name = "llm-ha-controller-karpenter";
  const labels = { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    clusterRole: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name, labels },
      rules: [
        { apiGroups: ["karpenter.sh"], resources: ["nodepools"], resourceNames: [...pools].sort(), verbs: ["get", "patch"] },
        { apiGroups: ["karpenter.sh"], resources: ["nodepools"], verbs: ["list"] },
        { apiGroups: ["karpenter.sh"], resources: ["nodeclaims"], verbs: ["get", "list", "delete"] },
      ],
    },
    binding: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects: [{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: controllerNamespace }],
    },
  };
}

/** The placeholder's scale (wake and release), by name, in its namespace: nothing else of any Deployment. */
export function controllerPlaceholderAccess(placeholderNamespace: string, placeholder: string, controllerNamespace: string): { role: Role; binding: RoleBinding } {
  const name = "llm-ha-controller-placeholder";
  const labels = { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    role: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace: placeholderNamespace, labels },
      rules: [{ apiGroups: ["apps"], resources: ["deployments/scale"], resourceNames: [placeholder], verbs: ["get", "patch"] }],
    },
    binding: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name, namespace: placeholderNamespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: controllerNamespace }],
    },
  };
}

/**
 * What the repair ladder's `act` mode may do to pods, in the inference namespace only: list
 * them on a node, evict them (`create` on `pods/eviction`: the API server honours
 * PodDisruptionBudgets) and delete an inference pod (its controller recreates it).
 */
export function controllerRepairAccess(workloadsNamespace: string, controllerNamespace: string): { role: Role; binding: RoleBinding } {
  const name = "llm-ha-controller-repair";
  const labels = { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
  return {
    role: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace: workloadsNamespace, labels },
      rules: [
        { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "delete"] },
        { apiGroups: [""], resources: ["pods/eviction"], verbs: ["create"] },
      ],
    },
    binding: {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name, namespace: workloadsNamespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace: controllerNamespace }],
    },
  };
}

/**
 * The controller's ServiceAccount (the cloud role, IRSA, when it acts) and its read of the
 * Kubernetes API, always: the GPU Nodes (its inventory) and, with node identities, the issuer's
 * keys. Returns what the controller Deployment must wait for.
 */
export function createControllerAccess(
  name: string,
  a: ControllerAccessArgs,
  opts: pulumi.CustomResourceOptions,
  inNamespace: pulumi.CustomResourceOptions,
  /** Options of objects in the inference namespace (depending on that Namespace: the repair and rollout Roles live there). */
  inWorkloads: pulumi.CustomResourceOptions = opts,
): pulumi.Resource[] {
  const after = (r: pulumi.Resource): pulumi.CustomResourceOptions => ({ ...inWorkloads, dependsOn: [...dependsOnList(inWorkloads), r] });
  const sa = new k8s.core.v1.ServiceAccount(
    `${name}-controller`,
    {
      metadata: {
        name: CONTROLLER_SERVICE_ACCOUNT,
        namespace: a.namespace,
        labels: { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" },
        ...(a.roleArn !== undefined ? { annotations: { "eks.amazonaws.com/role-arn": a.roleArn } } : {}),
      },
    },
    inNamespace,
  );
  const reader = controllerNodeReader(a.namespace, a.identities, a.repairNamespace !== undefined);
  const role = new k8s.rbac.v1.ClusterRole(`${name}-controller-nodes`, reader.clusterRole, opts);
  const out: pulumi.Resource[] = [sa, new k8s.rbac.v1.ClusterRoleBinding(`${name}-controller-nodes`, reader.binding, { ...opts, dependsOn: [role] })];
  if (a.repairNamespace !== undefined) {
    const repair = controllerRepairAccess(a.repairNamespace, a.namespace);
    const r = new k8s.rbac.v1.Role(`${name}-controller-repair`, repair.role, inWorkloads);
    out.push(r, new k8s.rbac.v1.RoleBinding(`${name}-controller-repair`, repair.binding, after(r)));
  }
  if (a.karpenter !== undefined) {
    const kp = controllerKarpenterAccess(a.namespace, a.karpenter.pools);
    const cr = new k8s.rbac.v1.ClusterRole(`${name}-controller-karpenter`, kp.clusterRole, opts);
    out.push(cr, new k8s.rbac.v1.ClusterRoleBinding(`${name}-controller-karpenter`, kp.binding, { ...opts, dependsOn: [cr] }));
    if (a.karpenter.placeholder !== undefined) {
      const ph = controllerPlaceholderAccess(a.karpenter.namespace, a.karpenter.placeholder, a.namespace);
      const r = new k8s.rbac.v1.Role(`${name}-controller-placeholder`, ph.role, inWorkloads);
      out.push(r, new k8s.rbac.v1.RoleBinding(`${name}-controller-placeholder`, ph.binding, after(r)));
    }
  }
  if (a.rollout !== undefined) {
    const rollout = controllerRolloutAccess(a.rollout.namespace, a.namespace, a.rollout.deployments);
    const r = new k8s.rbac.v1.Role(`${name}-controller-rollout`, rollout.role, inWorkloads);
    out.push(r, new k8s.rbac.v1.RoleBinding(`${name}-controller-rollout`, rollout.binding, after(r)));
  }
  return out;
}

function dependsOnList(o: pulumi.CustomResourceOptions): pulumi.Input<pulumi.Resource>[] {
  const d = o.dependsOn;
  if (d === undefined) return [];
  return Array.isArray(d) ? d : [d as pulumi.Input<pulumi.Resource>];
}
