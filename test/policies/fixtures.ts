// A small stack that satisfies every policy: each test starts from it and changes one
// property (pulumi-policy-aws style), so a message asserted there is caused by that change.
import type { Policies } from "@pulumi/policy";
import { L1_AUTH_ENFORCEMENT } from "../../policies/edge";
import { runPolicies, type CapturedResource, type PackConfig, type Violation } from "../../policies/runner";
import { failoverRecord, healthCheck, weightedRecord } from "./dns-fixtures";
import { res, TAGS } from "./fixture-base";

/**
 * Client authentication at L1 is rendered by the HAProxy generator; until then its
 * policy is advisory and known to fire on every captured stack. Once it is mandatory, it counts again.
 */
export const settled = (v: Violation): boolean => !(v.policy === "l1-auth-required" && L1_AUTH_ENFORCEMENT === "advisory");
/** Advisory violations `npm run policy` may print on a clean stack meanwhile: `\d+` while l1-auth-required is pending, else `0`. */
export const PENDING_ADVISORY = L1_AUTH_ENFORCEMENT === "advisory" ? "\\d+" : "0";

function subnet(az: string): CapturedResource {
  return res("aws:ec2/subnet:Subnet", `private-${az}`, { vpcId: "vpc-id", availabilityZone: az, cidrBlock: "10.0.0.0/20", tags: TAGS });
}

function launchTemplate(az: string): CapturedResource {
  return res("aws:ec2/launchTemplate:LaunchTemplate", `gpu-${az}-lt`, {
    metadataOptions: { httpEndpoint: "enabled", httpTokens: "required", httpPutResponseHopLimit: 1 },
    // The GPU nodes' own group: out of the cluster's (ha-ports-fenced).
    vpcSecurityGroupIds: ["gpu-nodes-sg-id"],
    tags: TAGS,
  });
}

function nodeGroup(az: string, role: "active" | "standby"): CapturedResource {
  return res("aws:eks/nodeGroup:NodeGroup", `gpu-${az}-h100`, {
    clusterName: "llm",
    nodeRoleArn: "arn:aws:iam::123456789012:role/node",
    subnetIds: [`private-${az}-id`],
    instanceTypes: ["p5.48xlarge"],
    amiType: "AL2023_x86_64_NVIDIA",
    launchTemplate: { id: `gpu-${az}-lt-id`, version: "1" },
    labels: { "llm-ha.io/gpu-class": "h100", "llm-ha.io/az": az, "llm-ha.io/az-role": role },
    taints: [{ key: "nvidia.com/gpu", value: "true", effect: "NO_SCHEDULE" }],
    // Created at zero, as the program creates On-Demand groups of scarce GPU types (gpu-scarce-start-at-zero).
    scalingConfig: { minSize: 0, desiredSize: 0, maxSize: 4 },
    // Rolls replace in place, never surging an extra GPU node first (gpu-node-group-minimal-update).
    updateConfig: { updateStrategy: "MINIMAL", maxUnavailable: 1 },
    tags: TAGS,
  });
}

/** The standby AZ's fallback group: the class's next instance type, at zero until the agent wakes it. */
function fallbackGroup(az: string): CapturedResource[] {
  const g = nodeGroup(az, "standby");
  g.name = `gpu-${az}-h100-fallback`;
  g.urn = `urn:pulumi:test::llm-ha::aws:eks/nodeGroup:NodeGroup::${g.name}`;
  Object.assign(g.props, {
    instanceTypes: ["p5e.48xlarge"],
    launchTemplate: { id: `gpu-${az}-h100-fallback-lt-id`, version: "1" },
    labels: { ...(g.props.labels as Record<string, string>), "llm-ha.io/standby-fallback": "true" },
    scalingConfig: { minSize: 0, desiredSize: 0, maxSize: 4 },
  });
  const lt = launchTemplate(az);
  lt.name = `gpu-${az}-h100-fallback-lt`;
  lt.urn = `urn:pulumi:test::llm-ha::aws:ec2/launchTemplate:LaunchTemplate::${lt.name}`;
  return [lt, g];
}

const INFERENCE_LABELS = { "app.kubernetes.io/name": "inference", "llm-ha.io/az": "us-east-1a" };

const VLLM_IMAGE = `123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/docker-hub/vllm/vllm-openai@sha256:${"c1".repeat(32)}`;
const REVISION = "s3://llm-ha-weights/llama-3.1-70b/1605565b47bb9346c5515c34102e054115b4f98b";

const inference = res("kubernetes:apps/v1:Deployment", "inference-us-east-1a", {
  apiVersion: "apps/v1",
  kind: "Deployment",
  // Not awaited, as the program's (waits-bounded): its pods wait for GPU nodes. Its image and revision are the rollout's (inference-rollout-handover).
  metadata: { name: "inference-us-east-1a", namespace: "llm-ha", annotations: { "pulumi.com/skipAwait": "true", "llm-ha.io/rollout": "handover" } },
  spec: {
    replicas: 2,
    selector: { matchLabels: INFERENCE_LABELS },
    template: {
      metadata: { labels: INFERENCE_LABELS, annotations: { "llm-ha.io/model-revision": REVISION } },
      spec: {
        affinity: {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { labelSelector: { matchLabels: INFERENCE_LABELS }, topologyKey: "kubernetes.io/hostname" },
            ],
          },
        },
        topologySpreadConstraints: [
          { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: INFERENCE_LABELS } },
        ],
        tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
        containers: [{ name: "vllm", image: VLLM_IMAGE, resources: { limits: { "nvidia.com/gpu": 8 } } }],
      },
    },
  },
});
inference.opts = { ignoreChanges: ['spec.template.metadata.annotations["llm-ha.io/model-revision"]', "spec.template.spec.containers[0].image"], dependsOn: [], propertyDependencies: {} };

const rolloutConfigMap = res("kubernetes:core/v1:ConfigMap", "llm-ha-rollout", {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "llm-ha-rollout", namespace: "llm-ha" },
  data: { id: "pulumi-0123456789ab", "to.revision": REVISION, "to.image": VLLM_IMAGE, by: "pulumi" },
});

const pdb = res("kubernetes:policy/v1:PodDisruptionBudget", "inference-us-east-1a-pdb", {
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: "inference-us-east-1a", namespace: "llm-ha" },
  spec: { maxUnavailable: 1, selector: { matchLabels: INFERENCE_LABELS } },
});

const AGENT_LABELS = { "app.kubernetes.io/name": "llm-ha-agent" };

const agent = res("kubernetes:apps/v1:DaemonSet", "agent", {
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "llm-ha-agent", namespace: "llm-ha", annotations: { "pulumi.com/skipAwait": "true" } },
  spec: {
    selector: { matchLabels: AGENT_LABELS },
    template: {
      metadata: { labels: AGENT_LABELS },
      spec: {
        hostNetwork: true,
        nodeSelector: { "llm-ha.io/gpu-class": "h100" },
        tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
        // Node identities (agent-node-identity): its own ServiceAccount, no API token, a projected token of audience llm-ha.
        serviceAccountName: "llm-ha-agent",
        automountServiceAccountToken: false,
        containers: [
          {
            name: "agent",
            image: `123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/agent@sha256:${"5a".repeat(32)}`,
            env: [{ name: "LLMHA_IDENTITY_TOKEN_FILE", value: "/var/run/secrets/llm-ha/identity/token" }],
            volumeMounts: [{ name: "identity-token", mountPath: "/var/run/secrets/llm-ha/identity", readOnly: true }],
            livenessProbe: { httpGet: { path: "/livez", port: 9400 }, periodSeconds: 5 },
            readinessProbe: { httpGet: { path: "/readyz", port: 9400 } },
          },
        ],
        volumes: [{ name: "identity-token", projected: { sources: [{ serviceAccountToken: { audience: "llm-ha", expirationSeconds: 3600, path: "token" } }] } }],
      },
    },
  },
});

const L1_LABELS = { "app.kubernetes.io/name": "l1-proxy", "llm-ha.io/az": "us-east-1a" };
const LB = "service.beta.kubernetes.io/aws-load-balancer";

/** The L1 NLB: internet-facing, TLS on both listeners. */
const l1Service = res("kubernetes:core/v1:Service", "l1-us-east-1a-nlb", {
  apiVersion: "v1",
  kind: "Service",
  metadata: {
    name: "l1-us-east-1a",
    namespace: "llm-ha",
    labels: L1_LABELS,
    annotations: {
      [`${LB}-scheme`]: "internet-facing",
      [`${LB}-ssl-cert`]: "arn:aws:acm:us-east-1:000011112222:certificate/00000000-0000-4000-8000-000000000000",
      [`${LB}-ssl-ports`]: "https,az-health",
      [`${LB}-ssl-negotiation-policy`]: "ELBSecurityPolicy-TLS13-1-2-2021-06",
      // The stack's frontend group: /az/health from Route53's checkers only (az-health-from-route53-only).
      [`${LB}-security-groups`]: "l1-nlb-id",
      // An NLB takes minutes: the wait is bounded (policy waits-bounded).
      "pulumi.com/timeoutSeconds": "1200",
    },
  },
  spec: {
    type: "LoadBalancer",
    selector: L1_LABELS,
    ports: [
      { name: "https", port: 443, targetPort: 8080, protocol: "TCP" },
      { name: "az-health", port: 8081, targetPort: 8081, protocol: "TCP" },
    ],
  },
});

/** The L1 NLBs' frontend group: the API to everyone, :8081 to two of Route53's checker blocks. */
const nlbSg = res("aws:ec2/securityGroup:SecurityGroup", "l1-nlb", { vpcId: "vpc-id", description: "L1 NLBs", tags: TAGS });
const nlbRule = (name: string, cidr: string, port: number) =>
  res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", name, { securityGroupId: "l1-nlb-id", cidrIpv4: cidr, ipProtocol: "tcp", fromPort: port, toPort: port, tags: TAGS });
export const NLB_RULES = [nlbRule("l1-nlb-api", "0.0.0.0/0", 443), nlbRule("l1-nlb-az-health-global", "15.177.0.0/18", 8081), nlbRule("l1-nlb-az-health-use1", "107.23.255.0/26", 8081)];

/** The L1 HAProxy configuration: a frontend that answers 401 itself to a request without a valid key. */
export const AUTHENTICATED_HAPROXY_CFG = [
  "frontend inference",
  "  bind :8080",
  "  http-request del-header x-llmha-tenant",
  "  http-request set-var(txn.tenant) req.hdr(authorization),word(2,' '),digest(sha256),hex,map(/etc/haproxy/keys.map)",
  '  http-request return status 401 content-type application/json string \'{"error":{"type":"invalid_request_error","code":"invalid_api_key"}}\' if !{ var(txn.tenant) -m found }',
  "  default_backend inference_servers",
  "",
].join("\n");

const l1Config = res("kubernetes:core/v1:ConfigMap", "l1-us-east-1a-cfg", {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "l1-us-east-1a", namespace: "llm-ha", labels: L1_LABELS },
  data: { "haproxy.cfg": AUTHENTICATED_HAPROXY_CFG },
});

const redis = res("aws:elasticache/replicationGroup:ReplicationGroup", "registry", {
  description: "llm-ha registry",
  engine: "redis",
  nodeType: "cache.r7g.large",
  numCacheClusters: 3,
  // One node per AZ (redis-ha-encrypted): the primary and its replicas never share one.
  preferredCacheClusterAzs: ["us-east-1a", "us-east-1b", "us-east-1c"],
  automaticFailoverEnabled: true,
  multiAzEnabled: true,
  transitEncryptionEnabled: true,
  atRestEncryptionEnabled: true,
  // Per-role users (the default): no AUTH token.
  userGroupIds: ["registry-llmha"],
  tags: TAGS,
});

const msk = res("aws:msk/cluster:Cluster", "queue", {
  kafkaVersion: "3.9.x.kraft",
  numberOfBrokerNodes: 3,
  brokerNodeGroupInfo: { instanceType: "kafka.m7g.large", clientSubnets: ["private-us-east-1a-id", "private-us-east-1b-id", "private-us-east-1c-id"] },
  encryptionInfo: { encryptionInTransit: { clientBroker: "TLS", inCluster: true } },
  clientAuthentication: { sasl: { iam: true }, unauthenticated: false },
  loggingInfo: { brokerLogs: { cloudwatchLogs: { enabled: true, logGroup: "queue-broker-logs" } } },
  tags: TAGS,
});

const mskLogs = res("aws:cloudwatch/logGroup:LogGroup", "queue-broker-logs", { name: "queue-broker-logs", retentionInDays: 30, tags: TAGS });

function schedule(name: string, size: number): CapturedResource {
  return res("aws:autoscaling/schedule:Schedule", name, {
    scheduledActionName: name,
    autoscalingGroupName: "eks-gpu-us-east-1c-h100-asg",
    minSize: 0,
    maxSize: size === 0 ? 0 : 4,
    desiredCapacity: size,
    recurrence: size === 0 ? "0 20 * * 1-5" : "0 7 * * 1-5",
    timeZone: "America/New_York",
  });
}

const vpc = res("aws:ec2/vpc:Vpc", "vpc", { cidrBlock: "10.0.0.0/16", tags: TAGS });

const nodeSg = res("aws:ec2/securityGroup:SecurityGroup", "redis-sg", {
  vpcId: "vpc-id",
  description: "Redis from its clients' groups",
  ingress: [{ protocol: "tcp", fromPort: 6379, toPort: 6379, securityGroups: ["gpu-nodes-sg-id"] }],
  egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"] }],
  tags: TAGS,
});

const httpsIn = res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "nlb-https", {
  securityGroupId: "redis-sg-id",
  ipProtocol: "tcp",
  fromPort: 443,
  toPort: 443,
  cidrIpv4: "0.0.0.0/0",
  tags: TAGS,
});

const agentRole = res("aws:iam/role:Role", "agent-role", {
  name: "llm-agent",
  // Only the controller's ServiceAccount: GPU-node agents hold no cloud role.
  assumeRolePolicy: JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Federated: "arn:aws:iam::123456789012:oidc-provider/x" },
        Action: "sts:AssumeRoleWithWebIdentity",
        Condition: { StringEquals: { "oidc.eks.us-east-1.amazonaws.com/id/X:sub": "system:serviceaccount:llm-ha:llm-ha-controller", "oidc.eks.us-east-1.amazonaws.com/id/X:aud": "sts.amazonaws.com" } },
      },
    ],
  }),
  tags: { ...TAGS, "llm-ha.io/identity": "agent" },
});

const agentPolicy = res("aws:iam/rolePolicy:RolePolicy", "agent-actuator", {
  role: "llm-agent",
  policy: JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      { Sid: "ReadState", Effect: "Allow", Action: ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScheduledActions", "autoscaling:DescribeScalingActivities", "arc-zonal-shift:ListZonalShifts", "ec2:DescribeCapacityReservations"], Resource: "*" },
      {
        Sid: "WakeStandbyGroups",
        Effect: "Allow",
        Action: ["autoscaling:UpdateAutoScalingGroup", "autoscaling:SuspendProcesses", "autoscaling:ResumeProcesses", "autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"],
        Resource: ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-gpu-us-east-1c-h100-asg"],
      },
      {
        Sid: "ShiftZoneLoadBalancers",
        Effect: "Allow",
        Action: ["arc-zonal-shift:StartZonalShift", "arc-zonal-shift:UpdateZonalShift", "arc-zonal-shift:CancelZonalShift", "arc-zonal-shift:GetManagedResource"],
        Resource: ["arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1a/0123456789abcdef"],
      },
    ],
  }),
});

// The control plane's log group, made before the cluster with a retention (eks-control-plane-log-retention).
const eksLogs = res("aws:cloudwatch/logGroup:LogGroup", "eks-logs", { name: "/aws/eks/eks/cluster", retentionInDays: 90, tags: TAGS });

const eks = res("aws:eks/cluster:Cluster", "eks", {
  version: "1.36",
  upgradePolicy: { supportType: "STANDARD" },
  roleArn: "arn:aws:iam::123456789012:role/cluster",
  vpcConfig: { subnetIds: ["private-us-east-1a-id", "private-us-east-1b-id", "private-us-east-1c-id"] },
  enabledClusterLogTypes: ["api", "audit", "authenticator"],
  tags: TAGS,
});
eks.opts = { dependsOn: [eksLogs.urn] };

/** A fresh copy of the valid stack: three AZs, us-east-1c the standby. */
export function happyStack(): CapturedResource[] {
  const azs = ["us-east-1a", "us-east-1b", "us-east-1c"];
  const resources = [
    vpc,
    ...azs.map(subnet),
    ...azs.map(launchTemplate),
    ...azs.map((az) => nodeGroup(az, az === "us-east-1c" ? "standby" : "active")),
    ...fallbackGroup("us-east-1c"),
    inference,
    rolloutConfigMap,
    pdb,
    agent,
    l1Service,
    nlbSg,
    ...NLB_RULES,
    l1Config,
    failoverRecord("us-east-1a", "PRIMARY"),
    failoverRecord("us-east-1a", "SECONDARY"),
    weightedRecord("us-east-1a"),
    weightedRecord("us-east-1b"),
    weightedRecord("us-east-1c"),
    healthCheck("us-east-1a"),
    healthCheck("us-east-1b"),
    healthCheck("us-east-1c"),
    redis,
    msk,
    mskLogs,
    schedule("standby-down", 0),
    schedule("standby-up", 2),
    nodeSg,
    httpsIn,
    eksLogs,
    eks,
    agentRole,
    agentPolicy,
  ];
  return structuredClone(resources);
}

/** The resource named `name` in `resources` (mutable: tests change one property of it). */
export function find(resources: CapturedResource[], name: string): CapturedResource {
  const r = resources.find((x) => x.name === name);
  if (!r) throw new Error(`fixture has no resource ${name}`);
  return r;
}

/** The valid stack with one change applied to resource `name`'s props. */
export function changed(name: string, change: (props: Record<string, unknown>) => void): CapturedResource[] {
  const resources = happyStack();
  change(find(resources, name).props);
  return resources;
}

/** Messages one policy reports over `resources`. */
export async function messages(policy: Policies[number], resources: CapturedResource[], config?: PackConfig): Promise<string[]> {
  const v = await runPolicies([policy], resources, { config });
  return v.map((x) => x.message);
}

/** `obj.a.b.c`-style access for nested fixture edits. */
export function at(obj: Record<string, unknown>, path: string): Record<string, unknown> {
  let cur: unknown = obj;
  for (const key of path.split(".")) {
    cur = (cur as Record<string, unknown>)[key];
    if (typeof cur !== "object" || cur === null) throw new Error(`fixture path ${path} broke at ${key}`);
  }
  return cur as Record<string, unknown>;
}
