import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { DEFAULT_EKS_VERSION } from "../contracts/eks-versions";
import type { ApiEndpointConfig } from "./config";
import { createAddons, type AddonName } from "./addons";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface ClusterArgs {
  /** EKS cluster name. Required. */
  clusterName: string;
  /** Region, for the kubeconfig's `aws eks get-token`. Required. */
  region: string;
  /** Private subnets (one per AZ) for the control plane ENIs and the system nodes. Required. */
  privateSubnetIds: pulumi.Input<string>[];
  /** Kubernetes version (in standard support: contracts/eks-versions.ts). Default `DEFAULT_EKS_VERSION`. */
  version?: string;
  /** How `pulumi up` and kubectl reach the API: public to listed CIDRs, or private to in-VPC runners. Required. */
  apiEndpoint: ApiEndpointConfig;
  /** Managed add-on versions over `ADDON_VERSIONS`. Default none. */
  addonVersions?: Partial<Record<AddonName, string>>;
  /** System node group (HAProxy, CoreDNS, controllers) instance type. Default `m6i.large`. */
  systemInstanceType?: string;
  /** System nodes; at least one per AZ so each AZ's HAProxy has a home. Default 3. */
  systemDesiredSize?: number;
  /** Default twice `systemDesiredSize`. */
  systemMaxSize?: number;
}

/** Assume-role policy for an AWS service principal. */
export function trustPolicy(service: string): string {
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }],
  });
}

/** A kubeconfig that authenticates through `aws eks get-token` (no static credentials). */
export function kubeconfigFor(cluster: aws.eks.Cluster, region: string): pulumi.Output<string> {
  return pulumi.all([cluster.name, cluster.endpoint, cluster.certificateAuthority]).apply(([name, endpoint, ca]) =>
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name, cluster: { server: endpoint, "certificate-authority-data": ca.data } }],
      contexts: [{ name, context: { cluster: name, user: name } }],
      "current-context": name,
      users: [
        {
          name,
          user: {
            exec: {
              apiVersion: "client.authentication.k8s.io/v1beta1",
              command: "aws",
              args: ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"],
            },
          },
        },
      ],
    }),
  );
}

/**
 * EKS control plane (all control-plane logs, secrets encrypted with KMS, API access
 * entries), its OIDC provider for IRSA, the node IAM role every node group shares, a
 * small system node group and a Kubernetes provider bound to the cluster.
 */
export class Cluster extends pulumi.ComponentResource {
  readonly cluster: aws.eks.Cluster;
  readonly nodeRole: aws.iam.Role;
  readonly oidcProvider: aws.iam.OpenIdConnectProvider;
  readonly provider: k8s.Provider;
  readonly kubeconfig: pulumi.Output<string>;
  /** The system node group (controllers, HAProxy, CoreDNS run there). */
  readonly systemNodes: aws.eks.NodeGroup;
  /** The managed add-ons, pinned. */
  readonly addons: aws.eks.Addon[];
  /** The security group EKS attaches to the control plane and managed nodes. */
  readonly nodeSecurityGroupId: pulumi.Output<string>;

  constructor(name: string, args: ClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Cluster", name, {}, opts);
    const r = createCluster(name, args, this);
    this.cluster = r.cluster;
    this.nodeRole = r.nodeRole;
    this.oidcProvider = r.oidcProvider;
    this.provider = r.provider;
    this.systemNodes = r.systemNodes;
    this.addons = r.addons;
    this.kubeconfig = pulumi.secret(r.kubeconfig);
    this.nodeSecurityGroupId = r.cluster.vpcConfig.clusterSecurityGroupId;
    this.registerOutputs({ clusterName: this.cluster.name, kubeconfig: this.kubeconfig });
  }
}

export function createCluster(name: string, args: ClusterArgs, parent: pulumi.Resource) {
  const p = new Problems();
  if (args.privateSubnetIds.length < 2) p.add("privateSubnetIds", "EKS needs subnets in at least 2 AZs");
  const desired = args.systemDesiredSize ?? 3;
  const max = args.systemMaxSize ?? desired * 2;
  if (desired < 1 || max < desired) p.add("systemMaxSize", "must be ≥ systemDesiredSize ≥ 1");
  const api = args.apiEndpoint;
  const cidrs = api.access === "public" ? api.publicAccessCidrs : api.runnerCidrs;
  if (cidrs.length === 0) p.add(`apiEndpoint.${api.access === "public" ? "publicAccessCidrs" : "runnerCidrs"}`, "needs at least one CIDR");
  if (cidrs.some((c) => c.endsWith("/0"))) p.add("apiEndpoint", "0.0.0.0/0 opens the Kubernetes API to the internet");
  p.throwIfAny("Cluster arguments");
  const opts = { parent };

  const clusterRole = new aws.iam.Role(`${name}-cluster-role`, { assumeRolePolicy: trustPolicy("eks.amazonaws.com"), tags: tagged() }, opts);
  new aws.iam.RolePolicyAttachment(`${name}-cluster-policy`, { role: clusterRole.name, policyArn: aws.iam.ManagedPolicy.AmazonEKSClusterPolicy }, opts);

  // Nodes get only what kubelet, the VPC CNI and image pulls need; the agent talks to
  // IMDS and Redis, never to AWS APIs.
  const nodeRole = new aws.iam.Role(`${name}-node-role`, { assumeRolePolicy: trustPolicy("ec2.amazonaws.com"), tags: tagged() }, opts);
  const nodePolicies = {
    worker: aws.iam.ManagedPolicy.AmazonEKSWorkerNodePolicy,
    cni: aws.iam.ManagedPolicy.AmazonEKS_CNI_Policy,
    ecr: aws.iam.ManagedPolicy.AmazonEC2ContainerRegistryReadOnly,
  };
  const nodeAttachments = Object.entries(nodePolicies).map(
    ([role, arn]) => new aws.iam.RolePolicyAttachment(`${name}-node-${role}`, { role: nodeRole.name, policyArn: arn }, opts),
  );

  const secretsKey = new aws.kms.Key(`${name}-secrets`, { description: `${args.clusterName} Kubernetes secrets`, enableKeyRotation: true, tags: tagged() }, opts);
  const cluster = new aws.eks.Cluster(
    `${name}-eks`,
    {
      name: args.clusterName,
      version: args.version ?? DEFAULT_EKS_VERSION,
      // At the end of standard support EKS upgrades the control plane instead of billing
      // extended support; the policy pack refuses a version already past it.
      upgradePolicy: { supportType: "STANDARD" },
      roleArn: clusterRole.arn,
      vpcConfig: {
        subnetIds: args.privateSubnetIds,
        endpointPrivateAccess: true,
        endpointPublicAccess: api.access === "public",
        publicAccessCidrs: api.access === "public" ? api.publicAccessCidrs : undefined,
      },
      accessConfig: { authenticationMode: "API", bootstrapClusterCreatorAdminPermissions: true },
      enabledClusterLogTypes: ["api", "audit", "authenticator", "controllerManager", "scheduler"],
      encryptionConfig: { resources: ["secrets"], provider: { keyArn: secretsKey.arn } },
      tags: tagged(),
    },
    opts,
  );

  const oidcProvider = new aws.iam.OpenIdConnectProvider(
    `${name}-oidc`,
    { url: cluster.identities.apply((ids) => ids[0].oidcs?.[0]?.issuer ?? ""), clientIdLists: ["sts.amazonaws.com"], tags: tagged() },
    opts,
  );

  const addons = createAddons(
    `${name}-addon`,
    { clusterName: cluster.name, oidcProviderArn: oidcProvider.arn, oidcProviderUrl: oidcProvider.url, versions: args.addonVersions },
    parent,
  );

  const systemNodes = new aws.eks.NodeGroup(
    `${name}-system`,
    {
      clusterName: cluster.name,
      nodeRoleArn: nodeRole.arn,
      subnetIds: args.privateSubnetIds,
      instanceTypes: [args.systemInstanceType ?? "m6i.large"],
      amiType: "AL2023_x86_64_STANDARD",
      labels: { "llm-ha.io/node-role": "system" },
      scalingConfig: { minSize: desired, desiredSize: desired, maxSize: max },
      updateConfig: { maxUnavailable: 1 },
      tags: tagged(),
    },
    { parent, dependsOn: [...nodeAttachments, ...addons.network], ignoreChanges: ["scalingConfig.desiredSize"] },
  );
  const allAddons = [...addons.network, ...addons.afterNodes(systemNodes)];

  // Private endpoint: the runner (in the VPC, or routed to it over VPN / peering / TGW) reaches :443.
  if (api.access === "private") {
    api.runnerCidrs.forEach(
      (cidr, i) =>
        new aws.vpc.SecurityGroupIngressRule(
          `${name}-api-runner-${i}`,
          {
            securityGroupId: cluster.vpcConfig.clusterSecurityGroupId,
            cidrIpv4: cidr,
            ipProtocol: "tcp",
            fromPort: 443,
            toPort: 443,
            description: "pulumi up / kubectl from the in-VPC runner to the private API endpoint",
            tags: tagged(),
          },
          opts,
        ),
    );
  }

  const kubeconfig = kubeconfigFor(cluster, args.region);
  const provider = new k8s.Provider(`${name}-k8s`, { kubeconfig, enableServerSideApply: true }, opts);
  return { cluster, nodeRole, nodeAttachments, oidcProvider, provider, kubeconfig, systemNodes, addons: allAddons };
}
