import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { nodeRoleOf } from "./cluster";
import type { GpuClassConfig } from "./config";
import { ec2NodeClassManifest, nodeClassName, nodePoolManifest, placeholderDeployment, placeholderPriorityClass, type KarpenterPlan } from "./karpenter";
import { tagged } from "./tags";

export interface KarpenterArgs {
  clusterName: string;
  region: string;
  provider: k8s.Provider;
  plan: KarpenterPlan;
  gpuClasses: GpuClassConfig[];
  /** An EC2NodeClass the operator runs, adopted by name; absent: one per GPU class is created. */
  nodeClass?: string;
  /** The created classes' node role, by name (one Karpenter may pass); absent: the stack creates one with an access entry. */
  nodeRole?: string;
  amiAlias: string;
  /** The private subnets of every AZ (each pool's zone requirement picks its AZ's). */
  subnetIds: string[];
  /** The GPU nodes' fence (infra/fences.ts). */
  securityGroupId: pulumi.Input<string>;
}

/**
 * The Karpenter objects of an existing cluster's GPU capacity: the EC2NodeClasses (unless one is
 * adopted) with their node role, and the NodePools. Standby and fallback pools are created
 * asleep (`nvidia.com/gpu: "0"`) and their `spec.limits` ignored afterwards: the leader raises
 * and lowers them at run time (wake, release, practice wake, the schedule), and a `pulumi up`
 * in the middle of a wake must not put a woken standby back to zero under live traffic.
 */
export class Karpenter extends pulumi.ComponentResource {
  readonly nodePools: k8s.apiextensions.CustomResource[];

  constructor(name: string, a: KarpenterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Karpenter", name, {}, opts);
    const k8sOpts = { parent: this, provider: a.provider };
    const classes: pulumi.Resource[] = [];
    if (a.nodeClass === undefined) {
      let roleName: pulumi.Input<string>;
      if (a.nodeRole !== undefined) roleName = a.nodeRole;
      else {
        // kubelet and image pulls only, as the node groups' GPU role; an access entry lets its nodes join.
        const role = nodeRoleOf(`${name}-gpu-node`, { clusterName: a.clusterName, region: a.region }, this);
        classes.push(new aws.eks.AccessEntry(`${name}-gpu-node`, { clusterName: a.clusterName, principalArn: role.role.arn, type: "EC2_LINUX", tags: tagged() }, { parent: this, dependsOn: role.attachments }));
        roleName = role.role.name;
      }
      for (const g of a.gpuClasses) {
        const manifest = ec2NodeClassManifest({
          name: nodeClassName(g.name),
          role: roleName,
          amiAlias: a.amiAlias,
          subnetIds: a.subnetIds,
          securityGroupId: a.securityGroupId,
          reservations: Object.values(g.capacityReservations),
          clusterName: a.clusterName,
        });
        classes.push(new k8s.apiextensions.CustomResource(`${name}-class-${g.name}`, manifest, { ...k8sOpts, dependsOn: [...classes] }));
      }
    }
    this.nodePools = a.plan.pools.map(
      (p) =>
        new k8s.apiextensions.CustomResource(`${name}-${p.name}`, nodePoolManifest(p), {
          ...k8sOpts,
          dependsOn: classes,
          // The leader owns a sleeping pool's limit (see the class comment): never reset by pulumi up.
          ...(p.role !== "active" ? { ignoreChanges: ["spec.limits"] } : {}),
        }),
    );
    this.registerOutputs({});
  }
}

/**
 * The standby's placeholder (PriorityClass and Deployment at 0 replicas) in the workloads namespace.
 * Its replicas are the leader's (wake and release scale it), so they are ignored after creation.
 */
export function createPlaceholder(name: string, a: { provider: k8s.Provider; standbyAz: string; gpusPerPod: number; image: pulumi.Input<string>; namespace: k8s.core.v1.Namespace; parent?: pulumi.Resource }): void {
  const opts = { provider: a.provider, ...(a.parent ? { parent: a.parent } : {}) };
  const pc = new k8s.scheduling.v1.PriorityClass(`${name}-priority`, placeholderPriorityClass(), opts);
  new k8s.apps.v1.Deployment(`${name}-placeholder`, placeholderDeployment({ standbyAz: a.standbyAz, gpusPerPod: a.gpusPerPod, image: a.image }), {
    ...opts,
    dependsOn: [a.namespace, pc],
    ignoreChanges: ["spec.replicas"],
    // Zero replicas are ready at once; a wake's pods wait for nodes, which is the leader's to watch.
    customTimeouts: { create: "5m", update: "5m" },
  });
}
