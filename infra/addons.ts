import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { irsaTrustPolicy } from "./agent-iam";
import { tagged } from "./tags";

/**
 * The EKS managed add-ons every stack installs. Their versions are resolved for the cluster's
 * Kubernetes version at deploy time (`aws.eks.getAddonVersion`, EKS's default version for it:
 * what `aws eks describe-addon-versions --kubernetes-version <v> --addon-name <name>` marks
 * `defaultVersion`), never pinned in the code: an `-eksbuild.N` string that EKS does not offer
 * for the cluster's version stops `pulumi up` before a node exists. `llm-ha:addonVersions`
 * pins one (`{vpc-cni: v1.…}`), which `llm-ha preflight --online` checks against EKS.
 */
export const ADDON_NAMES = Object.freeze(["vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "aws-ebs-csi-driver", "eks-node-monitoring-agent"] as const);
export type AddonName = (typeof ADDON_NAMES)[number];

/**
 * vpc-cni's configuration: NetworkPolicy enforced by its node agent (off by default in EKS),
 * and security groups for pods (infra/fences.ts): branch ENIs (`ENABLE_POD_ENI`), `standard`
 * mode (a pod's groups and the NetworkPolicies both apply), and TCP early demux off so the
 * kubelet's TCP probes reach a pod with its own groups.
 */
export const VPC_CNI_CONFIGURATION = Object.freeze({
  enableNetworkPolicy: "true",
  nodeAgent: { enablePolicyEventLogs: "false" },
  env: { ENABLE_POD_ENI: "true", POD_SECURITY_GROUP_ENFORCING_MODE: "standard" },
  init: { env: { DISABLE_TCP_EARLY_DEMUX: "true" } },
});

/** The VPC CNI's managed policy: EC2 network-interface and IP-address writes (attach, detach, assign, unassign, delete). */
export const CNI_POLICY_ARN = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy";
/** vpc-cni's ServiceAccount (its `aws-node` DaemonSet): the only identity that gets `CNI_POLICY_ARN`. */
export const CNI_SERVICE_ACCOUNT = { namespace: "kube-system", name: "aws-node" } as const;

export interface AddonsArgs {
  clusterName: pulumi.Input<string>;
  /** The cluster's Kubernetes version (its Output, so the versions follow an upgrade). Required. */
  kubernetesVersion: pulumi.Input<string>;
  oidcProviderArn: pulumi.Input<string>;
  oidcProviderUrl: pulumi.Input<string>;
  /** Pinned versions; the others are resolved for `kubernetesVersion`. Default none. */
  versions?: Partial<Record<AddonName, string>>;
}

/**
 * The managed add-ons, each at a version EKS offers for the cluster's, created before the GPU and workload resources that need
 * them (the caller's `dependsOn`): vpc-cni with network policy enforcement (the NetworkPolicies
 * of infra/workloads are otherwise not enforced), coredns, kube-proxy, the pod identity agent,
 * the EBS CSI driver (its own IRSA role) and the node monitoring agent (GPU/kernel faults as
 * node conditions, which node repair acts on).
 */
export function createAddons(name: string, args: AddonsArgs, parent: pulumi.Resource): { network: aws.eks.Addon[]; afterNodes: (nodes: pulumi.Resource[]) => aws.eks.Addon[] } {
  const versionOf = (addonName: AddonName): pulumi.Input<string> =>
    args.versions?.[addonName] ?? aws.eks.getAddonVersionOutput({ addonName, kubernetesVersion: args.kubernetesVersion }, { parent }).version;
  const ebsRole = new aws.iam.Role(
    `${name}-ebs-csi`,
    {
      assumeRolePolicy: pulumi
        .all([args.oidcProviderArn, args.oidcProviderUrl])
        .apply(([arn, url]) => irsaTrustPolicy(arn, url, "kube-system", "ebs-csi-controller-sa")),
      tags: tagged(),
    },
    { parent },
  );
  const ebsPolicy = new aws.iam.RolePolicyAttachment(
    `${name}-ebs-csi`,
    { role: ebsRole.name, policyArn: "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy" },
    { parent },
  );
  // The CNI's EC2 network rights on its own role (IRSA, aws-node only), not on the nodes' role:
  // vLLM and the agent run on the host network, where IMDS's hop limit does not keep them from
  // the node role, so code run there could otherwise detach ENIs or unassign the L1 pods' IPs.
  const cniRole = new aws.iam.Role(
    `${name}-vpc-cni-role`,
    {
      assumeRolePolicy: pulumi
        .all([args.oidcProviderArn, args.oidcProviderUrl])
        .apply(([arn, url]) => irsaTrustPolicy(arn, url, CNI_SERVICE_ACCOUNT.namespace, CNI_SERVICE_ACCOUNT.name)),
      tags: tagged(),
    },
    { parent },
  );
  const cniPolicy = new aws.iam.RolePolicyAttachment(`${name}-vpc-cni-policy`, { role: cniRole.name, policyArn: CNI_POLICY_ARN }, { parent });
  const addon = (addonName: AddonName, extra: Partial<aws.eks.AddonArgs> = {}, deps: pulumi.Resource[] = []) =>
    new aws.eks.Addon(
      `${name}-${addonName}`,
      {
        clusterName: args.clusterName,
        addonName,
        addonVersion: versionOf(addonName),
        resolveConflictsOnCreate: "OVERWRITE",
        resolveConflictsOnUpdate: "OVERWRITE",
        tags: tagged(),
        ...extra,
      },
      { parent, dependsOn: deps },
    );
  // Node networking first, so the first nodes join with network policy enforcement on; the
  // Deployments (coredns, the EBS CSI controller) once there are nodes to be healthy on.
  const network = [
    addon("vpc-cni", { configurationValues: JSON.stringify(VPC_CNI_CONFIGURATION), serviceAccountRoleArn: cniRole.arn }, [cniPolicy]),
    addon("kube-proxy"),
    addon("eks-pod-identity-agent"),
  ];
  const afterNodes = (nodes: pulumi.Resource[]) => [
    addon("coredns", {}, nodes),
    addon("aws-ebs-csi-driver", { serviceAccountRoleArn: ebsRole.arn }, [...nodes, ebsPolicy]),
    addon("eks-node-monitoring-agent", {}, nodes),
  ];
  return { network, afterNodes };
}
