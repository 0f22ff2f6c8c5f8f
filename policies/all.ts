// Every policy of the pack, in the order violations are reported. Kept apart from
// index.ts because constructing the PolicyPack starts a gRPC server.
import type { Policies } from "@pulumi/policy";
import { eksControlPlaneLogging, eksControlPlaneLogRetention, eksSecretsKeyGrantsClusterRole } from "./cluster";
import { crdsInstalled } from "./crds";
import { createOrderFollowsReferences } from "./create-order";
import { addonVersionsForCluster, clusterAccessEntries, gpuScarceStartAtZero, probesReachable, waitsBounded } from "./create-time";
import { chartsByDigest, imagesByDigest, l1AuthRequired, l1TlsRequired } from "./edge";
import { fastImagePullRootThroughput, gpuImagesFromEcr } from "./wake";
import { eksVersionSupported, eksVersionSupportEnding, gpuCapacitySettings, nlbNeedsLbController } from "./deployability";
import { mskHaEncrypted, mskKraftBrokerLogs, redisHaEncrypted, redisIdsPerStack, redisRolesRequired } from "./data";
import { dataIngressBySecurityGroup, redisRoleUsersInGroup } from "./data-access";
import { gamedayTemplates } from "./gameday";
import { agentRoleLeastPrivilege, mskQueueWriterOnlyFallback } from "./iam";
import { gpuAgentsHoldNoCloudRole } from "./cloud-holder";
import { failoverRecordPairs, failoverRecordTtl, route53HealthCheckFast } from "./dns";
import { dnsAzLossSpread } from "./dns-spread";
import {
  gpuInstanceTypesAllowed,
  gpuLaunchTemplateImdsv2,
  gpuNodeGroupSingleAz,
  gpuNodeGroupTaintAndLabels,
  gpuNodeGroupsMultiAz,
} from "./gpu";
import { agentDaemonSetOnGpuNodes, gpuDeploymentPdb, gpuDeploymentSpread, ipTargetsReadinessGate } from "./k8s";
import { agentNodeIdentity } from "./node-identity";
import { nodePoolGpuTaint, nodePoolSingleAz, nodePoolStandbyLimits } from "./karpenter";
import { inferenceOneModel } from "./model";
import { inferenceRolloutHandover } from "./rollout";
import { haPortsFenced } from "./fences";
import { azHealthFromRoute53Only } from "./az-health";
import { gpuNodeRoleMinimal } from "./node-role";
import { noPublicHaPorts } from "./network";
import { podSecurity } from "./pod-security";
import { podsMeetNamespaceLevel } from "./pod-standards";
import { standbyScheduleRules } from "./schedule";
import { standbyCapacityFallback } from "./standby-capacity";
import { requiredTags } from "./tags";
import { gpuNodeGroupMinimalUpdate, gpuReservedStartAtZero, systemNodeGroupPerAz } from "./update-time";

export const PACK_NAME = "llm-ha";

export const policies: Policies = [
  gpuNodeGroupsMultiAz,
  gpuNodeGroupSingleAz,
  gpuNodeGroupTaintAndLabels,
  gpuInstanceTypesAllowed,
  gpuLaunchTemplateImdsv2,
  nodePoolSingleAz,
  nodePoolGpuTaint,
  nodePoolStandbyLimits,
  gpuDeploymentSpread,
  gpuDeploymentPdb,
  inferenceOneModel,
  inferenceRolloutHandover,
  agentDaemonSetOnGpuNodes,
  agentNodeIdentity,
  failoverRecordPairs,
  route53HealthCheckFast,
  failoverRecordTtl,
  dnsAzLossSpread,
  redisHaEncrypted,
  redisRolesRequired,
  redisIdsPerStack,
  redisRoleUsersInGroup,
  dataIngressBySecurityGroup,
  mskHaEncrypted,
  mskKraftBrokerLogs,
  standbyScheduleRules,
  standbyCapacityFallback,
  noPublicHaPorts,
  haPortsFenced,
  azHealthFromRoute53Only,
  podSecurity,
  podsMeetNamespaceLevel,
  agentRoleLeastPrivilege,
  gpuAgentsHoldNoCloudRole,
  gpuNodeRoleMinimal,
  mskQueueWriterOnlyFallback,
  requiredTags,
  eksControlPlaneLogging,
  eksControlPlaneLogRetention,
  eksSecretsKeyGrantsClusterRole,
  eksVersionSupported,
  eksVersionSupportEnding,
  gpuCapacitySettings,
  nlbNeedsLbController,
  crdsInstalled,
  createOrderFollowsReferences,
  probesReachable,
  gpuScarceStartAtZero,
  gpuReservedStartAtZero,
  gpuNodeGroupMinimalUpdate,
  systemNodeGroupPerAz,
  addonVersionsForCluster,
  clusterAccessEntries,
  waitsBounded,
  ipTargetsReadinessGate,
  l1TlsRequired,
  l1AuthRequired,
  imagesByDigest,
  chartsByDigest,
  gpuImagesFromEcr,
  fastImagePullRootThroughput,
  gamedayTemplates,
];
