import * as pulumi from "@pulumi/pulumi";
import type { AddonName } from "../addons";
import type { RoleName } from "../../contracts/redis-roles";
import type { ClusterAccess } from "../cluster";
import type { ImageName } from "../images";
import type { ApiEndpointConfig } from "./cluster";
import type { ExistingKafkaConfig, ExistingRedisConfig } from "./data";
import type { FallbackConfig } from "./fallback";
import type { CapacityConfig, ExistingClusterConfig } from "./existing-cluster";
import type { GamedayConfig } from "./gameday";
import type { GpuClassConfig, GpuClassName } from "./gpu";
import type { ObservabilityConfig } from "./observability";
import type { RepairConfig } from "./repair";
import type { PracticeWakeConfig, ScheduleConfig } from "./standby";

/** Everything the program reads from `Pulumi.<stack>.yaml`, validated once. */
/** How an inference pod reads `inference.weightsS3Uri` (see `StackConfig.inference`). */
export type WeightsLoad = "stream" | "sync";

export interface StackConfig {
  clusterName: string;
  /** An EKS cluster the stack runs on and does not own (`llm-ha:existingCluster`); absent: the stack creates its VPC and cluster. */
  existingCluster?: ExistingClusterConfig;
  /** Where the GPU nodes come from (`llm-ha:capacity`): the stack's own groups, or on an existing cluster adopted groups or Karpenter. */
  capacity: CapacityConfig;
  region: string;
  azs: string[];
  standbyAz?: string;
  vpcCidr: string;
  natPerAz: boolean;
  kubernetesVersion: string;
  apiEndpoint: ApiEndpointConfig;
  /**
   * Node identities (`llm-ha:nodeIdentities`, default true): the agents enrol with a projected
   * ServiceAccount token (audience `llm-ha`) and the controller verifies it against the cluster's
   * issuer. Needs Kubernetes ≥ 1.30.
   */
  nodeIdentities: boolean;
  /** Who reaches the Kubernetes API besides the creator (`llm-ha:clusterAdmins`, `kubeconfigRoleArn`, `aws:profile`). */
  clusterAccess: ClusterAccess;
  system: { instanceType: string; desiredSize: number; maxSize: number };
  gpuClasses: GpuClassConfig[];
  /**
   * Fast image pull on the GPU nodes (`llm-ha:gpuFastImagePull`, default true): nodeadm's
   * `FastImagePull` gate (SOCI parallel pull) and a gp3 root volume at 1,000 MiB/s and 16,000 IOPS.
   */
  gpuFastImagePull: boolean;
  /**
   * The engine and the model. `weightsS3Uri`: a copy of the model in S3 (read through the VPC's
   * S3 gateway endpoint); `weightsLoad`: how a pod reads it (`stream`: vLLM's Run:ai streamer
   * straight from S3 into GPU memory; `sync`: an init container copies it to the node's NVMe
   * first); `revision`: the Hugging Face commit the copy holds (preflight compares the copy's
   * manifest with it).
   */
  inference: { image: string; model: string; gpusPerPod?: number; extraArgs: string[]; weightsS3Uri?: string; weightsLoad: WeightsLoad; revision?: string };
  /** The agent image by digest (`<repo>@sha256:…`); empty when `agentImageBuild` builds and pushes it. */
  agentImage: string;
  /** Build agent/Dockerfile and push it to the stack's ECR repository (`@pulumi/docker-build`; needs Docker). */
  agentImageBuild: boolean;
  /** The API key vLLM requires on its `/v1` routes (`pulumi config set --secret llm-ha:inferenceApiKey`): the agents send it. */
  inferenceApiKey: pulumi.Output<string>;
  /** Hugging Face token for gated models (`pulumi config set --secret llm-ha:hfToken`). */
  hfToken?: pulumi.Output<string>;
  /**
   * `cpuMillis`: the HAProxy container's CPU limit; `nbthread`: its threads, default the limit rounded up;
   * `relayWorkers`: the continuation relay's processes, default 1 (infra/workloads/l1-proxy.ts `L1Cpu`).
   */
  haproxy: { image: string; replicas: number; cpuMillis: number; nbthread?: number; relayWorkers?: number };
  dns: { zoneId: string; serviceName: string; ttl: number; failureThreshold: number };
  /** The NLBs' TLS listeners (`llm-ha:edge`): the ACM certificate, or clear text where a dev stack waived it. */
  edge: { certificateArn: string | null; plainHttp: boolean; sslPolicy: string };
  /** Digests by image (infra/images.ts; empty where none is pinned or set) and the Docker Hub cache rule's secret (`llm-ha:images`). */
  images: { digests: Record<ImageName, string>; dockerHubSecretArn: string };
  /** Copies of pinned chart archives already on the runner (`llm-ha:charts`); absent: downloaded and checked. */
  charts: { lbControllerArchive?: string };
  /**
   * `rolePasswords` (`llm-ha:redisRolePasswords`, secret object role → password, the default):
   * one ElastiCache RBAC user per role (docs/redis-roles.md). `authToken` (`llm-ha:redisAuthToken`):
   * the old AUTH token, alone only as a migration path; beside the roles, the password of the
   * group's disabled `default` user. `existing` (`llm-ha:redis.existing`): an adopted replication
   * group; the role users join its user group (no AUTH token then) and the sizing fields go unused.
   */
  redis: { nodeType: string; replicas: number; authToken?: pulumi.Output<string>; rolePasswords?: Partial<Record<RoleName, pulumi.Output<string>>>; existing?: ExistingRedisConfig };
  /** `existing` (`llm-ha:kafka.existing`): an adopted MSK cluster; the sizing fields then go unused. */
  kafka: { version: string; brokersPerAz: number; instanceType: string; volumeSizeGb: number; existing?: ExistingKafkaConfig };
  /** The L4 fallback beside each L1 proxy (`llm-ha:fallback`, docs/fallback.md). */
  fallback: FallbackConfig;
  schedule?: ScheduleConfig;
  /**
   * Size of the standby AZ's groups relative to an active AZ's, in (0, 1] (`llm-ha:standbyCapacityRatio`,
   * partial redundancy). Default 1.
   */
  standbyCapacityRatio: number;
  /**
   * Per GPU class, the instance types of the standby AZ's fallback group (desired 0; the
   * agent wakes it when the standby group cannot launch: `LLMHA_STANDBY_FALLBACK`). Empty: no
   * fallback group for the class (`llm-ha:standbyFallback`). Empty for all without a standby AZ.
   */
  standbyFallback: Partial<Record<GpuClassName, string[]>>;
  /** Why the standby AZ may go without a capacity fallback (`llm-ha:standbyCapacityWaiver`); the policy pack reads it as a tag. */
  standbyCapacityWaiver?: string;
  /** Practice wakes of the standby (`llm-ha:practiceWake`); none without a standby AZ or with `false`. */
  practiceWake?: PracticeWakeConfig;
  observability: ObservabilityConfig;
  /** The repair ladder's mode and spares (`llm-ha:repair`); `act` gives the controller its IAM and RBAC grants. Default advise. */
  repair: RepairConfig;
  /** AWS FIS experiment templates for the game day (`llm-ha:gameday`, docs/infra.md "Game day"). Default off. */
  gameday: GamedayConfig;
  /** Add-on versions pinned by the user (`llm-ha:addonVersions`); the others are resolved for the cluster version. */
  addonVersions: Partial<Record<AddonName, string>>;
}

/** Where the stack configuration comes from: Pulumi's, or a stack file read offline (`llm-ha cost`). */
export interface ConfigSources {
  /** The project's namespace (`llm-ha:`). */
  project: pulumi.Config;
  /** The `aws:` namespace (region). */
  aws: pulumi.Config;
  /** Stack name; the default cluster name is derived from it. */
  stack: string;
  /** The day support windows are judged on. Default now. */
  today?: Date;
  /** Where warnings go (a version past its support window). Default `pulumi.log.warn`. */
  warn?: (message: string) => void;
}
