import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { APP } from "../names";
import { CONTROLLER_SERVICE_ACCOUNT, controllerNodeReader } from "./controller";

export interface ControllerAccessArgs {
  /** The controller's namespace (the edge namespace). */
  namespace: string;
  /** The actuator's IAM role (IRSA), when the leader acts on AWS. */
  roleArn?: pulumi.Input<string>;
  /** Node identities: the ClusterRole also reads the ServiceAccount issuer's keys. */
  identities: boolean;
}

/**
 * The controller's ServiceAccount (the cloud role, IRSA, when it acts) and its read of the
 * Kubernetes API, always: the GPU Nodes (its inventory) and, with node identities, the issuer's
 * keys. Returns what the controller Deployment must wait for.
 */
export function createControllerAccess(name: string, a: ControllerAccessArgs, opts: pulumi.CustomResourceOptions, inNamespace: pulumi.CustomResourceOptions): pulumi.Resource[] {
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
  const reader = controllerNodeReader(a.namespace, a.identities);
  const role = new k8s.rbac.v1.ClusterRole(`${name}-controller-nodes`, reader.clusterRole, opts);
  return [sa, new k8s.rbac.v1.ClusterRoleBinding(`${name}-controller-nodes`, reader.binding, { ...opts, dependsOn: [role] })];
}
