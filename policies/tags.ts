// Tags: the on-call engineer paging through a failed AZ's resources needs to know which
// environment and project owns them. Advisory: a missing tag slows triage, it does not
// break failover.
import { type ResourceValidationPolicy } from "@pulumi/policy";
import { record, stringMap, type Props } from "./props";

export interface RequiredTagsConfig {
  requiredTags: string[];
}

// Taggable types this stack creates; any other AWS resource that passes `tags` is checked too.
export const TAGGABLE_TYPES: ReadonlySet<string> = new Set([
  "aws:ec2/vpc:Vpc",
  "aws:ec2/subnet:Subnet",
  "aws:ec2/internetGateway:InternetGateway",
  "aws:ec2/natGateway:NatGateway",
  "aws:ec2/eip:Eip",
  "aws:ec2/routeTable:RouteTable",
  "aws:ec2/securityGroup:SecurityGroup",
  "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
  "aws:ec2/launchTemplate:LaunchTemplate",
  "aws:ec2/vpcEndpoint:VpcEndpoint",
  "aws:eks/cluster:Cluster",
  "aws:eks/nodeGroup:NodeGroup",
  "aws:eks/addon:Addon",
  "aws:ecr/repository:Repository",
  "aws:iam/role:Role",
  "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
  "aws:kms/key:Key",
  "aws:cloudwatch/logGroup:LogGroup",
  "aws:elasticache/replicationGroup:ReplicationGroup",
  "aws:elasticache/subnetGroup:SubnetGroup",
  "aws:msk/cluster:Cluster",
  "aws:route53/healthCheck:HealthCheck",
]);

export const requiredTags: ResourceValidationPolicy = {
  name: "required-tags",
  description:
    "Taggable AWS resources carry the required tags, set on the resource or through the provider's defaultTags (L1–L4, every tier: during an AZ incident, resources are found and attributed by tag).",
  enforcementLevel: "advisory",
  configSchema: {
    properties: {
      requiredTags: {
        type: "array",
        items: { type: "string" },
        default: ["Project", "Environment"],
        description: "Tag keys every taggable AWS resource must have.",
      },
    },
  },
  validateResource: (args, reportViolation) => {
    const props = args.props as Props;
    if (!args.type.startsWith("aws:") || !(TAGGABLE_TYPES.has(args.type) || "tags" in props)) {
      args.notApplicable("Policy only applies to taggable AWS resources");
    }
    const { requiredTags: keys } = args.getConfig<RequiredTagsConfig>();
    const defaults = stringMap(record(args.provider?.props.defaultTags)?.tags);
    const tags = { ...defaults, ...stringMap(props.tags) };
    const missing = keys.filter((k) => !tags[k]);
    if (missing.length > 0) reportViolation(`${args.name} lacks the tag${missing.length > 1 ? "s" : ""} ${missing.join(", ")}.`);
  },
};
