import * as pulumi from "@pulumi/pulumi";
import { AgentImage } from "./agent-image";
import { ImageCache } from "./image-cache";
import { IMAGES, pullRef, pullRefOf } from "./images";
import { verifiedChartArchive, type PinnedChart } from "./chart-archive";
import { createLbController, LB_CONTROLLER_CHART } from "./lb-controller";
import { createWeightsReaderRole } from "./weights-iam";
import { loadConfig } from "./config";
import { capacityWeights, Dns } from "./dns";
import { Fences } from "./fences";
import { Gameday } from "./gameday";
import { gpuCapacity } from "./capacity";
import { existingFoundation, ownFoundation } from "./foundation";
import { createPlaceholder } from "./karpenter-resources";
import { controllerActuation } from "./controller-actuator";
import { Kafka } from "./kafka";
import { Observability } from "./observability";
import { Redis } from "./redis";
import { StandbySchedule } from "./standby-schedule";
import { INFERENCE_SERVICE_ACCOUNT, Workloads, type WorkloadsArgs } from "./workloads";
import { FallbackIam } from "./workloads/fallback";
import { EDGE_NAMESPACE, WORKLOADS_NAMESPACE } from "./names";

/** What `pulumi stack output` shows. */
export interface StackOutputs {
  clusterName: pulumi.Output<string>;
  /** Secret: `pulumi stack output kubeconfig --show-secrets > kubeconfig`. */
  kubeconfig: pulumi.Output<string>;
  /** The name clients use (Route53 failover over the AZs). */
  serviceDnsName: pulumi.Output<string>;
  /** NLB name per AZ. */
  nlbNames: pulumi.Output<Record<string, string>>;
  /** NLB DNS name per AZ. */
  nlbHostnames: pulumi.Output<Record<string, string>>;
  redisEndpoint: pulumi.Output<string>;
  kafkaBootstrapBrokers: pulumi.Output<string>;
  /** The stack's ECR repository for the agent image. */
  agentRepositoryUrl: pulumi.Output<string>;
  /** The security group to give Prometheus (a SecurityGroupPolicy in its namespace): it alone scrapes the GPU nodes' fenced ports. */
  scraperSecurityGroupId: pulumi.Output<string>;
  /** The GPU nodes' only security group (infra/fences.ts): what an adopted EC2NodeClass or node group's launch template must select. */
  gpuNodeSecurityGroupId: pulumi.Output<string>;
  /**
   * GPU node groups created below their running size (scarce types with no reservation or
   * Capacity Block start at 0), each with the size to scale it to after `pulumi up`:
   * docs/infra.md "From an empty account", step 6.
   */
  gpuScaleUp: pulumi.Output<Record<string, number>>;
}

/** What the program reaches outside the cloud APIs; the offline runs (infra/capture.ts) give their own. */
export interface StackDeps {
  /**
   * The local path of a pinned chart's archive, checked against its digest (`archivePath`: the
   * runner's copy from `llm-ha:charts`). Default `verifiedChartArchive`: downloads and checks.
   */
  chartArchive?: (chart: PinnedChart, archivePath: string | undefined) => Promise<string>;
}

/**
 * Builds the whole stack from the validated stack configuration. Asynchronous for one reason:
 * the pinned chart archives are fetched and checked before the first resource is registered,
 * so an archive that is not the pinned one stops preview and up alike with nothing created.
 */
export async function createStack(deps: StackDeps = {}): Promise<StackOutputs> {
  const c = loadConfig();
  const chartArchive = deps.chartArchive ?? ((chart, archivePath) => verifiedChartArchive(chart, { archivePath }));
  // An existing cluster runs its own load balancer controller (preflight checks it): no chart to fetch.
  const lbChartArchive = c.existingCluster === undefined ? await chartArchive(LB_CONTROLLER_CHART, c.charts.lbControllerArchive) : undefined;
  const base = c.existingCluster === undefined ? ownFoundation(c) : await existingFoundation(c);
  const cluster = base.own?.cluster;
  // Security groups for the GPU nodes and the pods that call them, Redis or MSK (docs/security.md "Network fences").
  const fences = new Fences("fence", {
    vpcId: base.vpcId,
    vpcCidr: base.vpcCidr,
    clusterName: c.clusterName,
    clusterSecurityGroupId: base.clusterSecurityGroupId,
    apiPort: c.edge.certificateArn ? 443 : 80,
  });
  const capacity = await gpuCapacity(c, base, fences.gpuNodes.id);
  if (c.schedule !== undefined && capacity.groups.length > 0) new StandbySchedule("standby", { groups: capacity.groups, schedule: c.schedule });

  // One private subnet per AZ: MSK puts brokersPerAz brokers in each subnet it is given.
  const dataSubnetIds = base.azs.map((a) => a.privateSubnetIds[0]);
  const redis = new Redis("redis", {
    vpcId: base.vpcId,
    subnetIds: dataSubnetIds,
    // The agents (GPU nodes), the controller, and the L1 pods' fallback and key sync.
    clientSecurityGroupIds: { "gpu-nodes": fences.gpuNodes.id, l1: fences.podGroups.l1.id, controller: fences.podGroups.controller.id },
    authToken: c.redis.authToken,
    cluster: c.clusterName,
    rolePasswords: c.redis.rolePasswords,
    nodeType: c.redis.nodeType,
    nodes: c.redis.replicas,
    azs: c.azs,
    existing: c.redis.existing,
  });
  const kafka = new Kafka("kafka", {
    vpcId: base.vpcId,
    subnetIds: dataSubnetIds,
    // Only the L4 fallback in the L1 pods produces and consumes.
    clientSecurityGroupIds: { l1: fences.podGroups.l1.id },
    brokersPerAz: c.kafka.brokersPerAz,
    kafkaVersion: c.kafka.version,
    instanceType: c.kafka.instanceType,
    volumeSizeGb: c.kafka.volumeSizeGb,
    existing: c.kafka.existing,
  });

  // The controller's AWS actuator (standby wakes, reserved groups, the repair ladder's reboots) and its repair ladder.
  const { agentActuator, repair, reserved } = controllerActuation(c, base.oidcProvider, capacity.groups);

  // Docker Hub and ECR Public images come through the stack's pull-through cache, by digest.
  const cache = new ImageCache("images", { clusterName: c.clusterName, region: c.region, dockerHubSecretArn: c.images.dockerHubSecretArn });
  const cached = (name: "haproxy" | "awsCli" | "lbController" | "dcgmExporter") => cache.cacheRoot.apply((root) => pullRef(IMAGES[name].repository, c.images.digests[name], root));

  // Everything with an NLB waits for the controller that makes NLBs.
  const lbController = cluster && lbChartArchive !== undefined
    ? createLbController("lbc", {
        chartArchive: lbChartArchive,
        image: cached("lbController"),
        provider: cluster.provider,
        clusterName: cluster.cluster.name,
        region: c.region,
        vpcId: base.vpcId,
        oidcProviderArn: cluster.oidcProvider.arn,
        oidcProviderUrl: cluster.oidcProvider.url,
        dependsOn: [...cluster.systemNodes, ...cluster.addons],
      }, cluster)
    : undefined;

  const agentImage = new AgentImage("agent-image", { repositoryName: `${c.clusterName}/agent`, image: c.agentImage || undefined, build: c.agentImageBuild });
  const weightsRole = c.inference.weightsS3Uri
    ? createWeightsReaderRole("weights", {
        uri: c.inference.weightsS3Uri,
        oidcProviderArn: base.oidcProvider.arn,
        oidcProviderUrl: base.oidcProvider.url,
        namespace: WORKLOADS_NAMESPACE,
        serviceAccount: INFERENCE_SERVICE_ACCOUNT,
      })
    : undefined;

  // L4: `llm-ha fallback` beside each L1 proxy; only its role may write the queue topic (policies/iam.ts).
  let fallback: WorkloadsArgs["fallback"];
  if (c.fallback.enabled) {
    const fallbackIam = new FallbackIam("fallback", {
      clusterName: c.clusterName,
      cluster: c.clusterName,
      mskClusterArn: kafka.clusterArn,
      oidcProviderArn: base.oidcProvider.arn,
      oidcProviderUrl: base.oidcProvider.url,
      // The L1 pods' ServiceAccount, in the edge namespace.
      namespace: EDGE_NAMESPACE,
    });
    fallback = {
      roleArn: fallbackIam.roleArn,
      kafkaBootstrap: kafka.bootstrapBrokers,
      region: c.region,
      models: c.fallback.models,
      providers: c.fallback.providers.map((p) => ({ name: p.name, url: p.url, timeoutMs: p.timeoutMs, models: p.models, key: p.key })),
      maxQueueDepth: c.fallback.maxQueueDepth,
      replayRps: c.fallback.replayRps,
    };
  }

  const workloads = new Workloads("app", {
    provider: base.provider,
    clusterName: c.clusterName,
    azs: base.azs.map((a) => ({ az: a.az, publicSubnetId: a.publicSubnetId })),
    gpuClasses: c.gpuClasses,
    inference: { ...c.inference, image: cache.cacheRoot.apply((root) => pullRefOf(c.inference.image, root)), region: c.region },
    awsCliImage: c.inference.weightsS3Uri && c.inference.weightsLoad === "sync" ? cached("awsCli") : undefined,
    dcgmExporterImage: cached("dcgmExporter"),
    inferenceApiKey: c.inferenceApiKey,
    tls: c.edge.certificateArn ? { certificateArn: c.edge.certificateArn, sslPolicy: c.edge.sslPolicy } : null,
    agentImage: agentImage.ref,
    hfToken: c.hfToken,
    inferenceRoleArn: weightsRole?.arn,
    lbController,
    redisUrl: redis.url,
    redisRoleUrls: { agent: redis.roleUrls["llmha-agent"], controller: redis.roleUrls["llmha-controller"], fallback: redis.roleUrls["llmha-fallback"], edge: redis.roleUrls["llmha-edge"] },
    vpcCidr: base.vpcCidr,
    nlbCidrs: base.nlbCidrs,
    podFences: { groupIds: { l1: fences.podGroups.l1.id, controller: fences.podGroups.controller.id }, dependsOn: cluster?.addons ?? [] },
    nlbSecurityGroupId: fences.nlbFrontend.id,
    haproxyImage: c.haproxy.image ? cache.cacheRoot.apply((root) => pullRefOf(c.haproxy.image, root)) : cached("haproxy"),
    haproxyReplicas: c.haproxy.replicas,
    haproxyCpu: {
      limitMillis: c.haproxy.cpuMillis,
      ...(c.haproxy.nbthread !== undefined ? { nbthread: c.haproxy.nbthread } : {}),
      ...(c.haproxy.relayWorkers !== undefined ? { relayWorkers: c.haproxy.relayWorkers } : {}),
    },
    standbyAz: c.standbyAz,
    standbyCapacityRatio: c.standbyCapacityRatio,
    practiceWake: c.practiceWake,
    agentActuator,
    repair,
    // Node identities: the agents enrol with a projected token, verified against the cluster's own issuer.
    nodeIdentities: c.nodeIdentities ? { issuer: base.oidcIssuer } : undefined,
    fallback,
    karpenter: capacity.karpenter?.workloads,
    // An existing cluster runs its own NVIDIA device plugin (preflight checks it): a second would fight it.
    devicePluginImage: base.existing ? null : undefined,
  });
  if (capacity.karpenter?.placeholder && c.standbyAz !== undefined) {
    createPlaceholder("standby", { provider: base.provider, standbyAz: c.standbyAz, gpusPerPod: capacity.karpenter.placeholder.gpusPerPod, image: agentImage.ref, namespace: workloads.namespace });
  }

  if (c.observability.enabled) {
    new Observability(
      "obs",
      {
        provider: base.provider,
        clusterName: c.clusterName,
        grafanaNamespace: c.observability.grafanaNamespace,
        prometheusOperator: c.observability.prometheusOperator,
        selectorLabels: c.observability.selectorLabels,
        thresholds: { standbyAz: c.standbyAz ?? null, ...c.observability.thresholds },
        namespaceResource: workloads.namespace,
      },
      // The namespace comes from the workloads.
      { dependsOn: [workloads] },
    );
  }

  const weights = capacityWeights(c.azs, c.gpuClasses);
  const dns = new Dns("dns", {
    zoneId: c.dns.zoneId,
    serviceName: c.dns.serviceName,
    ttl: c.dns.ttl,
    failureThreshold: c.dns.failureThreshold,
    // Weighted by configured capacity: a lost AZ's share spreads over every healthy AZ.
    endpoints: c.azs.map((az) => ({ az, hostname: workloads.nlbHostnames[az], weight: weights[az] })),
    https: c.edge.certificateArn !== null,
  });

  // Game day (`llm-ha:gameday`, off by default): FIS templates over the stack's own resources, stopped by the SLO alarms.
  if (c.gameday.enabled) {
    new Gameday("gameday", {
      clusterName: c.clusterName,
      region: c.region,
      azs: c.azs,
      standbyAz: c.standbyAz,
      scenarios: c.gameday.scenarios,
      az: c.gameday.az,
      redisAz: c.gameday.redisAz,
      durationMinutes: c.gameday.durationMinutes,
      gpuClasses: c.gpuClasses.map((g) => g.name),
      cluster: base.clusterName,
      provider: base.provider,
      namespacesFrom: [workloads],
      vpcId: base.vpcId,
      subnetIds: Object.fromEntries(base.azs.map((a) => [a.az, a.privateSubnetIds[0]])),
      replicationGroupId: redis.replicationGroupId,
      redisEndpoint: redis.primaryEndpoint,
      healthCheckIds: dns.healthCheckIds,
    });
  }

  return {
    clusterName: base.clusterName,
    kubeconfig: base.kubeconfig,
    serviceDnsName: pulumi.output(dns.fqdn),
    nlbNames: pulumi.output(workloads.nlbNames),
    nlbHostnames: pulumi.output(workloads.nlbHostnames),
    redisEndpoint: redis.primaryEndpoint,
    kafkaBootstrapBrokers: kafka.bootstrapBrokers,
    agentRepositoryUrl: agentImage.repository.repositoryUrl,
    scraperSecurityGroupId: fences.scrapers.id,
    gpuNodeSecurityGroupId: fences.gpuNodes.id,
    // What a person scales after `pulumi up`: groups created at zero that nothing sizes. The
    // standby's reach their size at the schedule's next scale-up (a standby AZ always has one),
    // except on a Capacity Block, which the schedule never touches; the leader sizes an active
    // AZ's group on a reservation once it is active (`reservedGroups` in controller-actuator.ts).
    gpuScaleUp: pulumi
      .all(capacity.own.filter((g) => g.createSize < g.desiredSize && (g.role === "active" || g.gpuClass.capacityType === "CAPACITY_BLOCK") && !reserved.includes(g)).map((g) => g.nodeGroup.nodeGroupName.apply((n) => [n, g.desiredSize] as const)))
      .apply((pairs) => Object.fromEntries(pairs)),
  };
}
