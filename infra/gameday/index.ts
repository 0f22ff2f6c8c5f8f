/**
 * The game day (`llm-ha:gameday`, docs/infra.md "Game day"): one AWS FIS experiment template per
 * drill scenario with a cloud form, each with its own role (only its actions' permissions, on the
 * stack's own resources), stopped by the SLO's fast-burn alarms, logging to CloudWatch Logs.
 * Creating them changes nothing; an experiment runs only when someone starts one.
 */
import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { GAMEDAY_TAG, type GamedayScenario } from "../../contracts/gameday";
import { tagged } from "../tags";
import { createStopAlarms } from "./alarms";
import { FIS_KUBERNETES_USER, FIS_SERVICE_ACCOUNT, scenarioNeeds, scenarioSpec, type ScenarioContext, type Statement } from "./scenarios";

/** Days the experiment log keeps its events. */
export const GAMEDAY_LOG_RETENTION_DAYS = 90;
/** The Kubernetes group the FIS roles' access entries carry; the FIS RoleBindings name it. */
export const FIS_KUBERNETES_GROUP = "llm-ha:fis-experiment";

export interface GamedayArgs {
  clusterName: string;
  region: string;
  azs: string[];
  standbyAz?: string;
  scenarios: GamedayScenario[];
  az: string;
  redisAz: string;
  durationMinutes: number;
  gpuClasses: string[];
  /** The stack's EKS cluster (its name, for the access entries) and a provider bound to it, for the FIS RBAC. */
  cluster: pulumi.Input<string>;
  provider: k8s.Provider;
  /** What the RBAC waits for: the namespaces it goes into. */
  namespacesFrom: pulumi.Resource[];
  vpcId: pulumi.Input<string>;
  /** The stack's private subnet per AZ. */
  subnetIds: Record<string, pulumi.Input<string>>;
  replicationGroupId: pulumi.Input<string>;
  redisEndpoint: pulumi.Input<string>;
  /** Route53 health check id per AZ (infra/dns.ts). */
  healthCheckIds: Record<string, pulumi.Input<string>>;
}

const kv = (o: Record<string, string> | undefined) => (o ? Object.entries(o).map(([key, value]) => ({ key, value })) : undefined);

/** The role FIS assumes for one template: trusted by FIS for this account's experiments only. */
export function fisTrustPolicy(account: string, region: string): string {
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Service: "fis.amazonaws.com" },
        Action: "sts:AssumeRole",
        Condition: { StringEquals: { "aws:SourceAccount": account }, ArnLike: { "aws:SourceArn": `arn:aws:fis:${region}:${account}:experiment/*` } },
      },
    ],
  });
}

/** What every template's role needs to deliver its experiment log (CloudWatch Logs vended delivery). */
export const LOG_DELIVERY_STATEMENT: Statement = Object.freeze({
  Sid: "DeliverExperimentLog",
  Effect: "Allow",
  Action: ["logs:CreateLogDelivery", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"],
  Resource: "*",
});

export class Gameday extends pulumi.ComponentResource {
  readonly templates: Partial<Record<GamedayScenario, aws.fis.ExperimentTemplate>>;

  constructor(name: string, args: GamedayArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Gameday", name, {}, opts);
    this.templates = createGameday(name, args, this);
    this.registerOutputs({ templateIds: Object.fromEntries(Object.entries(this.templates).map(([s, t]) => [s, t.id])) });
  }
}

function createGameday(name: string, args: GamedayArgs, parent: pulumi.Resource): Partial<Record<GamedayScenario, aws.fis.ExperimentTemplate>> {
  const opts = { parent };
  const activeAzs = args.azs.filter((a) => a !== args.standbyAz);
  const alarms = createStopAlarms(name, { clusterName: args.clusterName, healthCheckIds: args.healthCheckIds, activeAzs }, parent);
  const log = new aws.cloudwatch.LogGroup(`${name}-log`, { name: `/aws/fis/${args.clusterName}`, retentionInDays: GAMEDAY_LOG_RETENTION_DAYS, tags: tagged() }, opts);
  const account = aws.getCallerIdentityOutput({}, { parent }).accountId;
  const context: pulumi.Output<ScenarioContext> = pulumi
    .all([account, args.vpcId, args.subnetIds[args.az], args.replicationGroupId, args.redisEndpoint])
    .apply(([acct, vpcId, subnetId, replicationGroupId, redisEndpoint]) => ({
      region: args.region,
      account: acct,
      project: pulumi.getProject(),
      environment: pulumi.getStack(),
      clusterName: args.clusterName,
      az: args.az,
      redisAz: args.redisAz,
      durationMinutes: args.durationMinutes,
      gpuClasses: args.gpuClasses,
      vpcId,
      subnetId,
      replicationGroupId,
      redisEndpoint,
    }));

  const podNamespaces = [...new Set(args.scenarios.flatMap((s) => scenarioNeeds(s).podNamespaces))];
  const rbac = podNamespaces.length > 0 ? fisRbac(name, podNamespaces, args, parent) : [];

  const templates: Partial<Record<GamedayScenario, aws.fis.ExperimentTemplate>> = {};
  for (const scenario of args.scenarios) {
    const spec = context.apply((c) => scenarioSpec(scenario, c));
    const needs = scenarioNeeds(scenario);
    const role = new aws.iam.Role(
      `${name}-${scenario}-role`,
      { description: `AWS FIS, llm-ha game day ${scenario}`, assumeRolePolicy: context.apply((c) => fisTrustPolicy(c.account, c.region)), tags: tagged({ [GAMEDAY_TAG]: scenario }) },
      opts,
    );
    const policy = new aws.iam.RolePolicy(
      `${name}-${scenario}-policy`,
      { role: role.name, policy: spec.apply((s) => JSON.stringify({ Version: "2012-10-17", Statement: [...s.statements, LOG_DELIVERY_STATEMENT] })) },
      opts,
    );
    // A pod scenario's role is a Kubernetes user too: its access entry puts it in the group the FIS RoleBindings name.
    const access =
      needs.podNamespaces.length > 0
        ? [new aws.eks.AccessEntry(`${name}-${scenario}-access`, { clusterName: args.cluster, principalArn: role.arn, type: "STANDARD", userName: FIS_KUBERNETES_USER, kubernetesGroups: [FIS_KUBERNETES_GROUP], tags: tagged() }, opts)]
        : [];
    templates[scenario] = new aws.fis.ExperimentTemplate(
      `${name}-${scenario}`,
      {
        description: spec.apply((s) => s.description),
        roleArn: role.arn,
        stopConditions: [{ source: "aws:cloudwatch:alarm", value: alarms[needs.stopAlarm].arn }],
        targets: spec.apply((s) =>
          s.targets.map((t) => ({ name: t.name, resourceType: t.resourceType, selectionMode: t.selectionMode, resourceTags: kv(t.resourceTags), resourceArns: t.resourceArns, filters: t.filters, parameters: t.parameters })),
        ),
        actions: spec.apply((s) => s.actions.map((a) => ({ name: a.name, actionId: a.actionId, parameters: kv(a.parameters), target: { key: a.target[0], value: a.target[1] }, startAfters: a.startAfter }))),
        logConfiguration: { logSchemaVersion: 2, cloudwatchLogsConfiguration: { logGroupArn: pulumi.interpolate`${log.arn}:*` } },
        experimentOptions: { accountTargeting: "single-account", emptyTargetResolutionMode: "fail" },
        tags: tagged({ Name: `${args.clusterName} ${scenario}`, [GAMEDAY_TAG]: scenario }),
      },
      // The role's permissions and its Kubernetes access exist before an experiment can be started with it.
      { parent, dependsOn: [policy, ...access, ...rbac] },
    );
  }
  return templates;
}

/**
 * What FIS's pod needs in each namespace it runs in (FIS user guide, "Use the aws:eks:pod
 * actions"): a ServiceAccount, and a Role for the FIS role's Kubernetes group and that account
 * to create its pod, find and delete target pods, and add ephemeral containers (the fault's).
 */
function fisRbac(name: string, namespaces: string[], args: GamedayArgs, parent: pulumi.Resource): pulumi.Resource[] {
  const opts = { parent, provider: args.provider, dependsOn: args.namespacesFrom };
  const out: pulumi.Resource[] = [];
  for (const namespace of namespaces) {
    const meta = { name: FIS_SERVICE_ACCOUNT, namespace, labels: { "app.kubernetes.io/part-of": "llm-ha", [GAMEDAY_TAG]: "fis" } };
    const sa = new k8s.core.v1.ServiceAccount(`${name}-fis-sa-${namespace}`, { metadata: meta, automountServiceAccountToken: true }, opts);
    const role = new k8s.rbac.v1.Role(
      `${name}-fis-role-${namespace}`,
      {
        metadata: meta,
        rules: [
          { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "create", "patch", "delete"] },
          { apiGroups: [""], resources: ["pods"], verbs: ["create", "list", "get", "delete", "deletecollection"] },
          { apiGroups: [""], resources: ["pods/ephemeralcontainers"], verbs: ["update"] },
          { apiGroups: [""], resources: ["pods/exec"], verbs: ["create"] },
          { apiGroups: ["apps"], resources: ["deployments"], verbs: ["get"] },
        ],
      },
      opts,
    );
    const binding = new k8s.rbac.v1.RoleBinding(
      `${name}-fis-binding-${namespace}`,
      {
        metadata: meta,
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: FIS_SERVICE_ACCOUNT },
        subjects: [
          { kind: "ServiceAccount", name: FIS_SERVICE_ACCOUNT, namespace },
          { kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: FIS_KUBERNETES_GROUP },
        ],
      },
      { ...opts, dependsOn: [...args.namespacesFrom, role, sa] },
    );
    out.push(sa, role, binding);
  }
  return out;
}
