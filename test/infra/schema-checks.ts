/**
 * Every Kubernetes object the stack registers, validated against the Kubernetes schemas
 * (`kubernetes-models@4`); the custom resources by their own shape. Called inside
 * `describeStack`, so it runs for dev, staging and prod.
 */
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { expect, it } from "vitest";
import { operatorObject } from "../observability/stack-checks";
import type { CapturedResource, Env } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const KINDS: Record<string, (o: O) => { validate(): void }> = {
  "kubernetes:apps/v1:Deployment": (o) => new Deployment(o),
  "kubernetes:apps/v1:DaemonSet": (o) => new DaemonSet(o),
  "kubernetes:core/v1:Service": (o) => new Service(o),
  "kubernetes:core/v1:ConfigMap": (o) => new ConfigMap(o),
  "kubernetes:core/v1:Secret": (o) => new Secret(o),
  "kubernetes:core/v1:Namespace": (o) => new Namespace(o),
  "kubernetes:core/v1:ServiceAccount": (o) => new ServiceAccount(o),
  "kubernetes:policy/v1:PodDisruptionBudget": (o) => new PodDisruptionBudget(o),
  "kubernetes:networking.k8s.io/v1:NetworkPolicy": (o) => new NetworkPolicy(o),
  "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": (o) => new ClusterRole(o),
  "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": (o) => new ClusterRoleBinding(o as never),
  "kubernetes:rbac.authorization.k8s.io/v1:Role": (o) => new Role(o),
  "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": (o) => new RoleBinding(o as never),
  // vpc-cni's CRD (security groups for pods): a selector and the groups.
  "kubernetes:vpcresources.k8s.aws/v1beta1:SecurityGroupPolicy": (o) => ({ validate: () => expect(o.spec).toEqual({ podSelector: { matchLabels: expect.any(Object) }, securityGroups: { groupIds: [expect.any(String)] } }) }),
  "kubernetes:monitoring.coreos.com/v1:PrometheusRule": operatorObject,
  "kubernetes:monitoring.coreos.com/v1:PodMonitor": operatorObject,
  // A Helm release is not an object of the API server; its chart, version and values are checked below.
  "kubernetes:helm.sh/v3:Release": (o) => ({ validate: () => expect(o).toMatchObject({ chart: expect.any(String), version: expect.stringMatching(/^\d+\.\d+\.\d+$/) }) }),
};

export function describeSchemas(_env: Env, resources: () => CapturedResource[]): void {
  it("validates every Kubernetes object against the Kubernetes schemas", () => {
    const objs = resources().filter((r) => r.type.startsWith("kubernetes:"));
    expect(objs.length).toBeGreaterThan(10);
    for (const r of objs) {
      const make = KINDS[r.type];
      expect(make, `validator for ${r.type}`).toBeDefined();
      expect(() => make(r.props as O).validate(), `${r.type} ${r.name}`).not.toThrow();
    }
  });
}
