import * as pulumi from "@pulumi/pulumi";
import { Problems } from "../problems";
import { clusterAccessOf, clusterOf, nodeIdentitiesOf, systemNodesOf } from "./cluster";
import { kafkaOf, redisOf } from "./data";
import { dnsOf } from "./dns";
import { capacityOf, existingClusterOf } from "./existing-cluster";
import { chartsOf, edgeOf, imagesOf, inferenceKeyOf, requireDigest } from "./edge";
import { fallbackOf } from "./fallback";
import { gamedayOf } from "./gameday";
import { gpuClassesOf, gpuFastImagePullOf } from "./gpu";
import { networkOf } from "./network";
import { observabilityOf } from "./observability";
import { settingsOf } from "./read";
import { repairOf } from "./repair";
import { scheduleOf, standbyOf } from "./standby";
import type { ConfigSources, StackConfig } from "./stack-config";
import { agentImageOf, haproxyOf, inferenceOf } from "./workloads";

/** The program's configuration: `resolveConfig` over the running stack's config. */
export function loadConfig(): StackConfig {
  return resolveConfig({ project: new pulumi.Config(), aws: new pulumi.Config("aws"), stack: pulumi.getStack() });
}

/**
 * Reads and validates the whole stack configuration and fills in the defaults. Every bad
 * key is named in one `InputPropertiesError`, so a user fixes the stack file in one pass.
 * Each concern reads its own keys (one file each in this folder); the order here is the
 * order the problems are reported in.
 */
export function resolveConfig(src: ConfigSources): StackConfig {
  const p = new Problems();
  const s = settingsOf(src.project, p);
  const network = networkOf(s, src.aws);
  const { azs, standbyAz } = network;
  const system = systemNodesOf(s, azs);
  const gpuClasses = gpuClassesOf(s, azs);
  const gpuFastImagePull = gpuFastImagePullOf(s);
  const inference = inferenceOf(s, src.stack);
  const existingCluster = existingClusterOf(s, azs);
  const capacity = capacityOf(s, existingCluster, azs, standbyAz, gpuClasses);
  const cluster = clusterOf(s, src.today ?? new Date(), src.warn ?? ((m) => void pulumi.log.warn(m)), existingCluster !== undefined);
  const nodeIdentities = nodeIdentitiesOf(s, cluster.kubernetesVersion);
  const clusterAccess = clusterAccessOf(s, src.aws);
  const agentImage = agentImageOf(s);
  const haproxy = haproxyOf(s);
  const dns = dnsOf(s);
  const edge = edgeOf(s, src.stack);
  const images = imagesOf(s);
  const charts = chartsOf(s);
  const inferenceApiKey = inferenceKeyOf(s);
  requireDigest(s, images, "haproxy", haproxy.image === "");
  requireDigest(s, images, "awsCli", inference.inference.weightsS3Uri !== undefined && inference.inference.weightsLoad === "sync");
  requireDigest(s, images, "lbController", existingCluster === undefined);
  requireDigest(s, images, "dcgmExporter", true);
  const redis = redisOf(s, azs);
  const kafka = kafkaOf(s, azs, network.region);
  const fallback = fallbackOf(src.project.getObject<unknown>("fallback"), src.project, inference.inference.model, p);
  const observability = observabilityOf(s);
  const schedule = scheduleOf(s, standbyAz);
  const standby = standbyOf(s, standbyAz, gpuClasses, schedule);
  const repair = repairOf(s, azs);
  const gameday = gamedayOf(s, azs, standbyAz, network.region);
  if (standbyAz !== undefined && schedule === undefined) p.add(s.key("schedule"), "is required when llm-ha:standbyAz is set");
  p.throwIfAny("stack configuration");
  return {
    // An existing cluster's name is the one llm-ha's objects and tags name (LLMHA_CLUSTER, the NLBs).
    clusterName: existingCluster?.name ?? src.project.get("clusterName") ?? `llm-ha-${src.stack}`,
    existingCluster,
    capacity,
    ...network,
    ...cluster,
    nodeIdentities,
    clusterAccess,
    system,
    gpuClasses,
    gpuFastImagePull,
    ...inference,
    ...agentImage,
    haproxy,
    dns,
    edge,
    images,
    charts,
    inferenceApiKey,
    redis,
    kafka,
    fallback,
    schedule,
    ...standby,
    observability,
    repair,
    gameday,
  };
}
