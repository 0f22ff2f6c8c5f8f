import type * as pulumi from "@pulumi/pulumi";
import { PORTS } from "../../contracts/names";
import { APP, LABELS, NET_ROLE_LABEL } from "../names";
import { onePodAtATime, type ClusterRole, type ClusterRoleBinding, type Deployment, type PodDisruptionBudget } from "./common";
import { redisCredential } from "./redis-secret";

/**
 * The controller apart from the GPU nodes: `llm-ha agent` with `LLMHA_ROLE=controller`,
 * the agent image, on the system nodes, one replica per AZ (spread by zone). The replicas contend
 * for the same fenced Redis lease the agents used to; the leader publishes AZ states and the tier
 * and, alone in the cluster, holds the actuator's IAM role (IRSA on `CONTROLLER_SERVICE_ACCOUNT`).
 * GPU-node agents run `LLMHA_ROLE=node`: they check their node and never lead.
 */
export const CONTROLLER_SERVICE_ACCOUNT = "llm-ha-controller";

/** What the elected leader may do in AWS (agent/src/fleet/actuators/aws.ts); the settings `LLMHA_ACTUATOR=aws` reads. */
export interface AgentActuatorEnv {
  /** `LLMHA_AWS_REGION`. */
  region: string;
  /** `LLMHA_AZ_IDS`: `us-east-1a=use1-az1,…` (ARC names zones by id). */
  azIds: pulumi.Input<string>;
  /** `LLMHA_STANDBY_ASGS`: `asg=wakeSize,…`; absent when there is no standby AZ. */
  standbyAsgs?: pulumi.Input<string>;
  /** `LLMHA_STANDBY_FALLBACK`: the standby AZ's fallback groups, `asg=wakeSize,…`, in order; absent when there are none. */
  standbyFallback?: pulumi.Input<string>;
  /** `LLMHA_RESERVED_GROUPS`: the groups created at zero on a reservation, `asg=cr-id:size,…`; absent when there are none. */
  reservedGroups?: pulumi.Input<string>;
}

/**
 * The Karpenter engine's settings (`LLMHA_CAPACITY_ENGINE=karpenter`): the standby's NodePools in
 * wake order, its placeholder, and the schedule the leader parks and wakes it on (Karpenter has no
 * scheduled scaling; the ASG engine's schedule is EC2 scheduled actions, infra/standby-schedule.ts).
 */
export interface KarpenterEnv {
  /** `LLMHA_STANDBY_NODEPOOLS`: `nodepool=gpus,…`; absent without a standby AZ. */
  standbyNodePools?: string;
  /** `LLMHA_STANDBY_PLACEHOLDER`: `namespace/deployment=replicas`. */
  placeholder?: string;
  /** `LLMHA_STANDBY_SCHEDULE` (`scaleDown;scaleUp[;weekendDown]`) and `LLMHA_STANDBY_SCHEDULE_TZ`. */
  schedule?: { scaleDown: string; scaleUp: string; weekendDown?: string; timeZone: string };
}

function karpenterEnv(k: KarpenterEnv): { name: string; value: string }[] {
  const env = [{ name: "LLMHA_CAPACITY_ENGINE", value: "karpenter" }];
  if (k.standbyNodePools !== undefined) env.push({ name: "LLMHA_STANDBY_NODEPOOLS", value: k.standbyNodePools });
  if (k.placeholder !== undefined) env.push({ name: "LLMHA_STANDBY_PLACEHOLDER", value: k.placeholder });
  if (k.schedule !== undefined) {
    const crons = [k.schedule.scaleDown, k.schedule.scaleUp, ...(k.schedule.weekendDown !== undefined ? [k.schedule.weekendDown] : [])];
    env.push({ name: "LLMHA_STANDBY_SCHEDULE", value: crons.join(";") }, { name: "LLMHA_STANDBY_SCHEDULE_TZ", value: k.schedule.timeZone });
  }
  return env;
}

/** The standby's settings the leader reads: its AZ, its size relative to an active AZ, its practice wakes. */
function standbyEnv(s: ControllerSpec): { name: string; value: string }[] {
  if (!s.standbyAz) return [];
  const env = [{ name: "LLMHA_STANDBY_AZ", value: s.standbyAz }];
  if (s.standbyCapacityPercent !== undefined && s.standbyCapacityPercent < 100) env.push({ name: "LLMHA_STANDBY_CAPACITY_PERCENT", value: String(s.standbyCapacityPercent) });
  if (s.practiceWake) {
    env.push(
      { name: "LLMHA_PRACTICE_WAKE", value: s.practiceWake.cron },
      { name: "LLMHA_PRACTICE_WAKE_TZ", value: s.practiceWake.timeZone },
      { name: "LLMHA_PRACTICE_WAKE_BUDGET_MS", value: String(s.practiceWake.budgetMinutes * 60_000) },
    );
  }
  return env;
}

function actuatorEnv(a: AgentActuatorEnv): { name: string; value: pulumi.Input<string> }[] {
  const env = [
    { name: "LLMHA_ACTUATOR", value: "aws" },
    { name: "LLMHA_AWS_REGION", value: a.region },
    { name: "LLMHA_AZ_IDS", value: a.azIds },
  ];
  if (a.standbyAsgs !== undefined) env.push({ name: "LLMHA_STANDBY_ASGS", value: a.standbyAsgs });
  if (a.standbyFallback !== undefined) env.push({ name: "LLMHA_STANDBY_FALLBACK", value: a.standbyFallback });
  if (a.reservedGroups !== undefined) env.push({ name: "LLMHA_RESERVED_GROUPS", value: a.reservedGroups });
  return env;
}

/** The repair ladder's settings as the controller reads them (docs/actuators.md). */
export interface ControllerRepairEnv {
  /** `LLMHA_REPAIR_MODE`. */
  mode: "advise" | "act" | "off";
  /** `LLMHA_REPAIR_SPARE`: `az=count,…`; absent when none. */
  spare?: string;
  /** `LLMHA_REPAIR_NAMESPACE`: the inference pods' namespace, where `act` drains and restarts. Given with `act` only. */
  namespace?: string;
  /** `LLMHA_REPAIR_PREDICTIVE_BUDGET`: predictive drains per 24 h; absent: the agent's default. */
  predictiveBudget?: number;
}

function repairEnv(r: ControllerRepairEnv): { name: string; value: string }[] {
  const env: { name: string; value: string }[] = [{ name: "LLMHA_REPAIR_MODE", value: r.mode }];
  if (r.spare !== undefined) env.push({ name: "LLMHA_REPAIR_SPARE", value: r.spare });
  if (r.namespace !== undefined) env.push({ name: "LLMHA_REPAIR_NAMESPACE", value: r.namespace });
  if (r.predictiveBudget !== undefined) env.push({ name: "LLMHA_REPAIR_PREDICTIVE_BUDGET", value: String(r.predictiveBudget) });
  return env;
}

export interface ControllerSpec {
  namespace: string;
  /** The agent image (agent/Dockerfile), by digest. */
  image: pulumi.Input<string>;
  /** `LLMHA_CLUSTER`. */
  clusterName: string;
  /** Secret holding `url` (the controller's Redis user where roles are on). */
  redisSecretName: string;
  /** Replicas: one per AZ of the stack (at least 2: a lost AZ leaves a contender). */
  replicas: number;
  /** `LLMHA_STANDBY_AZ`. Default none. */
  standbyAz?: string;
  /** `LLMHA_STANDBY_CAPACITY_PERCENT`. Default none (100). */
  standbyCapacityPercent?: number;
  /** `LLMHA_PRACTICE_WAKE`, `_TZ`, `_BUDGET_MS`. Default none. */
  practiceWake?: { cron: string; timeZone: string; budgetMinutes: number };
  /** The AWS actuator's settings; the pods then run as `CONTROLLER_SERVICE_ACCOUNT`. Default none (the leader acts on nothing). */
  actuator?: AgentActuatorEnv;
  /**
   * Node identities: the cluster's ServiceAccount issuer (`LLMHA_IDENTITY_ISSUER`); the leader
   * verifies enrolments against the API server's keys (`LLMHA_IDENTITY_JWKS=kubernetes`). Default
   * none: records read under `node:<id>`.
   */
  identityIssuer?: pulumi.Input<string>;
  /** The repair ladder (`LLMHA_REPAIR_*`). Default none: the agent's own default (advise). */
  repair?: ControllerRepairEnv;
  /** The Karpenter capacity engine's settings; absent: the ASG engine (the agent's default). */
  karpenter?: KarpenterEnv;
  /** `LLMHA_ROLLOUT_NAMESPACE`: the inference Deployments' namespace, where a rollout patches them and reads the `llm-ha-rollout` ConfigMap. Default none (the agent's `llm-ha`). */
  rolloutNamespace?: string;
}

/** What the controller reads of the API server to verify enrolment tokens: the issuer's keys and its discovery document. */
export const ISSUER_DISCOVERY_URLS = Object.freeze(["/openid/v1/jwks", "/.well-known/openid-configuration"]);

export function controllerLabels(): Record<string, string> {
  return { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
}

/** Exit 0 when the pod's own HTTP port answers `path` with a 2xx (the image has node, no curl). */
export function localGet(path: string): string[] {
  return ["node", "-e", `fetch('http://127.0.0.1:${PORTS.agentHttp}${path}',{signal:AbortSignal.timeout(2000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`];
}

/**
 * What the controller may read of the Kubernetes API: Nodes (get, list, watch), to know which GPU
 * nodes exist and in which AZ; with node identities also the ServiceAccount issuer's keys and
 * discovery document (get on those two non-resource URLs), to verify enrolment tokens.
 * Cluster-scoped (Nodes are), read-only, nothing else — unless the repair ladder acts
 * (`repair`): then also `patch` on Nodes (cordon and uncordon: `spec.unschedulable`).
 */
export function controllerNodeReader(namespace: string, identities = false, repair = false): { clusterRole: ClusterRole; binding: ClusterRoleBinding } {
  const name = "llm-ha-controller-nodes";
  const labels = { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" };
  const rules = [
    { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
    ...(identities ? [{ nonResourceURLs: [...ISSUER_DISCOVERY_URLS], verbs: ["get"] }] : []),
    ...(repair ? [{ apiGroups: [""], resources: ["nodes"], verbs: ["patch"] }] : []),
  ];
  return {
    clusterRole: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name, labels }, rules },
    binding: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects: [{ kind: "ServiceAccount", name: CONTROLLER_SERVICE_ACCOUNT, namespace }],
    },
  };
}

/** The controller Deployment and its PDB (one replica down at a time, so a contender stays). */
export function controllerManifests(s: ControllerSpec): { deployment: Deployment; pdb: PodDisruptionBudget } {
  // fsGroup 10001 reads the 0440 password file.
  const redis = redisCredential(s.redisSecretName, "controller-redis", 0o440);
  const labels = controllerLabels();
  const env = (name: string, value: string) => ({ name, value });
  const deployment: Deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: APP.controller, namespace: s.namespace, labels },
    spec: {
      replicas: s.replicas,
      selector: { matchLabels: labels },
      // One down at a time: a rollout never leaves the lease without a contender.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
      template: {
        // The net-role label gives the pods the controller's security group (infra/fences.ts).
        metadata: { labels: { ...labels, [NET_ROLE_LABEL]: "controller" } },
        spec: {
          nodeSelector: { "llm-ha.io/node-role": "system" },
          // A zone lost takes one replica: the others contend and lead from the surviving zones.
          topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "DoNotSchedule", labelSelector: { matchLabels: labels } }],
          affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: { topologyKey: "kubernetes.io/hostname", labelSelector: { matchLabels: labels } } }] } },
          priorityClassName: "system-cluster-critical",
          terminationGracePeriodSeconds: 15,
          // The only pods with the cloud role (IRSA) and the only llm-ha pods with a Kubernetes API
          // token: the leader reads the GPU Nodes (its inventory, `LLMHA_INVENTORY=kubernetes`) with
          // the ClusterRole of `controllerNodeReader` (get/list/watch nodes; with node identities get
          // on the issuer's keys and discovery document; nothing else).
          serviceAccountName: CONTROLLER_SERVICE_ACCOUNT,
          automountServiceAccountToken: true,
          // fsGroup: the projected IRSA token must be readable by the non-root user.
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "controller",
              image: s.image,
              args: ["agent"],
              env: [
                env("LLMHA_ROLE", "controller"),
                // The pod's name: the lease holder is `<pod>/<pid>`.
                { name: "LLMHA_NODE_ID", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                env("LLMHA_CLUSTER", s.clusterName),
                // Which GPU nodes exist and where: the Node objects, not what the nodes write in Redis.
                env("LLMHA_INVENTORY", "kubernetes"),
                env("LLMHA_INVENTORY_SELECTOR", LABELS.gpuClass),
                env("LLMHA_HTTP_PORT", String(PORTS.agentHttp)),
                // Node identities: enrolments verified against the API server's issuer keys, `iss` checked.
                ...(s.identityIssuer !== undefined ? [env("LLMHA_IDENTITY_JWKS", "kubernetes"), { name: "LLMHA_IDENTITY_ISSUER", value: s.identityIssuer }] : []),
                ...redis.env,
                ...standbyEnv(s),
                ...(s.actuator ? actuatorEnv(s.actuator) : []),
                ...(s.karpenter ? karpenterEnv(s.karpenter) : []),
                ...(s.repair ? repairEnv(s.repair) : []),
                ...(s.rolloutNamespace !== undefined ? [env("LLMHA_ROLLOUT_NAMESPACE", s.rolloutNamespace)] : []),
              ],
              ports: [{ name: "http", containerPort: PORTS.agentHttp }],
              // Exec probes: the pod's security group takes no connection from the kubelet (infra/fences.ts).
              livenessProbe: { exec: { command: localGet("/livez") }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 3 },
              readinessProbe: { exec: { command: localGet("/readyz") }, periodSeconds: 5, failureThreshold: 3, timeoutSeconds: 3 },
              resources: { requests: { cpu: "50m", memory: "128Mi" }, limits: { memory: "256Mi" } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
              volumeMounts: [redis.mount],
            },
          ],
          volumes: [redis.volume],
        },
      },
    },
  };
  return { deployment, pdb: onePodAtATime(APP.controller, s.namespace, labels) };
}
