/**
 * `llm-ha preflight`: what blocks `pulumi up --stack <env>` on a fresh account, before
 * anything is created. Offline: the stack file's user settings and the program's own
 * validation. Online (opt-in, read-only AWS calls): the GPU and Standard vCPU quotas, capacity
 * reservations and Capacity Blocks, the hosted zone, instance type offerings per AZ, the ACM
 * certificate, the Docker Hub pull-through secret, and more through the `aws` CLI.
 */
import * as pulumi from "@pulumi/pulumi";
import { EKS_VERSIONS, isoDay } from "../../contracts/eks-versions";
import { IP_RANGES_URL, ROUTE53_HEALTHCHECK_SNAPSHOT } from "../../contracts/route53-ranges";
import { ADDON_NAMES } from "../addons";
import { resolveConfig, standbySize, type StackConfig } from "../config";
import { ROLE_PASSWORDS_HOW } from "../config/data";
import { hasSetting, missingUserSettings, withStandIns } from "../user-settings";
import { nonGpuGroups, STANDARD_QUOTA_CODE } from "./quotas";
import { NODE_IDENTITY_MIN_VERSION } from "../config/cluster";
import { KARPENTER_MIN_VERSION } from "./existing-cluster";

export type CheckStatus = "ok" | "missing" | "invalid" | "warn" | "fail" | "offline";

export interface CheckRow {
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it (empty when ok). */
  fix: string;
}

/** Statuses that make preflight exit 1. */
export const BLOCKING: readonly CheckStatus[] = ["missing", "invalid", "fail"];

/** vCPUs of the GPU instance types (the P-instance quota counts vCPUs). */
export const GPU_VCPUS: Readonly<Record<string, number>> = Object.freeze({
  "p4d.24xlarge": 96,
  "p4de.24xlarge": 96,
  "p5.48xlarge": 192,
  "p5e.48xlarge": 192,
  "p5en.48xlarge": 192,
});

/** Service Quotas code of "Running On-Demand P instances" (vCPUs) in EC2. */
export const P_QUOTA_CODE = "L-417A185B";

export interface OfflineResult {
  rows: CheckRow[];
  /** The resolved config (with stand-ins for what is missing), when the rest validates: the online checks need it. */
  config?: StackConfig;
  /** The user settings that were missing (the online checks skip what depends on them). */
  missing: string[];
}

/**
 * The offline checks over one stack file's values (`readStackFile`): every user setting the
 * stack needs, then the program's own validation of the rest (run with stand-ins for the
 * missing ones, so each problem is reported once), the EKS support window, capacity notes.
 */
export function offlineChecks(values: Record<string, string>, project: string, stack: string, today = new Date()): OfflineResult {
  const rows: CheckRow[] = [];
  const missing = missingUserSettings(values, stack);
  for (const s of missing) rows.push({ check: `setting ${s.key}`, status: "missing", detail: "required and not set", fix: s.how });
  if (missing.length === 0) rows.push({ check: "user settings", status: "ok", detail: "zone, service name, API access, agent image and tokens are set", fix: "" });
  // The old AUTH token alone: every Redis client with every permission. A migration path in dev only
  // (the policy redis-roles-required refuses it elsewhere).
  if (!hasSetting(values, "llm-ha:redisRolePasswords") && hasSetting(values, "llm-ha:redisAuthToken")) {
    const dev = stack === "dev";
    rows.push({
      check: "setting llm-ha:redisRolePasswords",
      status: dev ? "warn" : "invalid",
      detail: `only llm-ha:redisAuthToken is set: every Redis client shares one all-powerful token${dev ? " (allowed in dev while it migrates)" : "; staging and prod need per-role users (policy redis-roles-required)"}`,
      fix: ROLE_PASSWORDS_HOW,
    });
  }

  const { values: filled, secretKeys } = withStandIns(values, stack);
  pulumi.runtime.setAllConfig(filled, secretKeys.filter((k) => !k.includes(".")));
  let config: StackConfig | undefined;
  try {
    config = resolveConfig({ project: new pulumi.Config(project), aws: new pulumi.Config("aws"), stack, today });
    rows.push({
      check: "stack configuration",
      status: "ok",
      detail: missing.length ? "the rest of the file passes the program's validation" : "the program's validation passes",
      fix: "",
    });
  } catch (err) {
    if (!pulumi.InputPropertiesError.isInstance(err)) throw err;
    for (const e of err.errors) rows.push({ check: `setting ${e.propertyPath}`, status: "invalid", detail: e.reason, fix: `fix ${e.propertyPath} in Pulumi.${stack}.yaml (or pulumi config set)` });
  }

  if (config) {
    const row = EKS_VERSIONS.find((v) => v.version === config!.kubernetesVersion);
    // A version newer than the table passes validation with a warning: say so here too.
    const daysLeft = row ? Math.floor((Date.parse(row.standardUntil) - Date.parse(isoDay(today))) / 86_400_000) : undefined;
    // An existing cluster's version and add-ons are its own: --online reads them (infra/preflight/existing-cluster.ts).
    // An adopted Redis or MSK is the operator's: --online reads what llm-ha relies on there (infra/preflight/data-tier.ts).
    if (config.redis.existing) rows.push({ check: "adopted Redis", status: "ok", detail: `${config.redis.existing.replicationGroupId}: its TLS, failover, Multi-AZ, cluster mode, user group, engine version and maxmemory-policy are read with --online`, fix: "" });
    if (config.kafka.existing) rows.push({ check: "adopted MSK", status: "ok", detail: `${config.kafka.existing.clusterArn}: its IAM auth, TLS, brokers per AZ and server properties are read with --online`, fix: "" });
    if (config.existingCluster) rows.push({ check: "existing cluster", status: "ok", detail: `${config.existingCluster.name}: its version, add-ons, Karpenter or node groups, system nodes and your access are read with --online`, fix: "" });
    else rows.push({
      check: `EKS ${config.kubernetesVersion} support`,
      status: daysLeft === undefined || daysLeft < 60 ? "warn" : "ok",
      detail: row ? `standard support until ${row.standardUntil} (${daysLeft} days); upgradePolicy STANDARD` : "not in the support table (contracts/eks-versions.ts): its window is not checked",
      fix:
        daysLeft === undefined
          ? "add its row from aws eks describe-cluster-versions"
          : daysLeft < 60
            ? "plan the upgrade: set llm-ha:kubernetesVersion to the next version in contracts/eks-versions.ts"
            : "",
    });
    for (const c of config.gpuClasses) {
      const reserved = Object.keys(c.capacityReservations);
      if (c.instanceType.startsWith("p5") && reserved.length < config.azs.length && c.capacityType === "ON_DEMAND") {
        const without = config.azs.filter((az) => !reserved.includes(az));
        rows.push({
          check: `capacity ${c.name}`,
          status: "warn",
          detail: `${c.instanceType} On-Demand without a reservation in ${without.join(", ")}: launches often fail with InsufficientInstanceCapacity`,
          fix: `reserve capacity per AZ and set gpuClasses[].capacityReservations {<az>: cr-…}, or capacityType CAPACITY_BLOCK`,
        });
      }
    }
    if (config.observability.enabled) {
      // The stack ships rules, scrape jobs and a dashboard but installs no Prometheus or Grafana: say so.
      rows.push({
        check: "observability",
        status: "warn",
        detail: config.observability.prometheusOperator
          ? "PrometheusRule and PodMonitors need prometheus-operator's CRDs in the cluster (the stack does not install them)"
          : "alert rules, scrape jobs and the dashboard ship as ConfigMaps; this stack installs no Prometheus or Grafana to load them",
        fix: "point your Prometheus and Grafana at them (docs/observability.md), or set llm-ha:observability.prometheusOperator: true on a cluster with kube-prometheus-stack",
      });
    }
    const pinned = Object.entries(config.addonVersions);
    if (!config.existingCluster) rows.push({
      check: "managed add-on versions",
      status: "ok",
      detail: `resolved for Kubernetes ${config.kubernetesVersion} at deploy time${pinned.length ? `; pinned: ${pinned.map(([n, v]) => `${n} ${v}`).join(", ")}` : ""}`,
      fix: "",
    });
  }
  return { rows, config, missing: missing.map((s) => s.key) };
}

/** What the online checks would call, for a stack's config: printed when run offline. */
export function onlinePlan(c: StackConfig | undefined, missing: string[] = []): string[] {
  if (!c) return ["(the stack configuration must validate before the online checks can be planned)"];
  const or = (key: string, v: string) => (missing.includes(key) ? `<${key}>` : v);
  const types = [...new Set([...c.gpuClasses.flatMap((g) => g.instanceTypes), ...Object.values(c.standbyFallback).flatMap((t) => t ?? [])])];
  const crs = c.gpuClasses.flatMap((g) => Object.entries(g.capacityReservations).map(([az, id]) => `${id} (${az}, ${g.instanceType})`));
  const e = c.existingCluster;
  const existing = e && [
    `existing cluster ${e.name}: eks describe-cluster (Kubernetes version in standard support${c.nodeIdentities ? `, ≥ ${NODE_IDENTITY_MIN_VERSION} for node identities` : ""}); kubectl on the current context: the aws-load-balancer-controller Deployment, an NVIDIA device plugin DaemonSet tolerating nvidia.com/gpu, the SecurityGroupPolicy CRD`,
    c.capacity.engine === "karpenter"
      ? `Karpenter: its CRDs (nodepools, nodeclaims, ec2nodeclasses) serving v1, its Deployment's version ≥ ${KARPENTER_MIN_VERSION}${c.capacity.nodeClass ? `, EC2NodeClass ${c.capacity.nodeClass}` : ""}`
      : `node groups: eks describe-nodegroup for each adopted group: llm-ha.io/gpu-class, llm-ha.io/az, llm-ha.io/az-role labels and the nvidia.com/gpu NoSchedule taint`,
    "system nodes: a node labelled llm-ha.io/node-role=system in every AZ; access: kubectl auth can-i create for what the stack applies",
  ];
  const r = c.redis.existing;
  const k = c.kafka.existing;
  const adopted = [
    ...(r ? [`adopted Redis ${r.replicationGroupId}: elasticache describe-replication-groups (TLS required, automatic failover, Multi-AZ, cluster mode disabled, user group ${r.userGroupId} attached), describe-cache-clusters (Redis ≥ 7, ${r.securityGroupId} among its groups), describe-cache-parameters (maxmemory-policy noeviction)`] : []),
    ...(k ? [`adopted MSK ${k.clusterArn}: kafka describe-cluster-v2 (SASL/IAM, TLS client-broker, ≥ 3 brokers over ≥ 2 AZs, ${k.securityGroupId} among the brokers' groups), describe-configuration-revision (default.replication.factor=3, min.insync.replicas=2, unclean.leader.election.enable=false, auto.create.topics.enable=false, group.min.session.timeout.ms ≤ 2000)`] : []),
  ];
  return [
    ...(existing ?? []),
    ...adopted,
    `GPU quota: service-quotas get-service-quota --service-code ec2 --quota-code ${P_QUOTA_CODE} (Running On-Demand P instances) in ${c.region} ≥ ${pQuotaNeeded(c)} vCPUs`,
    ...(e ? [] : [`Standard quota: service-quotas get-service-quota --service-code ec2 --quota-code ${STANDARD_QUOTA_CODE} (Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances) in ${c.region} ≥ the vCPUs of ${nonGpuGroups(c).map((g) => `${g.name} ${g.maxSize} × ${g.instanceType}`).join(", ")} (ec2 describe-instance-types)`]),
    `instance types offered: ec2 describe-instance-type-offerings --location-type availability-zone (${types.join(", ")} in ${c.azs.join(", ")})`,
    crs.length ? `capacity reservations: ec2 describe-capacity-reservations ${crs.join(", ")}: each in its AZ, of its type (a Capacity Block for a CAPACITY_BLOCK class), active (a scheduled or pending one blocks) with the group's running size free; warned: holding less than the group's maximum (no overflow), ending within ${RESERVATION_END_WARN_DAYS} days` : "capacity reservations: none configured",
    `hosted zone: route53 get-hosted-zone --id ${or("llm-ha:dns.zoneId", c.dns.zoneId)}: exists, is public and a parent of ${or("llm-ha:dns.serviceName", c.dns.serviceName)}`,
    c.edge.certificateArn
      ? `certificate: acm describe-certificate --certificate-arn ${or("llm-ha:edge.certificateArn", c.edge.certificateArn)}: in ${c.region}, ISSUED, its names cover ${or("llm-ha:dns.serviceName", c.dns.serviceName)}`
      : "certificate: none (llm-ha:edge.plainHttp), nothing to check",
    `pull-through secret: secretsmanager describe-secret --secret-id ${or("llm-ha:images.dockerHubSecretArn", c.images.dockerHubSecretArn)}: exists in ${c.region}, named ecr-pullthroughcache/… (its value is not read)`,
    ...(e ? [] : [`add-on versions: eks describe-addon-versions --kubernetes-version ${c.kubernetesVersion} for ${ADDON_NAMES.join(", ")}: each has a default version${Object.keys(c.addonVersions).length ? ", and each pinned one is offered" : ""}`]),
    c.agentImageBuild
      ? "agent image: built and pushed by the stack (llm-ha:agentImageBuild), nothing to check"
      : `agent image: ecr describe-images --image-ids imageDigest=… for ${or("llm-ha:agentImage", c.agentImage)}: the digest exists in its repository`,
    c.inference.weightsS3Uri
      ? `model weights: s3api list-objects-v2, get-object llm-ha-manifest.json: ${or("llm-ha:inference.weightsS3Uri", c.inference.weightsS3Uri)} holds every file of ${c.inference.model}@${or("llm-ha:inference.revision", c.inference.revision ?? "?")}`
      : "model weights: llm-ha:inference.weightsS3Uri is not set (warned: every new node pulls from the hub through NAT)",
    `route53 checker ranges: ${IP_RANGES_URL} (no credentials): its ROUTE53_HEALTHCHECKS ranges against the committed snapshot the NLBs' :8081 admits (syncToken ${ROUTE53_HEALTHCHECK_SNAPSHOT.syncToken}, ${ROUTE53_HEALTHCHECK_SNAPSHOT.createDate})`,
    `prometheus: eks describe-cluster --name ${c.clusterName}, amp list-scrapers: an Amazon Managed Prometheus scraper reads the cluster (an in-cluster Prometheus is not visible to the AWS API: the row names the kubectl check)`,
  ];
}

/** Days before a reservation's or Capacity Block's end that `--online` warns: time to extend it or buy the next. */
export const RESERVATION_END_WARN_DAYS = 14;

/**
 * vCPUs the On-Demand P quota must hold at every group's maximum (groups launching into a
 * reservation count too: they run On-Demand), the standby AZ's fallback groups included: they
 * launch On-Demand, outside any reservation or block, at the standby's maximum (the largest of
 * their types counts, since EKS may launch any of them).
 */
export function pQuotaNeeded(c: StackConfig): number {
  const groups = c.gpuClasses.reduce((n, g) => (g.capacityType === "CAPACITY_BLOCK" ? n : n + (GPU_VCPUS[g.instanceType] ?? 0) * g.maxPerAz * c.azs.length), 0);
  const fallbacks = c.gpuClasses.reduce((n, g) => {
    const types = c.standbyFallback[g.name] ?? [];
    if (types.length === 0) return n;
    return n + Math.max(...types.map((t) => GPU_VCPUS[t] ?? 0)) * standbySize(g, c.standbyCapacityRatio).max;
  }, 0);
  return groups + fallbacks;
}
