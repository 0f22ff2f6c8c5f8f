/**
 * The game day as a stack setting (`llm-ha:gameday`): off by default (no FIS resource at all);
 * on, one FIS template per drill scenario with a cloud form, each with its own role, targets
 * held to the stack's own resources, a Route53 fast-burn stop alarm and the experiment log, and
 * the whole policy pack clean over it; bad settings refused, naming the key.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { FIS_ACTIONS, GAMEDAY_SCENARIOS } from "../../contracts/gameday";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { policies } from "../../policies/all";
import { gamedayTemplates } from "../../policies/gameday";
import { mandatory, runPolicies } from "../../policies/runner";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const on = (g: O = {}) => ({ "llm-ha:gameday": JSON.stringify({ enabled: true, ...g }) });
const ofType = (rs: CapturedResource[], t: string) => rs.filter((r) => r.type === t);
const templates = (rs: CapturedResource[]) => ofType(rs, "aws:fis/experimentTemplate:ExperimentTemplate");
const template = (rs: CapturedResource[], scenario: string) => templates(rs).find((r) => r.name === `gameday-${scenario}`)!.props as O;
const policyOf = (rs: CapturedResource[], scenario: string): O[] => JSON.parse(String(rs.find((r) => r.name === `gameday-${scenario}-policy`)!.props.policy)).Statement;
const actionIds = (t: O): string[] => t.actions.map((a: O) => a.actionId);

async function failure(overrides: Record<string, string>): Promise<string> {
  const err: unknown = await captureStack("dev", overrides).then(() => undefined, (e: unknown) => e);
  expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
  return (err as Error).message;
}

describe("llm-ha:gameday", () => {
  it("is off by default: dev makes no FIS template, role, alarm or FIS RBAC", async () => {
    const rs = await captureStack("dev");
    expect(rs.filter((r) => r.type.startsWith("aws:fis/") || r.type === "aws:cloudwatch/metricAlarm:MetricAlarm" || r.name.startsWith("gameday"))).toEqual([]);
  });

  it("prod with it on: one template per scenario, each stopped by a fast-burn alarm, logged, tagged, and the pack clean", async () => {
    const rs = await captureStack("prod", on());
    expect(templates(rs).map((r) => r.name).sort()).toEqual(GAMEDAY_SCENARIOS.map((s) => `gameday-${s}`).sort());
    const alarms = ofType(rs, "aws:cloudwatch/metricAlarm:MetricAlarm");
    expect(alarms.map((a) => a.props.name).sort()).toEqual(["llm-ha-prod-gameday-stop-anyActiveAz", "llm-ha-prod-gameday-stop-beyondOneAz"]);
    // prod: us-east-1a and 1b serve, 1c is the standby: the alarms count the two active AZs' Route53 checks.
    const any = alarms.find((a) => a.name === "gameday-stop-anyActiveAz")!.props as O;
    expect(any).toMatchObject({ comparisonOperator: "LessThanThreshold", threshold: 2, evaluationPeriods: 1, treatMissingData: "breaching" });
    expect(any.metricQueries.map((q: O) => q.metric?.dimensions?.HealthCheckId ?? q.expression)).toEqual(["dns-hc-us-east-1a-id", "dns-hc-us-east-1b-id", "SUM([az0, az1])"]);
    expect(any.metricQueries[0].metric).toMatchObject({ namespace: "AWS/Route53", metricName: "HealthCheckStatus", period: 60, stat: "Minimum" });
    expect((alarms.find((a) => a.name === "gameday-stop-beyondOneAz")!.props as O).threshold).toBe(1);

    const stopBy = Object.fromEntries(GAMEDAY_SCENARIOS.map((s) => [s, template(rs, s).stopConditions]));
    for (const s of ["az-gpu-loss", "az-power-interruption"]) expect(stopBy[s]).toEqual([{ source: "aws:cloudwatch:alarm", value: expect.stringContaining("beyondOneAz") }]);
    for (const s of ["gpu-lost", "redis-failover", "leader-kill", "redis-latency"]) expect(stopBy[s]).toEqual([{ source: "aws:cloudwatch:alarm", value: expect.stringContaining("anyActiveAz") }]);

    const log = rs.find((r) => r.name === "gameday-log")!.props as O;
    expect(log).toMatchObject({ name: "/aws/fis/llm-ha-prod", retentionInDays: 90 });
    for (const t of templates(rs)) {
      expect((t.props as O).logConfiguration).toEqual({ logSchemaVersion: 2, cloudwatchLogsConfiguration: { logGroupArn: expect.stringMatching(/:\*$/) } });
      expect((t.props as O).tags).toMatchObject({ Project: "llm-ha", Environment: "prod" });
    }
    expect(await runPolicies([gamedayTemplates], rs)).toEqual([]);
    expect(mandatory(await runPolicies(policies, rs))).toEqual([]);
  });

  it("uses the real FIS actions, on the stack's own resources in the chosen AZ", async () => {
    const rs = await captureStack("prod", on({ az: "us-east-1b", durationMinutes: 5 }));
    expect(actionIds(template(rs, "gpu-lost"))).toEqual([FIS_ACTIONS.stopInstances]);
    expect(template(rs, "gpu-lost").targets).toEqual([
      {
        name: "OneGpuInstance",
        resourceType: "aws:ec2:instance",
        selectionMode: "COUNT(1)",
        resourceTags: [
          { key: "Project", value: "llm-ha" },
          { key: "Environment", value: "prod" },
          { key: "llm-ha.io/az", value: "us-east-1b" },
          { key: "llm-ha.io/gpu-class", value: expect.any(String) },
        ],
        filters: [
          { path: "State.Name", values: ["running"] },
          { path: "Placement.AvailabilityZone", values: ["us-east-1b"] },
        ],
      },
    ]);
    const power = template(rs, "az-power-interruption");
    expect(actionIds(power)).toEqual([FIS_ACTIONS.stopInstances, FIS_ACTIONS.insufficientCapacity, FIS_ACTIONS.redisAzPower, FIS_ACTIONS.disruptConnectivity]);
    expect(power.targets.find((t: O) => t.resourceType === "aws:ec2:subnet").resourceArns).toEqual(["arn:aws:ec2:us-east-1:123456789012:subnet/net-private-us-east-1b-id"]);
    expect(power.targets.find((t: O) => t.resourceType === "aws:elasticache:replicationgroup").parameters).toEqual({ availabilityZoneIdentifier: "us-east-1b" });
    expect(power.targets.find((t: O) => t.resourceType === "aws:ec2:autoscaling-group").resourceTags).toEqual([{ key: "eks:cluster-name", value: "llm-ha-prod" }]);
    expect(power.actions.find((a: O) => a.actionId === FIS_ACTIONS.disruptConnectivity).parameters).toEqual([
      { key: "scope", value: "all" },
      { key: "duration", value: "PT5M" },
    ]);
    // redis-failover interrupts the primary's AZ (default the first AZ, where ElastiCache places it first).
    expect(template(rs, "redis-failover").targets[0].parameters).toEqual({ availabilityZoneIdentifier: "us-east-1a" });
    const latency = template(rs, "redis-latency");
    expect(latency.targets[0].parameters).toEqual({ clusterIdentifier: "llm-ha-prod", namespace: "llm-ha", selectorType: "labelSelector", selectorValue: "app.kubernetes.io/name=llm-ha-agent" });
    expect(latency.actions[0].parameters).toEqual(expect.arrayContaining([{ key: "sources", value: "master.redis-rg.cache.amazonaws.com" }, { key: "delayMilliseconds", value: "300" }]));
    expect(template(rs, "leader-kill").targets[0].parameters).toMatchObject({ namespace: "llm-ha-edge", selectorValue: "app.kubernetes.io/name=llm-ha-controller" });
  });

  it("gives each template its own role: trusted by FIS for this account, only its actions, on the stack's resources", async () => {
    const rs = await captureStack("prod", on());
    const roles = ofType(rs, "aws:iam/role:Role").filter((r) => r.name.startsWith("gameday-"));
    expect(roles).toHaveLength(GAMEDAY_SCENARIOS.length);
    for (const r of roles) {
      expect(JSON.parse(String(r.props.assumeRolePolicy)).Statement).toEqual([
        {
          Effect: "Allow",
          Principal: { Service: "fis.amazonaws.com" },
          Action: "sts:AssumeRole",
          Condition: { StringEquals: { "aws:SourceAccount": "123456789012" }, ArnLike: { "aws:SourceArn": "arn:aws:fis:us-east-1:123456789012:experiment/*" } },
        },
      ]);
    }
    const actions = (s: string) => [...new Set(policyOf(rs, s).flatMap((x) => x.Action as string[]))].sort();
    expect(actions("gpu-lost")).toEqual(["ec2:DescribeInstances", "ec2:StartInstances", "ec2:StopInstances", "logs:CreateLogDelivery", "logs:DescribeLogGroups", "logs:DescribeResourcePolicies", "logs:PutResourcePolicy"]);
    expect(policyOf(rs, "gpu-lost")[0]).toEqual({
      Sid: "StopStackInstances",
      Effect: "Allow",
      Action: ["ec2:StopInstances", "ec2:StartInstances"],
      Resource: "arn:aws:ec2:us-east-1:123456789012:instance/*",
      Condition: { StringEquals: { "aws:ResourceTag/Project": "llm-ha", "aws:ResourceTag/Environment": "prod" }, Null: { "aws:ResourceTag/llm-ha.io/gpu-class": "false" } },
    });
    expect(actions("leader-kill")).toEqual(["ec2:DescribeSubnets", "eks:DescribeCluster", "logs:CreateLogDelivery", "logs:DescribeLogGroups", "logs:DescribeResourcePolicies", "logs:PutResourcePolicy"]);
    expect(actions("redis-failover")).not.toContain("ec2:StopInstances");
    expect(policyOf(rs, "redis-failover").find((x) => x.Sid === "InterruptStackRedis")!.Resource).toEqual([
      "arn:aws:elasticache:us-east-1:123456789012:replicationgroup:redis-rg-id",
      "arn:aws:elasticache:us-east-1:123456789012:cluster:redis-rg-id-*",
    ]);
    // Every write is on the stack's resources: a named ARN, or instance/network-acl ARNs held by the stack's tags or VPC.
    for (const s of GAMEDAY_SCENARIOS) {
      for (const st of policyOf(rs, s)) {
        const writes = (st.Action as string[]).filter((a) => !/:(Describe|Get|List)/.test(a) && !a.startsWith("logs:") && a !== "ec2:InjectApiError");
        if (writes.length === 0 || st.Resource !== "*") continue;
        throw new Error(`${s}: ${writes.join(", ")} on Resource "*"`);
      }
    }
  });

  it("gives the pod scenarios' roles a Kubernetes group and FIS's RBAC in the namespaces they act in", async () => {
    const rs = await captureStack("dev", on({ scenarios: ["leader-kill", "redis-latency"] }));
    expect(templates(rs).map((r) => r.name).sort()).toEqual(["gameday-leader-kill", "gameday-redis-latency"]);
    const entries = ofType(rs, "aws:eks/accessEntry:AccessEntry").filter((r) => r.name.startsWith("gameday-"));
    expect(entries.map((e) => e.props)).toEqual([
      expect.objectContaining({ principalArn: "arn:aws:iam:us-east-1:123456789012:gameday-leader-kill-role", userName: "fis-experiment", kubernetesGroups: ["llm-ha:fis-experiment"] }),
      expect.objectContaining({ principalArn: "arn:aws:iam:us-east-1:123456789012:gameday-redis-latency-role", userName: "fis-experiment", kubernetesGroups: ["llm-ha:fis-experiment"] }),
    ]);
    const bindings = ofType(rs, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding").map((r) => r.props as O).filter((b) => b.metadata.name === "llm-ha-fis");
    expect(bindings.map((b) => b.metadata.namespace).sort()).toEqual(["llm-ha", "llm-ha-edge"]);
    expect(bindings[0].subjects).toEqual([
      { kind: "ServiceAccount", name: "llm-ha-fis", namespace: bindings[0].metadata.namespace },
      { kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: "llm-ha:fis-experiment" },
    ]);
    const role = ofType(rs, "kubernetes:rbac.authorization.k8s.io/v1:Role").map((r) => r.props as O).find((r) => r.metadata.name === "llm-ha-fis")!;
    expect(role.rules.flatMap((r: O) => r.resources)).toEqual(["configmaps", "pods", "pods/ephemeralcontainers", "pods/exec", "deployments"]);
    expect(mandatory(await runPolicies(policies, rs))).toEqual([]);
  });

  it("refuses bad settings, naming the key", async () => {
    expect(await failure({ "llm-ha:gameday": "true" })).toContain("llm-ha:gameday: must be an object {enabled, scenarios, az, redisAz, durationMinutes, window}, got true: pulumi config set --path 'llm-ha:gameday.enabled' true");
    const msg = await failure(on({ scenarios: ["gpu-lost", "meteor"], az: "us-east-1b", redisAz: "us-west-2a", durationMinutes: 90, colour: "red", window: { days: ["Tue", "Caturday"], from: "10:00", to: "16:00", timeZone: "Europe/Berlin" } }));
    expect(msg).toContain("llm-ha:gameday.colour: unknown setting; known: enabled, scenarios, az, redisAz, durationMinutes, window");
    expect(msg).toContain("llm-ha:gameday.window: ");
    expect(msg).toContain("days must be a non-empty list of Mon, Tue, Wed, Thu, Fri, Sat, Sun");
    expect(await failure(on({ window: { days: ["Tue"], from: "16:00", to: "10:00", timeZone: "Mars/Olympus" } }))).toContain("from 16:00 must be before to 10:00");
    expect(await failure(on({ window: { days: ["Tue"], from: "10:00", to: "16:00", timeZone: "Mars/Olympus" } }))).toContain('timeZone "Mars/Olympus" is not an IANA time zone');
    expect(msg).toContain('llm-ha:gameday.scenarios: "meteor": must be a non-empty list of gpu-lost, az-gpu-loss, az-power-interruption, redis-failover, leader-kill, redis-latency');
    // dev's standby is us-east-1b: asleep, it has nothing to lose.
    expect(msg).toContain('llm-ha:gameday.az: "us-east-1b" must be an active AZ of llm-ha:azs (us-east-1a');
    expect(msg).toContain('llm-ha:gameday.redisAz: "us-west-2a" must be an AZ of llm-ha:azs');
    expect(msg).toContain("llm-ha:gameday.durationMinutes: 90 must be a whole number of minutes from 1 to 60");
    expect(await failure({ ...on(), "aws:region": "eu-west-1", "llm-ha:azs": JSON.stringify(["eu-west-1a", "eu-west-1b"]), "llm-ha:standbyAz": "" })).toContain(
      "llm-ha:gameday.enabled: needs aws:region us-east-1 (got eu-west-1): the stop alarms watch Route53 health-check metrics, which exist only there",
    );
  });
});
