import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { GpuClassConfig, standbySize, type PracticeWakeConfig } from "../config";
import { APP, edgeNamespaceOf, NAMESPACE_NAME, WORKLOADS_NAMESPACE, type NetRole } from "../names";
import { createSecurityGroupPolicies } from "../fences";
import { Problems } from "../problems";
import { agentDaemonSet, agentServiceAccount } from "./agent";
import { controllerManifests, type AgentActuatorEnv, type ControllerRepairEnv, type KarpenterEnv } from "./controller";
import { createControllerAccess } from "./controller-access";
import { objectName } from "./common";
import { DEVICE_PLUGIN_IMAGE, devicePluginDaemonSet } from "./device-plugin";
import { dcgmExporterDaemonSet } from "./dcgm-exporter";
import { inferenceHeadlessService, inferenceManifests, modelRevisionOf, rolloutIgnoreChanges } from "./inference";
import { inferenceDeploymentNames, rolloutConfigMap } from "./rollout";
import { fallbackProviderObjects, fallbackServiceAccount, type FallbackProvider, type FallbackSidecarSpec } from "./fallback";
import { l1ProxyManifests, type L1Cpu } from "./l1-proxy";
import { L1_METRICS_LISTENERS, l1MetricsNetworkPolicy, workloadNetworkPolicies } from "./network-policies";
import { EDGE_POD_SECURITY, namespaceManifest, POD_READINESS_GATE_LABEL, WORKLOADS_POD_SECURITY } from "./namespaces";
import { REDIS_ROLE_TIER, redisSecretParts, type RedisWorkloadRole } from "./redis-secret";
import { DEFAULT_PROMETHEUS_NAMESPACE } from "./fallback-names";

export interface WorkloadsArgs {
  /** Kubernetes provider of the cluster. Required. */
  provider: k8s.Provider;
  /** EKS cluster name: `LLMHA_CLUSTER` and the NLB names. Required. */
  clusterName: string;
  /** AZs with their public subnet (each AZ's NLB lives in its own only). Required, ≥ 2. */
  azs: { az: string; publicSubnetId: pulumi.Input<string> }[];
  /** GPU classes deployed in every AZ. Required. */
  gpuClasses: GpuClassConfig[];
  /** vLLM image, model, GPUs per pod (default: all of the node's), extra args, S3 copy of the weights. Required. */
  /** `weightsLoad`, `region`: how the pods read `weightsS3Uri` (see `InferenceSpec`). */
  inference: { image: pulumi.Input<string>; model: string; gpusPerPod?: number; extraArgs?: string[]; weightsS3Uri?: string; weightsLoad?: "stream" | "sync"; region?: string };
  /** The S3 prefetch image (aws-cli), by digest. Required with `inference.weightsS3Uri` and `weightsLoad: "sync"`. */
  awsCliImage?: pulumi.Input<string>;
  /** The API key vLLM requires on its `/v1` routes: a Secret, `VLLM_API_KEY` of the servers and a file for the agents. Default none (vLLM open inside the VPC). */
  inferenceApiKey?: pulumi.Input<string>;
  /** The NLBs' TLS listeners; null: clear text (a dev stack's explicit waiver). Required. */
  tls: { certificateArn: string; sslPolicy: string } | null;
  /** The agent image (agent/Dockerfile), by digest. Required. */
  agentImage: pulumi.Input<string>;
  /** Hugging Face token for gated models: kept in a Secret, `HF_TOKEN` of the inference pods. Default none. */
  hfToken?: pulumi.Input<string>;
  /** IAM role (IRSA) of the inference pods' ServiceAccount: reads `inference.weightsS3Uri`. Default none. */
  inferenceRoleArn?: pulumi.Input<string>;
  /** The AWS Load Balancer Controller: every NLB Service waits for it. Required for the NLBs to get an address. */
  lbController?: pulumi.Resource;
  /** `rediss://:<token>@<host>:6379`, kept in a Secret: where the AUTH token authenticates (no roles). Required for each role without its own URL. */
  redisUrl?: pulumi.Input<string>;
  /**
   * Per-role URLs where Redis roles are on (`llm-ha:redisRolePasswords`): the GPU-node agents log
   * in as `llmha-agent`, the controller as `llmha-controller`, each from its own Secret. Default
   * none: both use `redisUrl`.
   */
  redisRoleUrls?: Partial<Record<RedisWorkloadRole, pulumi.Input<string>>>;
  /** VPC CIDR: where the pods' egress to Redis, MSK and the GPU nodes goes. Required. */
  vpcCidr: string;
  /** The NLBs' subnets: their target health checks reach the L1 monitor port from there. Required. */
  nlbCidrs: readonly string[];
  /**
   * Security groups for pods (infra/fences.ts): each role's group, given to its pods by a
   * SecurityGroupPolicy made here in the edge namespace, before the pods; `dependsOn` what ships
   * their CRD (vpc-cni). Default none (no SecurityGroupPolicy).
   */
  podFences?: { groupIds: Record<NetRole, pulumi.Input<string>>; dependsOn?: pulumi.Resource[] };
  /** The L1 NLBs' frontend security group (`Fences.nlbFrontend`: :8081 from Route53's checkers only). Default none: the controller's own, open to the world. */
  nlbSecurityGroupId?: pulumi.Input<string>;
  /**
   * Namespace of the host's pods (agents, vLLM) and the headless Services. Default `llm-ha`. The
   * L1 tier and the controller go to `<namespace>-edge` (PSA `restricted`, workloads/namespaces.ts).
   */
  namespace?: string;
  /** HAProxy image, by digest: 2.6, the major version the drill and the tests run (Debian 12 ships 2.6.12), so what is measured is what serves; 2.6 is an LTS branch. Required. */
  haproxyImage: pulumi.Input<string>;
  /** HAProxy pods per AZ (default 2), and HAProxy's CPU limit and threads in each (`llm-ha:haproxy.cpu`, `.nbthread`; default `L1_CPU`: 2 cores, 2 threads). */
  haproxyReplicas?: number;
  haproxyCpu?: L1Cpu;
  /** NVIDIA device plugin image; `null`: none (an existing cluster runs its own, which preflight checks). Default `DEVICE_PLUGIN_IMAGE`. */
  devicePluginImage?: string | null;
  /** NVIDIA DCGM exporter image, by digest (infra/workloads/dcgm-exporter.ts). Default none: no exporter. */
  dcgmExporterImage?: pulumi.Input<string>;
  /** The AZ the schedule scales to zero (`LLMHA_STANDBY_AZ`). Default none. */
  standbyAz?: string;
  /** The standby AZ's size relative to an active AZ's, in (0, 1]: its inference replicas and `LLMHA_STANDBY_CAPACITY_PERCENT`. Default 1. */
  standbyCapacityRatio?: number;
  /** Practice wakes of the standby (`LLMHA_PRACTICE_WAKE*`). Default none. */
  practiceWake?: PracticeWakeConfig;
  /**
   * Node identities (`llm-ha:nodeIdentities`): the agents enrol with a projected token (their own
   * ServiceAccount, audience `llm-ha`), the controller verifies it against the cluster's issuer
   * (`issuer`: EKS's OIDC issuer URL). Default none: no identity token, the DaemonSets annotated so.
   */
  nodeIdentities?: { issuer: pulumi.Input<string> };
  /** The controller's AWS actuator: the IRSA role for its ServiceAccount (never the GPU-node agents') and its settings. Default none. */
  agentActuator?: AgentActuatorEnv & { roleArn: pulumi.Input<string> };
  /** The Karpenter engine (`llm-ha:capacity.engine: karpenter`): the controller's settings, the pools and placeholder its RBAC names. Default none (ASG). */
  karpenter?: { env: KarpenterEnv; pools: string[]; placeholder?: string };
  /** The repair ladder (`LLMHA_REPAIR_*`); `act` (needs `agentActuator`) also gets the repair RBAC in the workloads namespace. Default none (the agent's advise). */
  repair?: Omit<ControllerRepairEnv, "namespace">;
  /**
   * The L4 fallback (`llm-ha fallback`, docs/fallback.md) beside each AZ's L1 proxy: its IRSA
   * role (`FallbackIam`), MSK's IAM bootstrap brokers, the models it serves and its upstreams
   * in order of priority (keys are Pulumi secrets). Default none: the L1 proxies as before.
   */
  fallback?: {
    roleArn: pulumi.Input<string>;
    kafkaBootstrap: pulumi.Input<string>;
    region: string;
    models: string[];
    providers?: FallbackProvider[];
    maxQueueDepth?: number;
    replayRps?: number;
  };
  /**
   * Namespace of the Prometheus that scrapes llm-ha: the only one let in to the metrics ports
   * (HAProxy's 8404, the fallback's 9411, the continuation relay's 9421, the controller's and the
   * GPU pods'). Default `monitoring`. (Was `fallback.prometheusNamespace`.)
   */
  prometheusNamespace?: string;
}

export { EDGE_POD_SECURITY, WORKLOADS_POD_SECURITY } from "./namespaces";
export { redisSecretParts, type RedisWorkloadRole } from "./redis-secret";

/** The Secret holding the Hugging Face token (`token`). */
export const HF_TOKEN_SECRET = "llm-ha-hf-token";
/** The Secret holding the inference API key (`key`). */
export const INFERENCE_KEY_SECRET = "llm-ha-inference-key";
/** The inference pods' ServiceAccount (IRSA for the S3 weights). */
export const INFERENCE_SERVICE_ACCOUNT = "llm-ha-inference";

/** NLB name of one AZ: at most 32 characters, unique per cluster and AZ. */
export function nlbName(clusterName: string, az: string): string {
  return objectName("l1", az, clusterName).slice(0, 32).replace(/-+$/, "");
}

/**
 * Everything that runs in the cluster: the NVIDIA device plugin, per (AZ, GPU class) an
 * inference Deployment and an agent DaemonSet (`LLMHA_ROLE=node`) and per AZ a headless Service
 * in the workloads namespace; the controller Deployment on the system nodes (the only holder of
 * the cloud role) and per AZ the L1 HAProxy tier behind its own NLB in the edge namespace; and
 * NetworkPolicies in both.
 */
export class Workloads extends pulumi.ComponentResource {
  /** NLB name per AZ. */
  readonly nlbNames: Record<string, string>;
  /** NLB DNS name per AZ, as the load balancer controller reports it. */
  readonly nlbHostnames: Record<string, pulumi.Output<string>>;
  /** The workloads namespace: what else lives in it (the observability ConfigMaps) is created after it. */
  readonly namespace: k8s.core.v1.Namespace;

  constructor(name: string, args: WorkloadsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Workloads", name, {}, opts);
    const r = createWorkloads(name, args, this);
    this.nlbNames = r.nlbNames;
    this.nlbHostnames = r.nlbHostnames;
    this.namespace = r.namespace;
    this.registerOutputs({ nlbNames: this.nlbNames, nlbHostnames: this.nlbHostnames });
  }
}

function validate(args: WorkloadsArgs): void {
  const p = new Problems();
  if (args.azs.length < 2) p.add("azs", "needs at least 2 AZs: L2 backups come from the other AZs");
  args.gpuClasses.forEach((c, i) => {
    const gpus = args.inference.gpusPerPod ?? c.gpusPerNode;
    if (gpus > c.gpusPerNode) p.add(`inference.gpusPerPod`, `${gpus} GPUs do not fit a ${c.name} node (${c.gpusPerNode}) [gpuClasses[${i}]]`);
  });
  if (args.repair?.mode === "act" && !args.agentActuator) p.add("repair", "act needs agentActuator: the reboot goes through the controller's IAM role");
  if ((args.haproxyReplicas ?? 2) < 1) p.add("haproxyReplicas", "must be ≥ 1");
  // The edge namespace is named after it (`<namespace>-edge`): both must be DNS-1123 labels.
  const edge = edgeNamespaceOf(args.namespace ?? WORKLOADS_NAMESPACE);
  if (!NAMESPACE_NAME.test(edge)) p.add("namespace", `must be a namespace name of at most 58 characters (its edge namespace is ${JSON.stringify(edge)})`);
  p.throwIfAny("Workloads arguments");
}

export function createWorkloads(name: string, args: WorkloadsArgs, parent: pulumi.Resource) {
  validate(args);
  const opts = { parent, provider: args.provider };
  const prometheusNamespace = args.prometheusNamespace ?? DEFAULT_PROMETHEUS_NAMESPACE;
  // Two namespaces (workloads/namespaces.ts): the host's pods, `privileged`; the L1 tier and the controller, `restricted`.
  const namespace = args.namespace ?? WORKLOADS_NAMESPACE;
  const edgeNamespace = edgeNamespaceOf(namespace);
  const ns = new k8s.core.v1.Namespace(`${name}-ns`, namespaceManifest(namespace, WORKLOADS_POD_SECURITY), opts);
  const edgeNs = new k8s.core.v1.Namespace(`${name}-edge-ns`, namespaceManifest(edgeNamespace, EDGE_POD_SECURITY, POD_READINESS_GATE_LABEL), opts);
  const inNs = { ...opts, dependsOn: [ns] };
  const inEdge = { ...opts, dependsOn: [edgeNs] };
  const tiers = { workloads: { namespace, opts: inNs, id: name }, edge: { namespace: edgeNamespace, opts: inEdge, id: `${name}-edge` } };
  const sgps = args.podFences
    ? createSecurityGroupPolicies(`${name}-edge`, args.podFences.groupIds, edgeNamespace, { ...opts, dependsOn: [edgeNs, ...(args.podFences.dependsOn ?? [])] })
    : [];

  // `endpoint` (the URL without its password) and `password`, which every client reads as a file
  // (workloads/redis-secret.ts). The one URL's Secret, per namespace that has a role without its own user.
  const sharedRedis = new Map<keyof typeof tiers, k8s.core.v1.Secret>();
  const sharedRedisIn = (tier: keyof typeof tiers): k8s.core.v1.Secret => {
    const t = tiers[tier];
    if (args.redisUrl === undefined) throw new Error("Workloads: a Redis role has neither its own URL (redisRoleUrls) nor the shared redisUrl");
    const redisUrl = args.redisUrl;
    const secret = sharedRedis.get(tier) ?? new k8s.core.v1.Secret(`${t.id}-redis`, { metadata: { name: "llm-ha-redis", namespace: t.namespace }, type: "Opaque", stringData: redisSecretParts(redisUrl) }, t.opts);
    sharedRedis.set(tier, secret);
    return secret;
  };
  // Each role its own Redis user where roles are on, else the one URL; in the namespace of its pods.
  const roleSecret = (role: RedisWorkloadRole): { secret: k8s.core.v1.Secret; name: string } => {
    const url = args.redisRoleUrls?.[role];
    const t = tiers[REDIS_ROLE_TIER[role]];
    if (url === undefined) return { secret: sharedRedisIn(REDIS_ROLE_TIER[role]), name: "llm-ha-redis" };
    const secretName = `llm-ha-redis-${role}`;
    return {
      secret: new k8s.core.v1.Secret(`${name}-redis-${role}`, { metadata: { name: secretName, namespace: t.namespace }, type: "Opaque", stringData: redisSecretParts(url) }, t.opts),
      name: secretName,
    };
  };
  const agentRedis = roleSecret("agent");
  const agentDeps: pulumi.Resource[] = [ns, agentRedis.secret];
  const controllerRedis = roleSecret("controller");
  const controllerDeps: pulumi.Resource[] = [edgeNs, controllerRedis.secret, ...sgps];
  // The L1 pod's two Redis clients, each its own user: the fallback (its keys, the tier) and the key sync (the client keys).
  const edgeRedis = roleSecret("edge");
  // The controller's ServiceAccount: the cloud role (IRSA) when it acts, and always the read of the GPU Nodes (its inventory).
  const identities = args.nodeIdentities !== undefined;
  // Act-mode repairs (drain/restart inference pods) and rollouts (workloads/rollout.ts) act in the inference namespace only.
  const repairNamespace = args.repair?.mode === "act" ? namespace : undefined;
  controllerDeps.push(...createControllerAccess(name, { namespace: edgeNamespace, roleArn: args.agentActuator?.roleArn, identities, repairNamespace, karpenter: args.karpenter && { ...args.karpenter, namespace }, rollout: { namespace, deployments: inferenceDeploymentNames(args.azs.map((a) => a.az), args.gpuClasses) } }, opts, inEdge, inNs));
  new k8s.core.v1.ConfigMap(`${name}-rollout`, rolloutConfigMap(namespace, modelRevisionOf(args.inference), args.inference.image), inNs);
  // Node identities: the agents' own ServiceAccount (no role bound, no API token), which names their identity tokens.
  if (identities) agentDeps.push(new k8s.core.v1.ServiceAccount(`${name}-agent`, agentServiceAccount(namespace), inNs));
  // The controller on the system nodes, one replica per AZ: it alone leads and acts.
  const ctl = controllerManifests({
    namespace: edgeNamespace,
    image: args.agentImage,
    clusterName: args.clusterName,
    redisSecretName: controllerRedis.name,
    replicas: args.azs.length,
    standbyAz: args.standbyAz, practiceWake: args.practiceWake,
    standbyCapacityPercent: Math.round((args.standbyCapacityRatio ?? 1) * 100),
    actuator: args.agentActuator,
    identityIssuer: args.nodeIdentities?.issuer,
    repair: args.repair ? { ...args.repair, namespace: repairNamespace } : undefined,
    karpenter: args.karpenter?.env, rolloutNamespace: namespace,
  });
  new k8s.apps.v1.Deployment(`${name}-controller`, ctl.deployment, { ...opts, dependsOn: controllerDeps, customTimeouts: { create: "10m", update: "10m" } });
  new k8s.policy.v1.PodDisruptionBudget(`${name}-controller`, ctl.pdb, inEdge);
  let hfTokenSecretName: string | undefined;
  if (args.hfToken !== undefined) {
    hfTokenSecretName = HF_TOKEN_SECRET;
    new k8s.core.v1.Secret(
      `${name}-hf-token`,
      { metadata: { name: HF_TOKEN_SECRET, namespace }, type: "Opaque", stringData: { token: pulumi.secret(args.hfToken) } },
      inNs,
    );
  }
  // The inference API key in both namespaces: the agents (workloads) and HAProxy (edge) each read their own copy.
  let inferenceKeySecretName: string | undefined;
  let inferenceKeySecret: k8s.core.v1.Secret | undefined;
  if (args.inferenceApiKey !== undefined) {
    const key = args.inferenceApiKey;
    const keySecret = (tier: keyof typeof tiers) =>
      new k8s.core.v1.Secret(`${tiers[tier].id}-inference-key`, { metadata: { name: INFERENCE_KEY_SECRET, namespace: tiers[tier].namespace }, type: "Opaque", stringData: { key: pulumi.secret(key) } }, tiers[tier].opts);
    inferenceKeySecretName = INFERENCE_KEY_SECRET;
    agentDeps.push(keySecret("workloads"));
    inferenceKeySecret = keySecret("edge");
  }
  let inferenceServiceAccount: string | undefined;
  if (args.inferenceRoleArn !== undefined) {
    inferenceServiceAccount = INFERENCE_SERVICE_ACCOUNT;
    new k8s.core.v1.ServiceAccount(
      `${name}-inference`,
      {
        metadata: {
          name: INFERENCE_SERVICE_ACCOUNT,
          namespace,
          labels: { "app.kubernetes.io/name": APP.inference, "app.kubernetes.io/part-of": "llm-ha" },
          annotations: { "eks.amazonaws.com/role-arn": args.inferenceRoleArn },
        },
      },
      inNs,
    );
  }
  // Runs on GPU nodes only: with none yet (they scale up after creation) it is ready at once.
  if (args.devicePluginImage !== null) new k8s.apps.v1.DaemonSet(`${name}-device-plugin`, devicePluginDaemonSet(args.devicePluginImage ?? DEVICE_PLUGIN_IMAGE), { ...opts, customTimeouts: { create: "10m", update: "20m" } });
  // The GPUs' own telemetry for Prometheus, on GPU nodes only; likewise ready at once with none.
  if (args.dcgmExporterImage !== undefined) new k8s.apps.v1.DaemonSet(`${name}-dcgm-exporter`, dcgmExporterDaemonSet(args.dcgmExporterImage), { ...opts, customTimeouts: { create: "10m", update: "20m" } });

  const slots: Record<string, number> = {};
  for (const { az } of args.azs) slots[az] = args.gpuClasses.reduce((n, c) => n + c.maxPerAz, 0);
  const azNames = args.azs.map((a) => a.az);

  // The L4 fallback: one ServiceAccount (IRSA), providers.json and the keys' Secret, shared by every AZ's L1 pods.
  let fallback: FallbackSidecarSpec | undefined;
  // The edge's key sync reads Redis (the agents' Secret), with or without the fallback.
  const l1Deps: pulumi.Resource[] = [edgeNs, edgeRedis.secret, ...(inferenceKeySecret ? [inferenceKeySecret] : []), ...sgps];
  if (args.fallback) {
    const f = args.fallback;
    const fallbackRedis = roleSecret("fallback");
    fallback = {
      image: args.agentImage,
      namespace: edgeNamespace,
      cluster: args.clusterName,
      region: f.region,
      kafkaBootstrap: f.kafkaBootstrap,
      redisSecretName: fallbackRedis.name,
      models: f.models,
      providers: f.providers,
      maxQueueDepth: f.maxQueueDepth,
      replayRps: f.replayRps,
    };
    const objs = fallbackProviderObjects(fallback);
    l1Deps.push(
      fallbackRedis.secret,
      new k8s.core.v1.ServiceAccount(`${name}-fallback`, fallbackServiceAccount(edgeNamespace, f.roleArn), inEdge),
      new k8s.core.v1.ConfigMap(`${name}-fallback-providers`, objs.configMap, inEdge),
    );
    if (objs.secret) l1Deps.push(new k8s.core.v1.Secret(`${name}-fallback-keys`, objs.secret, inEdge));
    // Its metrics port (9411) is open to the Prometheus namespace only; its API stays on the pod's loopback.
    new k8s.networking.v1.NetworkPolicy(`${name}-fallback-metrics`, l1MetricsNetworkPolicy(edgeNamespace, L1_METRICS_LISTENERS.fallback, prometheusNamespace), inEdge);
  }
  // The continuation relay is in every L1 pod (l1ProxyManifests), fallback or not: its metrics port
  // (9421) likewise; its completions (9420) and HAProxy's continuation listener (9422) stay on loopback.
  new k8s.networking.v1.NetworkPolicy(`${name}-continue-metrics`, l1MetricsNetworkPolicy(edgeNamespace, L1_METRICS_LISTENERS.continuation, prometheusNamespace), inEdge);

  const nlbNames: Record<string, string> = {};
  const nlbHostnames: Record<string, pulumi.Output<string>> = {};
  for (const { az, publicSubnetId } of args.azs) {
    new k8s.core.v1.Service(`${name}-inference-${az}`, inferenceHeadlessService(namespace, az), inNs);
    for (const gpuClass of args.gpuClasses) {
      const id = `${name}-${az}-${gpuClass.name}`;
      // The standby AZ runs as many replicas as its (possibly smaller) groups have nodes.
      const ratio = args.standbyCapacityRatio ?? 1;
      const sized = az === args.standbyAz && ratio < 1 ? { ...gpuClass, desiredPerAz: standbySize(gpuClass, ratio).desired, maxPerAz: standbySize(gpuClass, ratio).max } : gpuClass;
      const inf = inferenceManifests({
        namespace,
        az,
        gpuClass: sized,
        ...args.inference,
        awsCliImage: args.awsCliImage,
        hfTokenSecretName,
        apiKeySecretName: inferenceKeySecretName,
        serviceAccountName: inferenceServiceAccount,
      });
      new k8s.apps.v1.Deployment(`${id}-inference`, inf.deployment, { ...inNs, ignoreChanges: rolloutIgnoreChanges(inf.deployment, args.inference.image) });
      new k8s.policy.v1.PodDisruptionBudget(`${id}-inference`, inf.pdb, inNs);
      new k8s.apps.v1.DaemonSet(
        `${id}-agent`,
        agentDaemonSet({
          namespace,
          az,
          gpuClass,
          image: args.agentImage,
          clusterName: args.clusterName,
          model: args.inference.model,
          redisSecretName: agentRedis.name,
          inferenceKeySecretName,
          nodeIdentities: identities,
        }),
        { ...opts, dependsOn: agentDeps },
      );
    }
    nlbNames[az] = nlbName(args.clusterName, az);
    const l1 = l1ProxyManifests({
      namespace: edgeNamespace,
      serversNamespace: namespace,
      az,
      azs: azNames,
      slots,
      image: args.haproxyImage,
      replicas: args.haproxyReplicas ?? 2, cpu: args.haproxyCpu,
      publicSubnetId,
      nlbName: nlbNames[az],
      tls: args.tls,
      frontendSecurityGroupId: args.nlbSecurityGroupId,
      fallback,
      // HAProxy sends the servers their own key (vLLM --api-key), never the client's.
      edge: { image: args.agentImage, cluster: args.clusterName, redisSecretName: edgeRedis.name, upstreamKeySecretName: inferenceKeySecretName },
    });
    const cm = new k8s.core.v1.ConfigMap(`${name}-l1-${az}`, l1.configMap, inEdge);
    // Explicit wait: Ready needs the system nodes, two image pulls (HAProxy, the agent image
    // for the fallback) and the fallback's Kafka/Redis connections; the default 10 minutes
    // is not a number anyone chose (policies/create-time.ts, waits-bounded).
    new k8s.apps.v1.Deployment(`${name}-l1-${az}`, l1.deployment, { ...opts, dependsOn: [...l1Deps, cm], customTimeouts: { create: "20m", update: "20m" } });
    new k8s.policy.v1.PodDisruptionBudget(`${name}-l1-${az}`, l1.pdb, inEdge);
    // The load balancer controller gives the Service its NLB; provisioning takes minutes. A
    // replaced Service (a new namespace) wants the same NLB name: the old one must go first.
    const svc = new k8s.core.v1.Service(`${name}-l1-${az}-nlb`, l1.service, {
      ...opts,
      dependsOn: args.lbController ? [edgeNs, args.lbController] : [edgeNs],
      customTimeouts: { create: "20m", update: "20m" },
      deleteBeforeReplace: true,
    });
    nlbHostnames[az] = svc.status.loadBalancer.ingress.apply((i) => i?.[0]?.hostname ?? "");
  }

  // Default deny both ways; what each pod role may take and call (docs/security.md "Network fences").
  const nps = workloadNetworkPolicies({ namespace, edgeNamespace, vpcCidr: args.vpcCidr, nlbCidrs: args.nlbCidrs, prometheusNamespace });
  for (const tier of ["workloads", "edge"] as const) {
    for (const [id, np] of Object.entries(nps[tier])) new k8s.networking.v1.NetworkPolicy(`${name}-${id}`, np, tiers[tier].opts);
  }
  return { nlbNames, nlbHostnames, namespace: ns };
}
