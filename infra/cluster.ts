import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import { nodePullThroughPolicy } from "./image-cache";
import * as pulumi from "@pulumi/pulumi";
import { DEFAULT_EKS_VERSION } from "../contracts/eks-versions";
import { systemGroupSize, type ApiEndpointConfig } from "./config";
import { createAddons, type AddonName } from "./addons";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface ClusterArgs {
  /** EKS cluster name. Required. */
  clusterName: string;
  /** Region, for the kubeconfig's `aws eks get-token`. Required. */
  region: string;
  /** Private subnets (one per AZ) for the control plane ENIs. Required. */
  privateSubnetIds: pulumi.Input<string>[];
  /** The private subnet of each AZ: one system node group each. Required, one per AZ. */
  systemSubnets: { az: string; subnetId: pulumi.Input<string> }[];
  /** Kubernetes version (in standard support: contracts/eks-versions.ts). Default `DEFAULT_EKS_VERSION`. */
  version?: string;
  /** How `pulumi up` and kubectl reach the API: public to listed CIDRs, or private to in-VPC runners. Required. */
  apiEndpoint: ApiEndpointConfig;
  /** Managed add-on versions to pin; the others are resolved for the cluster's version. Default none. */
  addonVersions?: Partial<Record<AddonName, string>>;
  /** Who reaches the Kubernetes API besides the creator, and how the kubeconfig authenticates. Default: the creator only. */
  access?: ClusterAccess;
  /** System node group (HAProxy, CoreDNS, controllers) instance type. Default `m6i.large`. */
  systemInstanceType?: string;
  /** System nodes in all; split over one group per AZ, at least one node each, so each AZ's HAProxy has a home. Default one per AZ. */
  systemDesiredSize?: number;
  /** In all, split over the AZs like `systemDesiredSize`. Default twice `systemDesiredSize`. */
  systemMaxSize?: number;
}

/** `llm-ha:clusterAdmins`, `llm-ha:kubeconfigRoleArn` and `aws:profile`: who the Kubernetes API lets in. */
export interface ClusterAccess {
  /** IAM principal ARNs (roles, users) that run `pulumi up` or kubectl besides the creator: an access entry each, cluster admin. Default none. */
  admins: string[];
  /** Role the kubeconfig assumes (`aws eks get-token --role-arn`); gets an access entry too. Default none: the caller's own identity. */
  kubeconfigRoleArn?: string;
  /** `aws:profile`: the kubeconfig's `aws eks get-token` runs with the same profile as the program. Default none. */
  awsProfile?: string;
}

/** The cluster role's managed policy for security groups for pods (branch ENIs). */
export const VPC_RESOURCE_CONTROLLER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSVPCResourceController";

/** IMDS of every node: IMDSv2 only, one hop (host-network processes only). */
export const SYSTEM_NODE_METADATA = Object.freeze({ httpEndpoint: "enabled", httpTokens: "required", httpPutResponseHopLimit: 1 });

/**
 * What the cluster role needs on the key that encrypts its Secrets (EKS envelope encryption):
 * without them the control plane cannot wrap or unwrap a Secret's data key, and creating a
 * cluster with `encryptionConfig` fails (or, on a key whose grant went away, every Secret read
 * fails). Given as an inline policy on the cluster role, naming the one key; the key's default
 * policy lets the account's IAM policies grant it.
 */
export const CLUSTER_SECRETS_KMS_ACTIONS = Object.freeze(["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"]);

/** Days the control plane's log group keeps its events (`/aws/eks/<name>/cluster`). */
export const CONTROL_PLANE_LOG_RETENTION_DAYS = 90;

/** EKS's access policy for full cluster access (docs: "Associate access policies with access entries"). */
export const CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy";

/** What every node's role holds: kubelet's (join, describe) and image pulls from ECR. No EC2 network writes (`gpu-node-role-minimal`). */
export const NODE_ROLE_POLICIES = Object.freeze({
  worker: "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
  ecr: "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
});

/**
 * A node role with `NODE_ROLE_POLICIES` and the pull-through cache's right (infra/image-cache.ts).
 * `was`: the logical name the same role had before (its resources are aliased, not replaced).
 */
export function nodeRoleOf(name: string, args: Pick<ClusterArgs, "clusterName" | "region">, parent: pulumi.Resource, was?: string): { role: aws.iam.Role; attachments: pulumi.Resource[] } {
  const aliases = (suffix: string) => (was ? [{ name: `${was}-${suffix}` }] : []);
  const role = new aws.iam.Role(`${name}-role`, { assumeRolePolicy: trustPolicy("ec2.amazonaws.com"), tags: tagged() }, { parent, aliases: aliases("role") });
  const attachments: pulumi.Resource[] = Object.entries(NODE_ROLE_POLICIES).map(
    ([what, arn]) => new aws.iam.RolePolicyAttachment(`${name}-${what}`, { role: role.name, policyArn: arn }, { parent, aliases: aliases(what) }),
  );
  attachments.push(nodePullThroughPolicy(`${name}-pull`, { clusterName: args.clusterName, region: args.region, nodeRoleName: role.name }, parent, aliases("pull")));
  return { role, attachments };
}

/** Assume-role policy for an AWS service principal. */
export function trustPolicy(service: string): string {
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }],
  });
}

/**
 * A kubeconfig that authenticates through `aws eks get-token` (no static credentials), as
 * the identity the program runs with: the same `aws:profile` (`AWS_PROFILE`), or the role
 * the stack gives an access entry (`--role-arn`). Without them, a profile or an assumed role
 * would authenticate the Kubernetes provider as another principal than AWS's: 401 on every
 * Kubernetes resource.
 */
export function kubeconfigFor(cluster: aws.eks.Cluster, region: string, access: Pick<ClusterAccess, "kubeconfigRoleArn" | "awsProfile"> = {}): pulumi.Output<string> {
  return pulumi.all([cluster.name, cluster.endpoint, cluster.certificateAuthority]).apply(([name, endpoint, ca]) => kubeconfigText(name, endpoint, ca.data, region, access));
}

/** The kubeconfig's text for a cluster's name, endpoint and CA (base64), authenticated as `kubeconfigFor` says; the stack's own cluster and an existing one share it. */
export function kubeconfigText(name: string, endpoint: string, caData: string, region: string, access: Pick<ClusterAccess, "kubeconfigRoleArn" | "awsProfile"> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster: { server: endpoint, "certificate-authority-data": caData } }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    "current-context": name,
    users: [
      {
        name,
        user: {
          exec: {
            apiVersion: "client.authentication.k8s.io/v1beta1",
            command: "aws",
            args: ["eks", "get-token", "--cluster-name", name, "--region", region, ...(access.kubeconfigRoleArn ? ["--role-arn", access.kubeconfigRoleArn] : []), "--output", "json"],
            ...(access.awsProfile ? { env: [{ name: "AWS_PROFILE", value: access.awsProfile }] } : {}),
          },
        },
      },
    ],
  });
}

/**
 * EKS control plane (all control-plane logs, secrets encrypted with KMS, API access
 * entries), its OIDC provider for IRSA, the node IAM role every node group shares, a
 * small system node group and a Kubernetes provider bound to the cluster.
 */
export class Cluster extends pulumi.ComponentResource {
  readonly cluster: aws.eks.Cluster;
  /** The system nodes' role. */
  readonly nodeRole: aws.iam.Role;
  /** The GPU nodes' role: kubelet and image pulls only. */
  readonly gpuNodeRole: aws.iam.Role;
  readonly oidcProvider: aws.iam.OpenIdConnectProvider;
  /**
   * The cluster's ServiceAccount issuer (`https://oidc.eks.<region>.amazonaws.com/id/…`, EKS's
   * `identities[0].oidcs[0].issuer`): the `iss` of every projected token, which the controller
   * checks on node enrolments (`LLMHA_IDENTITY_ISSUER`).
   */
  readonly oidcIssuer: pulumi.Output<string>;
  readonly provider: k8s.Provider;
  readonly kubeconfig: pulumi.Output<string>;
  /** The system node groups, one per AZ (controllers, HAProxy, CoreDNS run there). */
  readonly systemNodes: aws.eks.NodeGroup[];
  /** The managed add-ons, pinned. */
  readonly addons: aws.eks.Addon[];
  /** The security group EKS attaches to the control plane and managed nodes. */
  readonly nodeSecurityGroupId: pulumi.Output<string>;
  /**
   * What every node group must wait for: the node role's policy attachments and the
   * networking add-ons. A `dependsOn` on this component does not reach the node groups of
   * another component (Pulumi does not pass a component's dependsOn to its children).
   */
  readonly nodesNeed: pulumi.Resource[];
  /** The same for the GPU node groups: their role's attachments and the networking add-ons. */
  readonly gpuNodesNeed: pulumi.Resource[];

  constructor(name: string, args: ClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Cluster", name, {}, opts);
    const r = createCluster(name, args, this);
    this.cluster = r.cluster;
    this.nodeRole = r.nodeRole;
    this.oidcProvider = r.oidcProvider;
    this.oidcIssuer = r.oidcIssuer;
    this.provider = r.provider;
    this.systemNodes = r.systemNodes;
    this.addons = r.addons;
    this.nodesNeed = r.nodesNeed;
    this.gpuNodeRole = r.gpuNodeRole;
    this.gpuNodesNeed = r.gpuNodesNeed;
    this.kubeconfig = pulumi.secret(r.kubeconfig);
    this.nodeSecurityGroupId = r.cluster.vpcConfig.clusterSecurityGroupId;
    this.registerOutputs({ clusterName: this.cluster.name, kubeconfig: this.kubeconfig });
  }
}

export function createCluster(name: string, args: ClusterArgs, parent: pulumi.Resource) {
  const p = new Problems();
  if (args.privateSubnetIds.length < 2) p.add("privateSubnetIds", "EKS needs subnets in at least 2 AZs");
  const desired = args.systemDesiredSize ?? args.systemSubnets.length;
  const max = args.systemMaxSize ?? desired * 2;
  if (desired < 1 || max < desired) p.add("systemMaxSize", "must be ≥ systemDesiredSize ≥ 1");
  if (new Set(args.systemSubnets.map((s) => s.az)).size !== args.systemSubnets.length) p.add("systemSubnets", "needs exactly one subnet per AZ");
  if (args.systemSubnets.length < 2) p.add("systemSubnets", "needs subnets in at least 2 AZs");
  const api = args.apiEndpoint;
  const cidrs = api.access === "public" ? api.publicAccessCidrs : api.runnerCidrs;
  if (cidrs.length === 0) p.add(`apiEndpoint.${api.access === "public" ? "publicAccessCidrs" : "runnerCidrs"}`, "needs at least one CIDR");
  if (cidrs.some((c) => c.endsWith("/0"))) p.add("apiEndpoint", "0.0.0.0/0 opens the Kubernetes API to the internet");
  p.throwIfAny("Cluster arguments");
  const opts = { parent };

  const clusterRole = new aws.iam.Role(`${name}-cluster-role`, { assumeRolePolicy: trustPolicy("eks.amazonaws.com"), tags: tagged() }, opts);
  const clusterPolicy = new aws.iam.RolePolicyAttachment(`${name}-cluster-policy`, { role: clusterRole.name, policyArn: aws.iam.ManagedPolicy.AmazonEKSClusterPolicy }, opts);
  // Security groups for pods (infra/fences.ts): the VPC resource controller attaches the pods' branch ENIs.
  const podEniPolicy = new aws.iam.RolePolicyAttachment(`${name}-cluster-pod-eni`, { role: clusterRole.name, policyArn: VPC_RESOURCE_CONTROLLER_POLICY }, opts);

  // Nodes get only what kubelet and image pulls need (the VPC CNI has its own role: addons.ts);
  // the agent talks to IMDS and Redis, never to AWS APIs. The GPU nodes have a role of their
  // own, so nothing added for the system nodes' controllers ever reaches a host-network vLLM.
  // The GPU groups keep the role all nodes shared before (renamed by alias): a node group's role
  // cannot change in place, and a replaced GPU group would start empty (scarce types at 0). The
  // system group, cheap to roll, moves to a new role.
  const roles = { system: nodeRoleOf(`${name}-system-node`, args, parent), gpu: nodeRoleOf(`${name}-gpu-node`, args, parent, `${name}-node`) };
  const nodeRole = roles.system.role;

  const secretsKey = new aws.kms.Key(`${name}-secrets`, { description: `${args.clusterName} Kubernetes secrets`, enableKeyRotation: true, tags: tagged() }, opts);
  const secretsKeyGrant = new aws.iam.RolePolicy(
    `${name}-cluster-secrets-kms`,
    {
      role: clusterRole.name,
      policy: secretsKey.arn.apply((arn) => JSON.stringify({ Version: "2012-10-17", Statement: [{ Sid: "SecretsEnvelopeEncryption", Effect: "Allow", Action: [...CLUSTER_SECRETS_KMS_ACTIONS], Resource: arn }] })),
    },
    opts,
  );
  // EKS writes the control-plane logs to this group; made here first with a retention, or EKS
  // creates it on the first log line with none (kept, and billed, forever).
  const controlPlaneLogs = new aws.cloudwatch.LogGroup(
    `${name}-control-plane-logs`,
    { name: `/aws/eks/${args.clusterName}/cluster`, retentionInDays: CONTROL_PLANE_LOG_RETENTION_DAYS, tags: tagged() },
    opts,
  );
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
    // The role is named by ARN only, so without this the cluster may be created before its
    // policy is attached (EKS then cannot manage its ENIs), and destroy would detach the
    // policy while EKS still deletes them, leaving ENIs and security groups behind.
    // The key grant and the log group likewise: a cluster made before them cannot encrypt its
    // Secrets, or logs into a group EKS made without retention.
    { parent, dependsOn: [clusterPolicy, podEniPolicy, secretsKeyGrant, controlPlaneLogs] },
  );

  const oidcIssuer = cluster.identities.apply((ids) => ids[0].oidcs?.[0]?.issuer ?? "");
  const oidcProvider = new aws.iam.OpenIdConnectProvider(`${name}-oidc`, { url: oidcIssuer, clientIdLists: ["sts.amazonaws.com"], tags: tagged() }, opts);

  const addons = createAddons(
    `${name}-addon`,
    { clusterName: cluster.name, kubernetesVersion: cluster.version, oidcProviderArn: oidcProvider.arn, oidcProviderUrl: oidcProvider.url, versions: args.addonVersions },
    parent,
  );

  const nodesNeed = [...roles.system.attachments, ...addons.network];
  const gpuNodesNeed = [...roles.gpu.attachments, ...addons.network];
  // IMDSv2 with hop limit 1: a pod off the host network cannot reach the node role's
  // credentials (the AMI default is 2). Without security groups here EKS adds the cluster's.
  const systemLt = new aws.ec2.LaunchTemplate(
    `${name}-system-lt`,
    { metadataOptions: SYSTEM_NODE_METADATA, tagSpecifications: [{ resourceType: "instance", tags: tagged({ Name: `${args.clusterName}-system` }) }], tags: tagged() },
    opts,
  );
  // One system group per AZ, each pinned by its subnet and at least one node: the L1 pods are
  // zone-pinned and the controller spreads with DoNotSchedule, so a group spanning the AZs could
  // leave one AZ without a system node and its L1 Pending (policy system-node-group-per-az).
  // The totals are split evenly, rounding up. Nothing scales them but this program, so
  // desired = min and no ignoreChanges: a second `pulumi up` sends exactly the config's sizes.
  // The first AZ's group takes over the old single group's name (alias): Pulumi replaces it
  // (its subnets change) and creates the new group before deleting the old one.
  const n = args.systemSubnets.length;
  const perAz = systemGroupSize({ desired, max }, n);
  const systemNodes = args.systemSubnets.map(
    ({ az, subnetId }, i) =>
      new aws.eks.NodeGroup(
        `${name}-system-${az}`,
        {
          launchTemplate: { id: systemLt.id, version: pulumi.interpolate`${systemLt.latestVersion}` },
          clusterName: cluster.name,
          nodeRoleArn: nodeRole.arn,
          subnetIds: [subnetId],
          instanceTypes: [args.systemInstanceType ?? "m6i.large"],
          amiType: "AL2023_x86_64_STANDARD",
          labels: { "llm-ha.io/node-role": "system" },
          scalingConfig: { minSize: perAz.desired, desiredSize: perAz.desired, maxSize: perAz.max },
          updateConfig: { maxUnavailable: 1 },
          tags: tagged({ "llm-ha.io/az": az }),
        },
        { parent, dependsOn: nodesNeed, aliases: i === 0 ? [{ name: `${name}-system` }] : [] },
      ),
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

  // Access entries: the creator has one from bootstrapClusterCreatorAdminPermissions; every
  // other principal that runs the program or kubectl (another engineer, CI, the in-VPC
  // runner, the kubeconfig's role) needs its own, or the API answers 401.
  const access = args.access ?? { admins: [] };
  const principals = [...new Set([...access.admins, ...(access.kubeconfigRoleArn ? [access.kubeconfigRoleArn] : [])])];
  const associations = principals.map((arn, i) => {
    const entry = new aws.eks.AccessEntry(`${name}-access-${i}`, { clusterName: cluster.name, principalArn: arn, type: "STANDARD", tags: tagged() }, opts);
    // The association names the principal by ARN: its entry's Output orders it after the entry.
    return new aws.eks.AccessPolicyAssociation(
      `${name}-access-${i}-admin`,
      { clusterName: cluster.name, principalArn: entry.principalArn, policyArn: CLUSTER_ADMIN_POLICY, accessScope: { type: "cluster" } },
      opts,
    );
  });
  const kubeconfig = kubeconfigFor(cluster, args.region, access);
  // Nothing is applied to the cluster before the principals that apply it have access.
  const provider = new k8s.Provider(`${name}-k8s`, { kubeconfig, enableServerSideApply: true }, { parent, dependsOn: associations });
  return { cluster, nodeRole, gpuNodeRole: roles.gpu.role, nodesNeed, gpuNodesNeed, oidcProvider, oidcIssuer, provider, kubeconfig, systemNodes, addons: allAddons };
}
