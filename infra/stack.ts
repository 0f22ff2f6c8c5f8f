import * as pulumi from "@pulumi/pulumi";
import { Cluster } from "./cluster";
import { loadConfig } from "./config";
import { GpuNodeGroups } from "./gpu-node-groups";
import { Network } from "./network";

/** What `pulumi stack output` shows. */
export interface StackOutputs {
  clusterName: pulumi.Output<string>;
  kubeconfig: pulumi.Output<string>;
}

/** Builds the whole stack from the validated stack configuration. */
export function createStack(): StackOutputs {
  const c = loadConfig();
  const network = new Network("net", { azs: c.azs, cidr: c.vpcCidr, natPerAz: c.natPerAz, clusterName: c.clusterName, region: c.region });
  const cluster = new Cluster("eks", {
    clusterName: c.clusterName,
    region: c.region,
    privateSubnetIds: network.privateSubnetIds,
    version: c.kubernetesVersion,
    privateEndpointOnly: c.privateEndpointOnly,
    systemInstanceType: c.system.instanceType,
    systemDesiredSize: c.system.desiredSize,
    systemMaxSize: c.system.maxSize,
  });
  new GpuNodeGroups(
    "gpu",
    {
      clusterName: cluster.cluster.name,
      nodeRoleArn: cluster.nodeRole.arn,
      subnets: network.subnets.map((s) => ({ az: s.az, subnetId: s.privateSubnet.id })),
      gpuClasses: c.gpuClasses,
      standbyAz: c.standbyAz,
    },
    { dependsOn: [cluster] },
  );
  return { clusterName: cluster.cluster.name, kubeconfig: cluster.kubeconfig };
}
