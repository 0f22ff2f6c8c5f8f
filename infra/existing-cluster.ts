import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { ExistingClusterConfig } from "./config";
import { kubeconfigText, type ClusterAccess } from "./cluster";

/** One AZ of an existing cluster's VPC: its private subnets and the public subnet of its NLB. */
export interface ExistingAz {
  az: string;
  privateSubnetIds: string[];
  publicSubnetId: string;
  /** The public subnet's CIDR: the NLB's health checks come from there (the L1 NetworkPolicy). */
  publicCidr: string;
}

/** What the stack reads of an existing cluster at `pulumi up` (given in the stack file, else discovered). */
export interface DiscoveredCluster {
  name: string;
  endpoint: string;
  certificateAuthority: string;
  /** The ServiceAccount issuer (`https://oidc.eks.<region>.amazonaws.com/id/…`). */
  oidcIssuer: string;
  /** Its IAM OIDC provider (IRSA): given, or found by the issuer's URL. */
  oidcProvider: { arn: string; url: string };
  vpcId: string;
  vpcCidr: string;
  /** EKS's cluster security group (control plane and managed nodes). */
  clusterSecurityGroupId: string;
  /** The cluster's Kubernetes version. */
  version: string;
  azs: ExistingAz[];
}

/** A discovery that found nothing to run on: named, with the setting that gives it by hand. */
export class DiscoveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DiscoveryError";
  }
}

/** The load balancer controller's subnet role tags: what the discovery picks subnets by. */
export const SUBNET_ROLE_TAGS = Object.freeze({ private: "kubernetes.io/role/internal-elb", public: "kubernetes.io/role/elb" });

/**
 * Reads the existing cluster (`aws.eks.getCluster`), its OIDC provider and VPC, and per AZ its
 * subnets, preferring what the stack file gives. Invokes, so `pulumi preview` reads them too and
 * the offline runs answer them with their mocks.
 */
export async function discoverCluster(e: ExistingClusterConfig, azs: string[]): Promise<DiscoveredCluster> {
  const cluster = await aws.eks.getCluster({ name: e.name });
  const oidcIssuer = cluster.identities[0]?.oidcs?.[0]?.issuer ?? "";
  if (!oidcIssuer) throw new DiscoveryError(`llm-ha:existingCluster.name: cluster ${e.name} has no OIDC issuer (aws eks describe-cluster --name ${e.name})`);
  const url = oidcIssuer.replace(/^https:\/\//, "");
  const oidcArn = e.oidcProviderArn ?? (await aws.iam.getOpenIdConnectProvider({ url: oidcIssuer })).arn;
  const vpcId = e.vpcId ?? cluster.vpcConfig.vpcId;
  const vpc = await aws.ec2.getVpc({ id: vpcId });
  const found: ExistingAz[] = [];
  for (const az of azs) {
    const given = e.subnets?.[az];
    const byRole = async (role: keyof typeof SUBNET_ROLE_TAGS) =>
      (await aws.ec2.getSubnets({ filters: [{ name: "vpc-id", values: [vpcId] }, { name: "availability-zone", values: [az] }, { name: `tag:${SUBNET_ROLE_TAGS[role]}`, values: ["1"] }] })).ids;
    const privateSubnetIds = given?.private ?? (await byRole("private"));
    const publicIds = given ? [given.public] : await byRole("public");
    if (privateSubnetIds.length === 0 || publicIds.length === 0) {
      const missing = privateSubnetIds.length === 0 ? `private (tag ${SUBNET_ROLE_TAGS.private}=1)` : `public (tag ${SUBNET_ROLE_TAGS.public}=1)`;
      throw new DiscoveryError(`llm-ha:existingCluster.subnets.${az}: no ${missing} subnet of ${vpcId} in ${az}: tag one, or give llm-ha:existingCluster.subnets`);
    }
    const publicSubnet = await aws.ec2.getSubnet({ id: publicIds[0] });
    found.push({ az, privateSubnetIds, publicSubnetId: publicIds[0], publicCidr: publicSubnet.cidrBlock });
  }
  return {
    name: e.name,
    endpoint: cluster.endpoint,
    certificateAuthority: cluster.certificateAuthorities[0]?.data ?? "",
    oidcIssuer,
    oidcProvider: { arn: oidcArn, url },
    vpcId,
    vpcCidr: vpc.cidrBlock,
    clusterSecurityGroupId: cluster.vpcConfig.clusterSecurityGroupId,
    version: cluster.version,
    azs: found,
  };
}

/** A kubeconfig for the existing cluster through `aws eks get-token`, as the identity the program runs with (no static credentials). */
export function existingKubeconfig(d: DiscoveredCluster, region: string, access: Pick<ClusterAccess, "kubeconfigRoleArn" | "awsProfile">): string {
  return kubeconfigText(d.name, d.endpoint, d.certificateAuthority, region, access);
}

/**
 * The Kubernetes provider of a cluster the stack does not own. Nothing of the cluster itself is
 * registered (no `aws:eks/cluster:Cluster`, no VPC, no node groups): the operator keeps them.
 */
export class ExistingCluster extends pulumi.ComponentResource {
  readonly provider: k8s.Provider;
  readonly kubeconfig: pulumi.Output<string>;

  constructor(name: string, args: { cluster: DiscoveredCluster; region: string; access: ClusterAccess }, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:ExistingCluster", name, {}, opts);
    this.kubeconfig = pulumi.secret(existingKubeconfig(args.cluster, args.region, args.access));
    this.provider = new k8s.Provider(`${name}-k8s`, { kubeconfig: this.kubeconfig, enableServerSideApply: true }, { parent: this });
    this.registerOutputs({ kubeconfig: this.kubeconfig });
  }
}
