import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Cluster } from "./cluster";
import type { StackConfig } from "./config";
import { discoverCluster, ExistingCluster, type DiscoveredCluster } from "./existing-cluster";
import { Network, publicSubnetCidrs } from "./network";

/**
 * What the runtime is deployed on: the stack's own VPC and EKS cluster, or an existing cluster
 * (`llm-ha:existingCluster`) read at `pulumi up`. Everything after it (fences, Redis, MSK, IAM,
 * the workloads, DNS) is the same in both modes.
 */
export interface Foundation {
  clusterName: pulumi.Output<string>;
  provider: k8s.Provider;
  kubeconfig: pulumi.Output<string>;
  /** The IAM OIDC provider of the cluster's issuer (IRSA): `url` without the scheme. */
  oidcProvider: { arn: pulumi.Input<string>; url: pulumi.Input<string> };
  oidcIssuer: pulumi.Input<string>;
  vpcId: pulumi.Input<string>;
  vpcCidr: string;
  /** EKS's cluster security group. */
  clusterSecurityGroupId: pulumi.Input<string>;
  /** Private subnets of every AZ (Redis, MSK). */
  privateSubnetIds: pulumi.Input<string>[];
  /** Per AZ, in `llm-ha:azs` order: its private subnets and its NLB's public subnet. */
  azs: { az: string; privateSubnetIds: pulumi.Input<string>[]; publicSubnetId: pulumi.Input<string> }[];
  /** The NLBs' subnets' CIDRs. */
  nlbCidrs: string[];
  /** The stack's own VPC and cluster; absent on an existing cluster. */
  own?: { network: Network; cluster: Cluster };
  /** What the existing cluster was read as; absent on the stack's own. */
  existing?: DiscoveredCluster;
}

/** The stack's own VPC and EKS cluster (with its system nodes and add-ons). */
export function ownFoundation(c: StackConfig): Foundation {
  const network = new Network("net", { azs: c.azs, cidr: c.vpcCidr, natPerAz: c.natPerAz, clusterName: c.clusterName, region: c.region });
  const cluster = new Cluster("eks", {
    clusterName: c.clusterName,
    region: c.region,
    privateSubnetIds: network.privateSubnetIds,
    systemSubnets: network.subnets.map((s) => ({ az: s.az, subnetId: s.privateSubnet.id })),
    version: c.kubernetesVersion,
    apiEndpoint: c.apiEndpoint,
    access: c.clusterAccess,
    addonVersions: c.addonVersions,
    systemInstanceType: c.system.instanceType,
    systemDesiredSize: c.system.desiredSize,
    systemMaxSize: c.system.maxSize,
  });
  return {
    clusterName: cluster.cluster.name,
    provider: cluster.provider,
    kubeconfig: cluster.kubeconfig,
    oidcProvider: cluster.oidcProvider,
    oidcIssuer: cluster.oidcIssuer,
    vpcId: network.vpc.id,
    vpcCidr: c.vpcCidr,
    clusterSecurityGroupId: cluster.nodeSecurityGroupId,
    privateSubnetIds: network.privateSubnetIds,
    azs: network.subnets.map((s) => ({ az: s.az, privateSubnetIds: [s.privateSubnet.id], publicSubnetId: s.publicSubnet.id })),
    nlbCidrs: publicSubnetCidrs(c.vpcCidr, c.azs.length),
    own: { network, cluster },
  };
}

/** An existing cluster: read (given settings first, then discovery), and a Kubernetes provider for it. Creates no VPC, cluster or node group. */
export async function existingFoundation(c: StackConfig): Promise<Foundation> {
  if (c.existingCluster === undefined) throw new Error("existingFoundation: no llm-ha:existingCluster");
  const d = await discoverCluster(c.existingCluster, c.azs);
  const cluster = new ExistingCluster("byo", { cluster: d, region: c.region, access: c.clusterAccess });
  return {
    clusterName: pulumi.output(d.name),
    provider: cluster.provider,
    kubeconfig: cluster.kubeconfig,
    oidcProvider: d.oidcProvider,
    oidcIssuer: d.oidcIssuer,
    vpcId: d.vpcId,
    vpcCidr: d.vpcCidr,
    clusterSecurityGroupId: d.clusterSecurityGroupId,
    privateSubnetIds: d.azs.flatMap((a) => a.privateSubnetIds),
    azs: d.azs.map((a) => ({ az: a.az, privateSubnetIds: a.privateSubnetIds, publicSubnetId: a.publicSubnetId })),
    nlbCidrs: d.azs.map((a) => a.publicCidr),
    existing: d,
  };
}
