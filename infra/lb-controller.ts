import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { irsaTrustPolicy } from "./agent-iam";
import type { PinnedChart } from "./chart-archive";
import { IMAGES } from "./images";
import { tagged } from "./tags";

/**
 * The Helm chart (eks-charts) and version the stack installs. From 3.0 the chart's version is
 * the controller's (chart 3.5.0 runs controller v3.5.0; 1.14.0 ran v2.14.0, two majors behind).
 * `lbControllerPolicy` below matches that release's docs/install/iam_policy.json (unchanged
 * from v2.14.0 to v3.5.0), and every value set here exists in its values.yaml.
 * `digest` is the sha256 of aws-load-balancer-controller-3.5.0.tgz as the repository's
 * index.yaml lists it (three sources agreed): the stack installs that archive or
 * nothing (infra/chart-archive.ts). A new version needs its new digest beside it.
 */
export const LB_CONTROLLER_CHART = Object.freeze({
  chart: "aws-load-balancer-controller",
  version: "3.5.0",
  repo: "https://aws.github.io/eks-charts",
  digest: "sha256:45051f634b33e10baccb3354d0681b7de787c60445e599fa276e0c9aedd4ccd5",
  setting: "lbControllerArchive",
  pinnedIn: "LB_CONTROLLER_CHART in infra/lb-controller.ts",
  namespace: "kube-system",
  serviceAccount: "aws-load-balancer-controller",
} satisfies PinnedChart & Record<string, string>);

/**
 * The IAM policy the controller needs (its project publishes it as docs/install/iam_policy.json
 * for each release): reads on `*`, writes on load balancers, target groups and security groups
 * only where the controller's own cluster tag is (or is being) set.
 */
export function lbControllerPolicy(): string {
  const allow = (Sid: string, Action: string[], Resource: string | string[] = "*", Condition?: Record<string, unknown>) => ({
    Sid,
    Effect: "Allow",
    Action,
    Resource,
    ...(Condition ? { Condition } : {}),
  });
  const lb = "elasticloadbalancing";
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      allow("ServiceLinkedRole", ["iam:CreateServiceLinkedRole"], "*", { StringEquals: { "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" } }),
      allow("Describe", [
        "ec2:DescribeAccountAttributes",
        "ec2:DescribeAddresses",
        "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInternetGateways",
        "ec2:DescribeVpcs",
        "ec2:DescribeVpcPeeringConnections",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeInstances",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeTags",
        "ec2:GetCoipPoolUsage",
        "ec2:DescribeCoipPools",
        "ec2:GetSecurityGroupsForVpc",
        "ec2:DescribeIpamPools",
        "ec2:DescribeRouteTables",
        `${lb}:DescribeLoadBalancers`,
        `${lb}:DescribeLoadBalancerAttributes`,
        `${lb}:DescribeListeners`,
        `${lb}:DescribeListenerCertificates`,
        `${lb}:DescribeSSLPolicies`,
        `${lb}:DescribeRules`,
        `${lb}:DescribeTargetGroups`,
        `${lb}:DescribeTargetGroupAttributes`,
        `${lb}:DescribeTargetHealth`,
        `${lb}:DescribeTags`,
        `${lb}:DescribeTrustStores`,
        `${lb}:DescribeListenerAttributes`,
        `${lb}:DescribeCapacityReservation`,
      ]),
      allow("CertificatesAndShields", [
        "cognito-idp:DescribeUserPoolClient",
        "acm:ListCertificates",
        "acm:DescribeCertificate",
        "iam:ListServerCertificates",
        "iam:GetServerCertificate",
        "waf-regional:GetWebACL",
        "waf-regional:GetWebACLForResource",
        "waf-regional:AssociateWebACL",
        "waf-regional:DisassociateWebACL",
        "wafv2:GetWebACL",
        "wafv2:GetWebACLForResource",
        "wafv2:AssociateWebACL",
        "wafv2:DisassociateWebACL",
        "shield:GetSubscriptionState",
        "shield:DescribeProtection",
        "shield:CreateProtection",
        "shield:DeleteProtection",
      ]),
      allow("SecurityGroupRules", ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]),
      allow("CreateSecurityGroup", ["ec2:CreateSecurityGroup"]),
      allow("TagNewSecurityGroup", ["ec2:CreateTags"], "arn:aws:ec2:*:*:security-group/*", {
        StringEquals: { "ec2:CreateAction": "CreateSecurityGroup" },
        Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" },
      }),
      allow("TagOwnSecurityGroup", ["ec2:CreateTags", "ec2:DeleteTags"], "arn:aws:ec2:*:*:security-group/*", {
        Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "true", "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" },
      }),
      allow("ChangeOwnSecurityGroup", ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"], "*", {
        Null: { "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" },
      }),
      allow("CreateLoadBalancer", [`${lb}:CreateLoadBalancer`, `${lb}:CreateTargetGroup`], "*", {
        Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" },
      }),
      allow("Listeners", [`${lb}:CreateListener`, `${lb}:DeleteListener`, `${lb}:CreateRule`, `${lb}:DeleteRule`]),
      allow(
        "TagOwnLoadBalancers",
        [`${lb}:AddTags`, `${lb}:RemoveTags`],
        [`arn:aws:${lb}:*:*:targetgroup/*/*`, `arn:aws:${lb}:*:*:loadbalancer/net/*/*`, `arn:aws:${lb}:*:*:loadbalancer/app/*/*`],
        { Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "true", "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
      ),
      allow(
        "TagListeners",
        [`${lb}:AddTags`, `${lb}:RemoveTags`],
        [`arn:aws:${lb}:*:*:listener/net/*/*/*`, `arn:aws:${lb}:*:*:listener/app/*/*/*`, `arn:aws:${lb}:*:*:listener-rule/net/*/*/*`, `arn:aws:${lb}:*:*:listener-rule/app/*/*/*`],
      ),
      allow(
        "ChangeOwnLoadBalancers",
        [
          `${lb}:ModifyLoadBalancerAttributes`,
          `${lb}:SetIpAddressType`,
          `${lb}:SetSecurityGroups`,
          `${lb}:SetSubnets`,
          `${lb}:DeleteLoadBalancer`,
          `${lb}:ModifyTargetGroup`,
          `${lb}:ModifyTargetGroupAttributes`,
          `${lb}:DeleteTargetGroup`,
          `${lb}:ModifyListenerAttributes`,
          `${lb}:ModifyCapacityReservation`,
          `${lb}:ModifyIpPools`,
        ],
        "*",
        { Null: { "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
      ),
      allow("TagOnCreate", [`${lb}:AddTags`], [`arn:aws:${lb}:*:*:targetgroup/*/*`, `arn:aws:${lb}:*:*:loadbalancer/net/*/*`, `arn:aws:${lb}:*:*:loadbalancer/app/*/*`], {
        StringEquals: { [`${lb}:CreateAction`]: ["CreateTargetGroup", "CreateLoadBalancer"] },
        Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" },
      }),
      allow("Targets", [`${lb}:RegisterTargets`, `${lb}:DeregisterTargets`], `arn:aws:${lb}:*:*:targetgroup/*/*`),
      allow("ListenersAndRules", [
        `${lb}:SetWebAcl`,
        `${lb}:ModifyListener`,
        `${lb}:AddListenerCertificates`,
        `${lb}:RemoveListenerCertificates`,
        `${lb}:ModifyRule`,
        `${lb}:SetRulePriorities`,
      ]),
    ],
  });
}

export interface LbControllerArgs {
  provider: k8s.Provider;
  /**
   * The local path of `LB_CONTROLLER_CHART`'s archive, its sha256 checked (`verifiedChartArchive`).
   * Helm installs that file; no repository is named, so Helm downloads nothing.
   */
  chartArchive: pulumi.Input<string>;
  clusterName: pulumi.Input<string>;
  region: string;
  vpcId: pulumi.Input<string>;
  oidcProviderArn: pulumi.Input<string>;
  oidcProviderUrl: pulumi.Input<string>;
  /** What must exist first (the system nodes it runs on, the add-ons). */
  dependsOn?: pulumi.Input<pulumi.Resource>[];
  /** The controller image, `<repo>@sha256:…` (through the stack's cache). Default: the chart's own, by tag. */
  image?: pulumi.Input<string>;
}

/**
 * The chart renders `<image.repository>:<image.tag>`: a tag of `v3.5.0@sha256:…` makes that
 * a digest reference (the runtime pulls by the digest; the tag stays for people).
 */
export function chartImageValues(ref: string, tag: string): { repository: string; tag: string } {
  const at = ref.lastIndexOf("@");
  return { repository: ref.slice(0, at), tag: `${tag}${ref.slice(at)}` };
}

/**
 * The AWS Load Balancer Controller: without it the L1 `LoadBalancer` Services (class
 * `service.k8s.aws/nlb`) never get an address, Pulumi waits on them and fails, and Route53
 * has no NLB hostname to point at. IRSA role + the chart, pinned by digest; the Release waits until the
 * controller's Deployment (and its webhook) is ready, so Services created after it are
 * admitted and reconciled at once.
 */
export function createLbController(name: string, args: LbControllerArgs, parent: pulumi.Resource): k8s.helm.v3.Release {
  const role = new aws.iam.Role(
    `${name}-role`,
    {
      description: "AWS Load Balancer Controller (IRSA): the L1 NLBs",
      assumeRolePolicy: pulumi
        .all([args.oidcProviderArn, args.oidcProviderUrl])
        .apply(([arn, url]) => irsaTrustPolicy(arn, url, LB_CONTROLLER_CHART.namespace, LB_CONTROLLER_CHART.serviceAccount)),
      tags: tagged(),
    },
    { parent },
  );
  const policy = new aws.iam.RolePolicy(`${name}-policy`, { role: role.name, policy: lbControllerPolicy() }, { parent });
  return new k8s.helm.v3.Release(
    `${name}-release`,
    {
      name: LB_CONTROLLER_CHART.chart,
      // A path, not a name: with repositoryOpts Helm would fetch whatever the repository serves (charts-by-digest).
      chart: args.chartArchive,
      version: LB_CONTROLLER_CHART.version,
      namespace: LB_CONTROLLER_CHART.namespace,
      atomic: true,
      timeout: 600,
      values: {
        clusterName: args.clusterName,
        // Nodes answer IMDS with hop limit 1: the controller is told instead of asking.
        region: args.region,
        vpcId: args.vpcId,
        replicaCount: 2,
        ...(args.image ? { image: pulumi.output(args.image).apply((ref) => chartImageValues(ref, IMAGES.lbController.tag)) } : {}),
        nodeSelector: { "llm-ha.io/node-role": "system" },
        serviceAccount: {
          create: true,
          name: LB_CONTROLLER_CHART.serviceAccount,
          annotations: { "eks.amazonaws.com/role-arn": role.arn },
        },
        // Services without a class stay with the in-tree controller; ours name service.k8s.aws/nlb.
        enableServiceMutatorWebhook: false,
      },
    },
    { parent, provider: args.provider, dependsOn: [policy, ...(args.dependsOn ?? [])], customTimeouts: { create: "15m", update: "15m" } },
  );
}
