import { describe, expect, it } from "vitest";
import { gamedayTemplates, FIS_TEMPLATE_TYPE } from "../../policies/gameday";
import { runPolicies, type CapturedResource } from "../../policies/runner";
import { res, TAGS } from "./fixture-base";
import { messages } from "./fixtures";

const ALARM = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:llm-ha-test-gameday-stop-beyondOneAz";

/** A template as the program makes az-power-interruption: every target scoped, one alarm. */
function template(change: (p: Record<string, any>) => void = () => {}): CapturedResource[] { // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON
  const props: Record<string, any> = { // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON
    description: "llm-ha az-power-interruption",
    roleArn: "arn:aws:iam::123456789012:role/gameday-az-power-interruption-role",
    stopConditions: [{ source: "aws:cloudwatch:alarm", value: ALARM }],
    targets: [
      {
        name: "AzInstances",
        resourceType: "aws:ec2:instance",
        selectionMode: "ALL",
        resourceTags: [{ key: "Project", value: "llm-ha" }, { key: "Environment", value: "test" }],
        filters: [{ path: "Placement.AvailabilityZone", values: ["us-east-1a"] }],
      },
      { name: "ClusterNodeGroups", resourceType: "aws:ec2:autoscaling-group", selectionMode: "ALL", resourceTags: [{ key: "eks:cluster-name", value: "llm" }] },
      { name: "StackRedis", resourceType: "aws:elasticache:replicationgroup", selectionMode: "ALL", resourceTags: [{ key: "Project", value: "llm-ha" }], parameters: { availabilityZoneIdentifier: "us-east-1a" } },
      { name: "AzPrivateSubnet", resourceType: "aws:ec2:subnet", selectionMode: "ALL", resourceArns: ["arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0a"] },
      {
        name: "OneController",
        resourceType: "aws:eks:pod",
        selectionMode: "COUNT(1)",
        parameters: { clusterIdentifier: "llm", namespace: "llm-ha-edge", selectorType: "labelSelector", selectorValue: "app.kubernetes.io/name=llm-ha-controller" },
      },
    ],
    actions: [
      { name: "StopAzInstances", actionId: "aws:ec2:stop-instances", target: { key: "Instances", value: "AzInstances" } },
      { name: "RefuseLaunches", actionId: "aws:ec2:asg-insufficient-instance-capacity-error", target: { key: "AutoScalingGroups", value: "ClusterNodeGroups" } },
      { name: "InterruptRedisAzPower", actionId: "aws:elasticache:replicationgroup-interrupt-az-power", target: { key: "ReplicationGroups", value: "StackRedis" } },
      { name: "CutSubnet", actionId: "aws:network:disrupt-connectivity", target: { key: "Subnets", value: "AzPrivateSubnet" } },
      { name: "DeleteController", actionId: "aws:eks:pod-delete", target: { key: "Pods", value: "OneController" } },
    ],
    tags: TAGS,
  };
  change(props);
  return [res(FIS_TEMPLATE_TYPE, "gameday-az-power-interruption", props)];
}

describe("gameday-templates-scoped", () => {
  it("passes a template with an alarm stop condition, scoped targets and the game day's actions", async () => {
    expect(await messages(gamedayTemplates, template())).toEqual([]);
  });

  it("is mandatory", async () => {
    const v = await runPolicies([gamedayTemplates], template((p) => (p.stopConditions = [])), {});
    expect(v.map((x) => x.enforcementLevel)).toEqual(["mandatory"]);
  });

  it("refuses a template without a stop condition, or with only `none`", async () => {
    expect(await messages(gamedayTemplates, template((p) => (p.stopConditions = [])))).toEqual([
      "FIS template gameday-az-power-interruption has no aws:cloudwatch:alarm stop condition: nothing stops the experiment when the SLO burns.",
    ]);
    expect(await messages(gamedayTemplates, template((p) => (p.stopConditions = [{ source: "none" }])))).toEqual([
      "FIS template gameday-az-power-interruption has no aws:cloudwatch:alarm stop condition (only none): nothing stops the experiment when the SLO burns.",
    ]);
    expect(await messages(gamedayTemplates, template((p) => (p.stopConditions = [{ source: "aws:cloudwatch:alarm", value: "" }])))).toHaveLength(1);
  });

  it("refuses an account-wide target: no tags or ARNs, filters alone, a wildcard ARN", async () => {
    const bare = template((p) => (p.targets[0] = { name: "AzInstances", resourceType: "aws:ec2:instance", selectionMode: "ALL" }));
    expect(await messages(gamedayTemplates, bare)).toEqual([
      "FIS template gameday-az-power-interruption target AzInstances has no resourceTags or resourceArns: every resource of its type in the account; name the stack's own resources.",
    ]);
    const filtered = template((p) => delete p.targets[0].resourceTags);
    expect(await messages(gamedayTemplates, filtered)).toEqual([
      "FIS template gameday-az-power-interruption target AzInstances is selected by filters alone, which match any resource of the account; name the stack's own resources.",
    ]);
    const wild = template((p) => (p.targets[3].resourceArns = ["arn:aws:ec2:us-east-1:123456789012:subnet/*"]));
    expect(await messages(gamedayTemplates, wild)).toEqual([
      "FIS template gameday-az-power-interruption target AzPrivateSubnet has no resourceTags or resourceArns: every resource of its type in the account; name the stack's own resources.",
    ]);
  });

  it("refuses a pod target without its cluster, namespace or selector", async () => {
    const rs = template((p) => {
      delete p.targets[4].parameters.namespace;
      p.targets[4].parameters.selectorValue = " ";
    });
    expect(await messages(gamedayTemplates, rs)).toEqual([
      "FIS template gameday-az-power-interruption target OneController selects pods without namespace and selectorValue (FIS finds pods by these parameters only); name the stack's own resources.",
    ]);
  });

  it("refuses a resource type or an action outside the game day's", async () => {
    const rs = template((p) => {
      p.targets.push({ name: "Db", resourceType: "aws:rds:cluster", selectionMode: "ALL", resourceTags: [{ key: "Project", value: "llm-ha" }] });
      p.actions.push({ name: "Failover", actionId: "aws:rds:failover-db-cluster", target: { key: "Clusters", value: "Db" } });
      p.actions.push({ name: "Terminate", actionId: "aws:ec2:terminate-instances", target: { key: "Instances", value: "AzInstances" } });
    });
    expect(await messages(gamedayTemplates, rs)).toEqual([
      "FIS template gameday-az-power-interruption target Db selects aws:rds:cluster, outside the game day's types (aws:ec2:instance, aws:ec2:autoscaling-group, aws:elasticache:replicationgroup, aws:ec2:subnet, aws:eks:pod).",
      "FIS template gameday-az-power-interruption uses aws:rds:failover-db-cluster and aws:ec2:terminate-instances, beyond the game day's actions.",
    ]);
  });

  it("takes the allowed lists from config", async () => {
    const cfg = { "gameday-templates-scoped": { allowedActions: ["aws:ec2:stop-instances"] } };
    expect(await messages(gamedayTemplates, template(), cfg)).toEqual([
      "FIS template gameday-az-power-interruption uses aws:ec2:asg-insufficient-instance-capacity-error, aws:elasticache:replicationgroup-interrupt-az-power, aws:network:disrupt-connectivity and aws:eks:pod-delete, beyond the game day's actions.",
    ]);
  });
});
