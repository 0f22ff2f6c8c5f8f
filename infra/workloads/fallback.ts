/**
 * The L4 fallback in Kubernetes: `llm-ha fallback` (the agent image) as a second
 * container in each AZ's L1 proxy pod, on 127.0.0.1:9410, which the pod's HAProxy sends a
 * request to only while no inference server of any AZ is usable; its AWS identity (IRSA)
 * with exactly the MSK IAM actions the queue needs (connect and describe the cluster; describe,
 * create, write and read its own topic; describe and alter its own consumer group) and nothing
 * else; upstream provider keys from Pulumi secrets, mounted as files (never in an env var
 * Kubernetes would show, never logged by the service).
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type * as k8s from "@pulumi/kubernetes";
import type { HaproxyFallback } from "../../contracts/haproxy-config";
import { irsaTrustPolicy } from "../agent-iam";
import { Problems } from "../problems";
import { tagged } from "../tags";
import type { ConfigMap } from "./common";
import { redisCredential } from "./redis-secret";
import { FALLBACK_METRICS_PORT, FALLBACK_METRICS_PORT_NAME, FALLBACK_PORT } from "./fallback-names";

export type Container = k8s.types.input.core.v1.Container;
export type Volume = k8s.types.input.core.v1.Volume;
export type Secret = k8s.types.input.core.v1.Secret;
export type ServiceAccount = k8s.types.input.core.v1.ServiceAccount;

export { DEFAULT_PROMETHEUS_NAMESPACE, FALLBACK_METRICS_PORT, FALLBACK_METRICS_PORT_NAME, FALLBACK_PORT, FALLBACK_SCRAPE_JOB } from "./fallback-names";
export const FALLBACK_SERVICE_ACCOUNT = "llmha-fallback";
/** Tag that marks the role as the fallback's, for the policy pack. */
export const FALLBACK_ROLE_TAG = Object.freeze({ key: "llm-ha.io/identity", value: "fallback" });
const KEYS_DIR = "/etc/llm-ha/provider-keys";
const PROVIDERS_DIR = "/etc/llm-ha/fallback";

/** The MSK IAM actions of the L4 queue, per resource kind. */
export const FALLBACK_MSK_ACTIONS = Object.freeze({
  cluster: ["kafka-cluster:Connect", "kafka-cluster:DescribeCluster"],
  topic: ["kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic", "kafka-cluster:WriteData", "kafka-cluster:ReadData"],
  group: ["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"],
});

/** `llmha.<cluster>.requests` and `llmha.<cluster>.replay`: what agent/src/edge/fallback/queue.ts uses. */
export function fallbackTopic(cluster: string): string {
  return `llmha.${cluster}.requests`;
}
export function fallbackGroup(cluster: string): string {
  return `llmha.${cluster}.replay`;
}

export class FallbackArnError extends Error {
  constructor(arn: string) {
    super(`not an MSK cluster ARN: ${arn}`);
    this.name = "FallbackArnError";
  }
}

/** `arn:aws:kafka:<r>:<a>:cluster/<name>/<uuid>` → `arn:aws:kafka:<r>:<a>:<kind>/<name>/<uuid>/<resource>`. */
export function mskResourceArn(clusterArn: string, kind: "topic" | "group", resource: string): string {
  const m = /^(arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:)cluster\/([^/]+\/[^/]+)$/.exec(clusterArn);
  if (!m) throw new FallbackArnError(clusterArn);
  return `${m[1]}${kind}/${m[2]}/${resource}`;
}

/** The permission policy of the fallback's role: its cluster, its topic, its group; no `*`. */
export function fallbackMskPolicy(clusterArn: string, cluster: string): string {
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      { Sid: "Cluster", Effect: "Allow", Action: [...FALLBACK_MSK_ACTIONS.cluster], Resource: clusterArn },
      { Sid: "QueueTopic", Effect: "Allow", Action: [...FALLBACK_MSK_ACTIONS.topic], Resource: mskResourceArn(clusterArn, "topic", fallbackTopic(cluster)) },
      { Sid: "ReplayGroup", Effect: "Allow", Action: [...FALLBACK_MSK_ACTIONS.group], Resource: mskResourceArn(clusterArn, "group", fallbackGroup(cluster)) },
    ],
  });
}

export interface FallbackIamArgs {
  /** EKS cluster name; the role is `<clusterName>-fallback`. */
  clusterName: string;
  /** llm-ha cluster name (topic and group names). */
  cluster: string;
  mskClusterArn: pulumi.Input<string>;
  oidcProviderArn: pulumi.Input<string>;
  oidcProviderUrl: pulumi.Input<string>;
  namespace: string;
}

/** The fallback's IRSA role: only its ServiceAccount may assume it; MSK IAM on its topic and group only. */
export class FallbackIam extends pulumi.ComponentResource {
  readonly role: aws.iam.Role;
  readonly roleArn: pulumi.Output<string>;

  constructor(name: string, args: FallbackIamArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:FallbackIam", name, {}, opts);
    const p = new Problems();
    if (!/^[A-Za-z0-9_.-]+$/.test(args.cluster)) p.add("cluster", `must match [A-Za-z0-9_.-]+, got ${JSON.stringify(args.cluster)}`);
    p.throwIfAny("FallbackIam arguments");
    const o = { parent: this };
    this.role = new aws.iam.Role(
      `${name}-role`,
      {
        name: `${args.clusterName}-fallback`,
        description: "llm-ha fallback (IRSA): produces the L4 queue to MSK and replays it",
        assumeRolePolicy: pulumi
          .all([args.oidcProviderArn, args.oidcProviderUrl])
          .apply(([arn, url]) => irsaTrustPolicy(arn, url, args.namespace, FALLBACK_SERVICE_ACCOUNT)),
        // Marks the identity for the policy pack (only this role may write the L4 topic).
        tags: tagged({ [FALLBACK_ROLE_TAG.key]: FALLBACK_ROLE_TAG.value }),
      },
      o,
    );
    new aws.iam.RolePolicy(`${name}-msk`, { role: this.role.id, policy: pulumi.output(args.mskClusterArn).apply((arn) => fallbackMskPolicy(arn, args.cluster)) }, o);
    this.roleArn = this.role.arn;
    this.registerOutputs({ roleArn: this.roleArn });
  }
}

/** One external provider; its key is a Pulumi secret. */
export interface FallbackProvider {
  name: string;
  url: string;
  priority?: number;
  timeoutMs?: number;
  models: Record<string, string>;
  key?: pulumi.Input<string>;
}

export interface FallbackSidecarSpec {
  /** The agent image (it carries `llm-ha fallback`). */
  image: pulumi.Input<string>;
  namespace: string;
  /** llm-ha cluster name (Redis namespace, topic). */
  cluster: string;
  region: string;
  /** MSK bootstrap brokers for IAM (`bootstrapBrokersSaslIam`). */
  kafkaBootstrap: pulumi.Input<string>;
  /** Secret with the Redis URL under `url` (the agent's). */
  redisSecretName: string;
  /** Models served; others get 404. */
  models: string[];
  providers?: FallbackProvider[];
  /** Queue depth cap. Default the service's (100000). */
  maxQueueDepth?: number;
  /** Replay pace through the L1 proxy. Default 5/s. */
  replayRps?: number;
}

/** The `fallback` of the L1 proxy's generator input: the container beside HAProxy. */
export function fallbackProxyField(): HaproxyFallback {
  return { address: `127.0.0.1:${FALLBACK_PORT}` };
}

const objectNameOf = (kind: string): string => `llmha-fallback-${kind}`;

/** providers.json (keyFile paths into the keys Secret) and the Secret holding the keys. */
export function fallbackProviderObjects(s: FallbackSidecarSpec): { configMap: ConfigMap; secret: Secret | null } {
  const providers = s.providers ?? [];
  const p = new Problems();
  const names = new Set<string>();
  for (const pr of providers) {
    if (!/^[A-Za-z0-9_.-]+$/.test(pr.name)) p.add(`providers.${pr.name}`, "name must match [A-Za-z0-9_.-]+");
    if (names.has(pr.name)) p.add(`providers.${pr.name}`, "listed twice");
    names.add(pr.name);
  }
  p.throwIfAny("fallback providers");
  const json = providers.map((pr, i) => ({
    name: pr.name, url: pr.url, priority: pr.priority ?? i, timeoutMs: pr.timeoutMs ?? 10_000, models: pr.models,
    ...(pr.key !== undefined ? { keyFile: `${KEYS_DIR}/${pr.name}` } : {}),
  }));
  const labels = { "app.kubernetes.io/name": "llm-ha-fallback", "app.kubernetes.io/part-of": "llm-ha" };
  const configMap: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: objectNameOf("providers"), namespace: s.namespace, labels }, data: { "providers.json": JSON.stringify(json, null, 2) } };
  const keyed = providers.filter((pr) => pr.key !== undefined);
  const secret: Secret | null = keyed.length
    ? { apiVersion: "v1", kind: "Secret", type: "Opaque", metadata: { name: objectNameOf("keys"), namespace: s.namespace, labels }, stringData: Object.fromEntries(keyed.map((pr) => [pr.name, pulumi.secret(pr.key!)])) }
    : null;
  return { configMap, secret };
}

export function fallbackServiceAccount(namespace: string, roleArn: pulumi.Input<string>): ServiceAccount {
  return { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: FALLBACK_SERVICE_ACCOUNT, namespace, annotations: { "eks.amazonaws.com/role-arn": roleArn } } };
}

/** An exec probe for the agent image (node): exits 0 when `GET http://127.0.0.1:<port><path>` answers 2xx within 2 s. */
export function loopbackProbeCommand(port: number, path: string): string[] {
  const url = `http://127.0.0.1:${port}${path}`;
  return ["node", "-e", `fetch(${JSON.stringify(url)},{signal:AbortSignal.timeout(2000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`];
}

/** The container beside HAProxy; replays go through the pod's own HAProxy, on its loopback frontend without the edge (`l1Port`: 8082). */
export function fallbackContainer(s: FallbackSidecarSpec, l1Port: number): Container {
  const env = (name: string, value: pulumi.Input<string>) => ({ name, value });
  const hasKeys = (s.providers ?? []).some((p) => p.key !== undefined);
  return {
    name: "fallback",
    image: s.image,
    args: ["fallback"],
    env: [
      env("LLMHA_CLUSTER", s.cluster),
      env("LLMHA_FALLBACK_HOST", "127.0.0.1"),
      env("LLMHA_FALLBACK_PORT", String(FALLBACK_PORT)),
      // Prometheus scrapes this one (the NetworkPolicy lets only its namespace in); the API stays on loopback.
      env("LLMHA_FALLBACK_METRICS_ADDR", `0.0.0.0:${FALLBACK_METRICS_PORT}`),
      // Its own Redis user (`llmha-fallback` where roles are on): the fallback's keys and the tier, nothing else.
      ...redisCredential(s.redisSecretName, FALLBACK_REDIS_VOLUME).env,
      env("LLMHA_FALLBACK_MODELS", s.models.join(",")),
      env("LLMHA_FALLBACK_PROVIDERS_FILE", `${PROVIDERS_DIR}/providers.json`),
      env("LLMHA_KAFKA_BROKERS", s.kafkaBootstrap),
      env("LLMHA_KAFKA_AUTH", "msk-iam"),
      env("LLMHA_KAFKA_REGION", s.region),
      env("LLMHA_FALLBACK_L1_URL", `http://127.0.0.1:${l1Port}`),
      ...(s.maxQueueDepth ? [env("LLMHA_FALLBACK_MAX_QUEUE_DEPTH", String(s.maxQueueDepth))] : []),
      ...(s.replayRps ? [env("LLMHA_FALLBACK_REPLAY_RPS", String(s.replayRps))] : []),
    ],
    ports: [
      { name: "fallback", containerPort: FALLBACK_PORT },
      { name: FALLBACK_METRICS_PORT_NAME, containerPort: FALLBACK_METRICS_PORT },
    ],
    // The API listens on the pod's loopback only, and the kubelet probes from the node (an
    // httpGet with host 127.0.0.1 would hit the node's loopback): the probes run inside the
    // container, where 127.0.0.1 is the pod's.
    readinessProbe: { exec: { command: loopbackProbeCommand(FALLBACK_PORT, "/readyz") }, periodSeconds: 5, failureThreshold: 2, timeoutSeconds: 3 },
    livenessProbe: { exec: { command: loopbackProbeCommand(FALLBACK_PORT, "/livez") }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 3 },
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } },
    securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
    volumeMounts: [
      { name: "fallback-providers", mountPath: PROVIDERS_DIR, readOnly: true },
      redisCredential(s.redisSecretName, FALLBACK_REDIS_VOLUME).mount,
      ...(hasKeys ? [{ name: "fallback-keys", mountPath: KEYS_DIR, readOnly: true }] : []),
    ],
  };
}

const FALLBACK_REDIS_VOLUME = "fallback-redis";

/** The pod volumes the container mounts. */
export function fallbackVolumes(s: FallbackSidecarSpec): Volume[] {
  const hasKeys = (s.providers ?? []).some((p) => p.key !== undefined);
  return [
    { name: "fallback-providers", configMap: { name: objectNameOf("providers") } },
    redisCredential(s.redisSecretName, FALLBACK_REDIS_VOLUME).volume,
    ...(hasKeys ? [{ name: "fallback-keys", secret: { secretName: objectNameOf("keys"), defaultMode: 0o440 } }] : []),
  ];
}
