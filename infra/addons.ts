import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { irsaTrustPolicy } from "./agent-iam";
import { tagged } from "./tags";

/**
 * The EKS managed add-ons every stack installs, versions pinned (for Kubernetes 1.35; see
 * `aws eks describe-addon-versions --kubernetes-version <v> --addon-name <name>`, which
 * `llm-ha preflight` prints). `llm-ha:addonVersions` overrides one (`{vpc-cni: v1.…}`).
 */
export const ADDON_VERSIONS = Object.freeze({
  "vpc-cni": "v1.20.4-eksbuild.2",
  coredns: "v1.12.4-eksbuild.1",
  "kube-proxy": "v1.35.0-eksbuild.2",
  "eks-pod-identity-agent": "v1.3.9-eksbuild.3",
  "aws-ebs-csi-driver": "v1.53.0-eksbuild.1",
  "eks-node-monitoring-agent": "v1.4.2-eksbuild.1",
});
export type AddonName = keyof typeof ADDON_VERSIONS;

/** vpc-cni's configuration: NetworkPolicy enforced by its node agent (off by default in EKS). */
export const VPC_CNI_CONFIGURATION = Object.freeze({ enableNetworkPolicy: "true", nodeAgent: { enablePolicyEventLogs: "false" } });

export interface AddonsArgs {
  clusterName: pulumi.Input<string>;
  oidcProviderArn: pulumi.Input<string>;
  oidcProviderUrl: pulumi.Input<string>;
  /** Versions over `ADDON_VERSIONS`. */
  versions?: Partial<Record<AddonName, string>>;
}

/**
 * The managed add-ons, each pinned, created before the GPU and workload resources that need
 * them (the caller's `dependsOn`): vpc-cni with network policy enforcement (the NetworkPolicies
 * of infra/workloads are otherwise not enforced), coredns, kube-proxy, the pod identity agent,
 * the EBS CSI driver (its own IRSA role) and the node monitoring agent (GPU/kernel faults as
 * node conditions, which node repair acts on).
 */
export function createAddons(name: string, args: AddonsArgs, parent: pulumi.Resource): { network: aws.eks.Addon[]; afterNodes: (nodes: pulumi.Resource) => aws.eks.Addon[] } {
  const v = { ...ADDON_VERSIONS, ...args.versions };
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
  const addon = (addonName: AddonName, extra: Partial<aws.eks.AddonArgs> = {}, deps: pulumi.Resource[] = []) =>
    new aws.eks.Addon(
      `${name}-${addonName}`,
      {
        clusterName: args.clusterName,
        addonName,
        addonVersion: v[addonName],
        resolveConflictsOnCreate: "OVERWRITE",
        resolveConflictsOnUpdate: "OVERWRITE",
        tags: tagged(),
        ...extra,
      },
      { parent, dependsOn: deps },
    );
  // Node networking first, so the first nodes join with network policy enforcement on; the
  // Deployments (coredns, the EBS CSI controller) once there are nodes to be healthy on.
  const network = [addon("vpc-cni", { configurationValues: JSON.stringify(VPC_CNI_CONFIGURATION) }), addon("kube-proxy"), addon("eks-pod-identity-agent")];
  const afterNodes = (nodes: pulumi.Resource) => [
    addon("coredns", {}, [nodes]),
    addon("aws-ebs-csi-driver", { serviceAccountRoleArn: ebsRole.arn }, [nodes, ebsPolicy]),
    addon("eks-node-monitoring-agent", {}, [nodes]),
  ];
  return { network, afterNodes };
}
