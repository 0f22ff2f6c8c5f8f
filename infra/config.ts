import * as pulumi from "@pulumi/pulumi";
import { cronProblem } from "../contracts/cron";
import { DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "./observability/thresholds";
import { LOAD_BALANCER_ARN } from "../contracts/arn";
import { DEFAULT_EKS_VERSION, eksVersionProblem, isoDay } from "../contracts/eks-versions";
import { ADDON_VERSIONS, type AddonName } from "./addons";
import { Problems } from "./problems";
import { ROLE_NAMES, type RoleName } from "../contracts/redis-roles";

/**
 * GPU classes llm-ha knows, with the instance type and GPU count of each, and the next
 * instance types of the class that the standby AZ's fallback group launches when the first
 * type has no capacity (`llm-ha:standbyFallback`): p4de (A100 80 GB) after p4d, p5e (H200,
 * 8 GPUs, more memory: what fits an H100 fits it) after p5. Each has 8 GPUs, as the class.
 */
export const GPU_CLASSES = Object.freeze({
  a100: { instanceType: "p4d.24xlarge", gpus: 8, fallbackInstanceTypes: ["p4de.24xlarge"] as readonly string[] },
  h100: { instanceType: "p5.48xlarge", gpus: 8, fallbackInstanceTypes: ["p5e.48xlarge"] as readonly string[] },
});
export type GpuClassName = keyof typeof GPU_CLASSES;

/** One GPU class deployed in every AZ. */
export interface GpuClassConfig {
  name: GpuClassName;
  /** The first of `instanceTypes` (prices, quotas). */
  instanceType: string;
  /**
   * EC2 instance types, in order of preference: the node group launches whichever has
   * capacity (`instanceTypes: [p5.48xlarge, p5e.48xlarge]`). Default the class's one type.
   * Exactly one with a capacity reservation or block (a reservation is for one type).
   */
  instanceTypes: string[];
  /** GPUs per node; defaults to the class's (8). */
  gpusPerNode: number;
  /** Nodes per AZ while active. */
  desiredPerAz: number;
  /** Upper bound per AZ (also the HAProxy server slots for the AZ). */
  maxPerAz: number;
  /**
   * Capacity reservation per AZ (`{us-east-1a: cr-…}`): a reservation belongs to one AZ, so
   * each AZ's node group launches into its own; an AZ without one launches On-Demand.
   */
  capacityReservations: Record<string, string>;
  /** `ON_DEMAND` (default) or `CAPACITY_BLOCK` (EC2 Capacity Blocks for ML: a reservation in every AZ). */
  capacityType: "ON_DEMAND" | "CAPACITY_BLOCK";
}

/** How `pulumi up` reaches the cluster's API (`llm-ha:apiEndpoint`). */
export type ApiEndpointConfig =
  /** Public endpoint open to these CIDRs only (the machine running `pulumi up` must be in one), plus the private one. */
  | { access: "public"; publicAccessCidrs: string[] }
  /** Private endpoint only; `pulumi up` runs inside the VPC or a network routed to it (`runnerCidrs` may reach :443). */
  | { access: "private"; runnerCidrs: string[] };

/** Hugging Face organisations whose models are gated: a stack serving one needs `llm-ha:hfToken`. */
export const GATED_MODEL_ORGS = Object.freeze(["meta-llama", "mistralai", "google", "CohereForAI", "bigcode"]);

/** `llm-ha:practiceWake`: the leader wakes the sleeping standby on this cron and releases it (`LLMHA_PRACTICE_WAKE*`). */
export interface PracticeWakeConfig {
  /** 5-field cron. Default `0 4 * * 0` (Sunday 04:00: every stack file's standby sleeps then). */
  cron: string;
  /** IANA time zone. Default the standby schedule's. */
  timeZone: string;
  /** A practice with no standby node serving this long has failed and is released. Default 20. */
  budgetMinutes: number;
}

export const DEFAULT_PRACTICE_CRON = "0 4 * * 0";
export const DEFAULT_PRACTICE_BUDGET_MINUTES = 20;

/** Nodes of one standby group sized at `ratio` of an active AZ (`llm-ha:standbyCapacityRatio`): rounded up, max at least 1. */
export function standbySize(c: Pick<GpuClassConfig, "desiredPerAz" | "maxPerAz">, ratio: number): { desired: number; max: number } {
  const desired = Math.max(0, Math.ceil(c.desiredPerAz * ratio - 1e-9));
  return { desired, max: Math.max(1, desired, Math.ceil(c.maxPerAz * ratio - 1e-9)) };
}

export interface ScheduleConfig {
  /** IANA time zone of the cron expressions, e.g. `Europe/Berlin`. */
  timeZone: string;
  /** 5-field cron: when the standby AZ goes to zero (evenings). */
  scaleDown: string;
  /** 5-field cron: when the standby AZ comes back (mornings). */
  scaleUp: string;
  /** Extra scale-down cron (weekends); optional. */
  weekendDown?: string;
}

/** Everything the program reads from `Pulumi.<stack>.yaml`, validated once. */
export interface StackConfig {
  clusterName: string;
  region: string;
  azs: string[];
  standbyAz?: string;
  vpcCidr: string;
  natPerAz: boolean;
  kubernetesVersion: string;
  apiEndpoint: ApiEndpointConfig;
  system: { instanceType: string; desiredSize: number; maxSize: number };
  gpuClasses: GpuClassConfig[];
  inference: { image: string; model: string; gpusPerPod?: number; extraArgs: string[]; weightsS3Uri?: string };
  /** The agent image by digest (`<repo>@sha256:…`); empty when `agentImageBuild` builds and pushes it. */
  agentImage: string;
  /** Build agent/Dockerfile and push it to the stack's ECR repository (`@pulumi/docker-build`; needs Docker). */
  agentImageBuild: boolean;
  /** Hugging Face token for gated models (`pulumi config set --secret llm-ha:hfToken`). */
  hfToken?: pulumi.Output<string>;
  haproxy: { image: string; replicas: number };
  /** `zonalShiftResources`: ARNs of the L1 NLBs the agent may zonal-shift (made by the load balancer controller, so not outputs). */
  dns: { zoneId: string; serviceName: string; ttl: number; failureThreshold: number; zonalShift: boolean; zonalShiftResources: string[] };
  /** `rolePasswords` (`llm-ha:redisRolePasswords`, secret object role → password): one ElastiCache RBAC user per role (docs/redis-roles.md); absent = the AUTH token alone. */
  redis: { nodeType: string; replicas: number; authToken: pulumi.Output<string>; rolePasswords?: Partial<Record<RoleName, pulumi.Output<string>>> };
  kafka: { version: string; brokersPerAz: number; instanceType: string; volumeSizeGb: number };
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
  /** Managed add-on versions over `ADDON_VERSIONS` (`llm-ha:addonVersions`). */
  addonVersions: Partial<Record<AddonName, string>>;
}

/** One external OpenAI-compatible upstream of the L4 fallback; the list's order is its priority. */
export interface FallbackProviderConfig {
  /** `[A-Za-z0-9_.-]+`, unique: the metrics' `provider` label and `x-llmha-degraded: upstream:<name>`. */
  name: string;
  /** Base URL, `https://…/v1`. */
  url: string;
  /** To the response headers. Default 10000. */
  timeoutMs: number;
  /** Our model → theirs; `"*": "*"` passes any. */
  models: Record<string, string>;
  /** The stack secret holding its key (`llm-ha:<keySecret>`), if it needs one. */
  keySecret?: string;
  /** That secret's value. */
  key?: pulumi.Output<string>;
}

/** `llm-ha:fallback`. */
export interface FallbackConfig {
  /** Run `llm-ha fallback` beside each L1 proxy. Default true. */
  enabled: boolean;
  /** Models it serves (others 404). Default `[inference.model]`. */
  models: string[];
  /** External upstreams, in order of priority. Default none (cache and queue only). */
  providers: FallbackProviderConfig[];
  /** Queue depth at which it answers 503 `queue_full`. Default the service's (100000). */
  maxQueueDepth?: number;
  /** Replay pace through the L1 proxy, requests/s. Default the service's (5). */
  replayRps?: number;
}

const FALLBACK_KEYS = ["enabled", "models", "providers", "maxQueueDepth", "replayRps"];
const FALLBACK_PROVIDER_KEYS = ["name", "url", "timeoutMs", "models", "keySecret"];

/** `llm-ha:fallback`, validated; every problem names its key. */
function fallbackOf(v: unknown, cfg: pulumi.Config, servedModel: string, p: Problems): FallbackConfig {
  const k = `${cfg.name}:fallback`;
  const off: FallbackConfig = { enabled: true, models: servedModel ? [servedModel] : [], providers: [] };
  if (v === undefined) return off;
  if (!isObj(v)) {
    p.add(k, "must be an object ({enabled, models, providers, maxQueueDepth, replayRps})");
    return off;
  }
  for (const x of Object.keys(v)) if (!FALLBACK_KEYS.includes(x)) p.add(`${k}.${x}`, `unknown setting; known: ${FALLBACK_KEYS.join(", ")}`);
  if (v.enabled !== undefined && typeof v.enabled !== "boolean") p.add(`${k}.enabled`, "must be true or false");
  let models = off.models;
  if (v.models !== undefined) {
    if (!Array.isArray(v.models) || v.models.length === 0 || !v.models.every((m) => typeof m === "string" && m !== "")) p.add(`${k}.models`, "must be a non-empty list of model names");
    else if (new Set(v.models).size !== v.models.length) p.add(`${k}.models`, "lists a model twice");
    else models = v.models as string[];
  }
  const posInt = (name: "maxQueueDepth" | "replayRps", max: number): number | undefined => {
    const x = v[name];
    if (x === undefined) return undefined;
    if (!Number.isInteger(x) || (x as number) < 1 || (x as number) > max) {
      p.add(`${k}.${name}`, `must be an integer from 1 to ${max}`);
      return undefined;
    }
    return x as number;
  };
  const providers: FallbackProviderConfig[] = [];
  const raw = v.providers ?? [];
  if (!Array.isArray(raw)) p.add(`${k}.providers`, "must be a list of providers, in order of priority");
  else {
    raw.forEach((pr: unknown, i) => {
      const path = `${k}.providers[${i}]`;
      if (!isObj(pr)) return p.add(path, "must be an object ({name, url, models, timeoutMs, keySecret})");
      if (pr.key !== undefined || pr.apiKey !== undefined) {
        p.add(`${path}.${pr.key !== undefined ? "key" : "apiKey"}`, `a provider key never goes in the stack file in clear: pulumi config set --secret ${cfg.name}:<secretName> <key>, then keySecret: <secretName>`);
      }
      for (const x of Object.keys(pr)) if (!FALLBACK_PROVIDER_KEYS.includes(x) && x !== "key" && x !== "apiKey") p.add(`${path}.${x}`, `unknown setting; known: ${FALLBACK_PROVIDER_KEYS.join(", ")}`);
      const name = pr.name;
      if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) p.add(`${path}.name`, "is required: [A-Za-z0-9_.-]+, at most 64 characters");
      else if (providers.some((x) => x.name === name)) p.add(`${path}.name`, `provider ${name} listed twice`);
      let url = "";
      if (typeof pr.url !== "string") p.add(`${path}.url`, "is required: the provider's OpenAI-compatible base URL, https://…/v1");
      else {
        let u: URL | undefined;
        try {
          u = new URL(pr.url);
        } catch {
          p.add(`${path}.url`, `${JSON.stringify(pr.url)} is not a URL`);
        }
        if (u && u.protocol !== "https:") p.add(`${path}.url`, `${pr.url} must be https: the key and the prompts cross the internet`);
        else if (u && (u.username || u.password)) p.add(`${path}.url`, "must not carry credentials; put the key in keySecret");
        else if (u) url = pr.url.replace(/\/+$/, "");
      }
      const timeoutMs = pr.timeoutMs ?? 10_000;
      if (!Number.isInteger(timeoutMs) || (timeoutMs as number) < 100 || (timeoutMs as number) > 600_000) p.add(`${path}.timeoutMs`, "must be an integer from 100 to 600000 (ms to the response headers)");
      const map: Record<string, string> = {};
      if (!isObj(pr.models) || Object.keys(pr.models).length === 0 || !Object.values(pr.models).every((m) => typeof m === "string" && m !== "")) {
        p.add(`${path}.models`, 'is required: a map of our model to the provider\'s, e.g. {"<served model>": gpt-4o-mini} or {"*": "*"}');
      } else {
        for (const [ours, theirs] of Object.entries(pr.models)) {
          if (ours !== "*" && !models.includes(ours)) p.add(`${path}.models.${ours}`, `is not a served model (${k}.models: ${models.join(", ")})`);
          else map[ours] = theirs as string;
        }
      }
      let keySecret: string | undefined;
      let key: pulumi.Output<string> | undefined;
      if (pr.keySecret !== undefined) {
        if (typeof pr.keySecret !== "string" || !/^[A-Za-z][A-Za-z0-9_-]*$/.test(pr.keySecret)) p.add(`${path}.keySecret`, "must name a stack secret of this project, e.g. fallbackKeyOpenai");
        else {
          keySecret = pr.keySecret;
          key = cfg.getSecret(keySecret);
          if (key === undefined) p.add(`${cfg.name}:${keySecret}`, `is required by ${path}.keySecret: pulumi config set --secret ${cfg.name}:${keySecret} <the provider's API key>`);
        }
      }
      if (typeof name === "string") providers.push({ name, url, timeoutMs: timeoutMs as number, models: map, keySecret, key });
    });
  }
  return { enabled: v.enabled !== false, models, providers, maxQueueDepth: posInt("maxQueueDepth", 10_000_000), replayRps: posInt("replayRps", 1000) };
}

const INSTANCE_TYPE = /^[a-z][a-z0-9-]*\.[a-z0-9]+$/;

/**
 * `llm-ha:standbyCapacityRatio`, `llm-ha:standbyFallback`, `llm-ha:standbyCapacityWaiver` and
 * `llm-ha:practiceWake`: how the standby AZ is sized, what it falls back to when its first
 * instance type has no capacity, and when it is practised. Every problem names its key.
 */
function standbyOf(
  cfg: pulumi.Config,
  standbyAz: string | undefined,
  classes: GpuClassConfig[],
  schedule: ScheduleConfig | undefined,
  p: Problems,
): Pick<StackConfig, "standbyCapacityRatio" | "standbyFallback" | "standbyCapacityWaiver" | "practiceWake"> {
  const key = (k: string) => `${cfg.name}:${k}`;
  const needsStandby = (k: string) => p.add(key(k), `needs ${key("standbyAz")}: it is about the standby AZ`);

  let standbyCapacityRatio = 1;
  const ratioText = cfg.get("standbyCapacityRatio");
  if (ratioText !== undefined) {
    const rawRatio = ratioText.trim() === "" ? NaN : Number(ratioText);
    if (!Number.isFinite(rawRatio) || rawRatio < 0.01 || rawRatio > 1) {
      p.add(key("standbyCapacityRatio"), `${JSON.stringify(ratioText)} must be a number from 0.01 to 1: the standby's size relative to an active AZ (0.5 = half)`);
    } else if (standbyAz === undefined) needsStandby("standbyCapacityRatio");
    // Rounded up per class (`standbySize`): a class with nodes keeps at least one on the standby.
    else standbyCapacityRatio = rawRatio;
  }

  const standbyFallback: Partial<Record<GpuClassName, string[]>> = {};
  const rawFallback = cfg.getObject<unknown>("standbyFallback");
  if (rawFallback !== undefined && !isObj(rawFallback)) {
    p.add(key("standbyFallback"), "must map a GPU class to the instance types of its fallback group, e.g. {h100: [p5e.48xlarge]} ([] for none)");
  } else if (rawFallback !== undefined && standbyAz === undefined) needsStandby("standbyFallback");
  else if (standbyAz !== undefined) {
    const given = (rawFallback ?? {}) as Obj;
    for (const k of Object.keys(given)) {
      if (!classes.some((c) => c.name === k)) p.add(key(`standbyFallback.${k}`), `is not a GPU class of ${key("gpuClasses")} (${classes.map((c) => c.name).join(", ")})`);
    }
    for (const c of classes) {
      const v = given[c.name];
      let types: string[];
      if (v === undefined) {
        // Default: the class's next types the group does not already launch.
        types = GPU_CLASSES[c.name].fallbackInstanceTypes.filter((t) => !c.instanceTypes.includes(t));
      } else if (!Array.isArray(v) || !v.every((t) => typeof t === "string" && INSTANCE_TYPE.test(t))) {
        p.add(key(`standbyFallback.${c.name}`), "must be a list of EC2 instance types, e.g. [p5e.48xlarge] ([] for no fallback group)");
        continue;
      } else {
        types = v as string[];
        const dup = types.filter((t) => c.instanceTypes.includes(t));
        if (dup.length) p.add(key(`standbyFallback.${c.name}`), `${dup.join(", ")} is already an instance type of the class's own groups: a fallback needs another type`);
        if (new Set(types).size !== types.length) p.add(key(`standbyFallback.${c.name}`), "lists an instance type twice");
      }
      if (types.length) standbyFallback[c.name] = types;
    }
  }

  const rawWaiver = cfg.get("standbyCapacityWaiver");
  let standbyCapacityWaiver: string | undefined;
  if (rawWaiver !== undefined) {
    if (typeof rawWaiver !== "string" || rawWaiver.trim().length < 10 || rawWaiver.length > 256) {
      p.add(key("standbyCapacityWaiver"), "must say why the standby needs no capacity fallback, 10 to 256 characters");
    } else if (!/^[A-Za-z0-9 _.:/=+\-@,;()']+$/.test(rawWaiver)) {
      p.add(key("standbyCapacityWaiver"), "must be plain text (letters, digits, spaces and _ . : / = + - @ , ; ( ) '): it becomes an AWS tag value");
    } else if (standbyAz === undefined) needsStandby("standbyCapacityWaiver");
    else standbyCapacityWaiver = rawWaiver.trim();
  }

  let practiceWake: PracticeWakeConfig | undefined;
  const rawPractice = cfg.getObject<unknown>("practiceWake");
  if (rawPractice === false) practiceWake = undefined;
  else if (rawPractice !== undefined && !isObj(rawPractice)) p.add(key("practiceWake"), "must be an object ({cron, timeZone, budgetMinutes}) or false");
  else if (rawPractice !== undefined && standbyAz === undefined) needsStandby("practiceWake");
  else if (standbyAz !== undefined) {
    const v = (rawPractice ?? {}) as Obj;
    for (const k of Object.keys(v)) if (!["cron", "timeZone", "budgetMinutes"].includes(k)) p.add(key(`practiceWake.${k}`), "unknown setting; known: cron, timeZone, budgetMinutes");
    const cron = v.cron ?? DEFAULT_PRACTICE_CRON;
    const why = typeof cron === "string" ? cronProblem(cron) : "not a string";
    if (typeof cron !== "string" || why !== undefined) p.add(key("practiceWake.cron"), `${JSON.stringify(cron)} is not a 5-field cron expression: ${why}`);
    // Default the schedule's zone (a bad one is reported once, under llm-ha:schedule.timeZone).
    const timeZone = v.timeZone ?? (schedule?.timeZone && isTimeZone(schedule.timeZone) ? schedule.timeZone : "UTC");
    if (typeof timeZone !== "string" || !isTimeZone(timeZone)) p.add(key("practiceWake.timeZone"), `${JSON.stringify(timeZone)} is not an IANA time zone`);
    const budget = v.budgetMinutes ?? DEFAULT_PRACTICE_BUDGET_MINUTES;
    // LLMHA_PRACTICE_WAKE_BUDGET_MS takes 1 minute to 24 hours.
    if (!Number.isInteger(budget) || (budget as number) < 1 || (budget as number) > 1440) p.add(key("practiceWake.budgetMinutes"), "must be an integer from 1 to 1440");
    practiceWake = { cron: String(cron), timeZone: String(timeZone), budgetMinutes: Number(budget) };
  }
  return { standbyCapacityRatio, standbyFallback, standbyCapacityWaiver, practiceWake };
}

/** Alerts, dashboard and scrape monitors (`llm-ha:observability`). */
export interface ObservabilityConfig {
  /** Ship them at all. Default true. */
  enabled: boolean;
  /** PrometheusRule + PodMonitors (prometheus-operator CRDs must exist; this stack does not install them). Default false. */
  prometheusOperator: boolean;
  /** Namespace of the dashboard ConfigMap. Default: the workloads' (`llm-ha`). */
  grafanaNamespace?: string;
  /** Labels the Prometheus' rule/monitor selectors need, e.g. `release: kube-prometheus-stack`. Default none. */
  selectorLabels: Record<string, string>;
  /** Alert thresholds that differ from the defaults. */
  thresholds: Partial<AlertThresholds>;
}

type Obj = Record<string, unknown>;

/** True for a 5-field cron expression as EC2 Auto Scaling accepts it (see `cron.ts`). */
export function isCron(expr: string): boolean {
  return cronProblem(expr) === undefined;
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isPosInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;

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
}

/** RFC 2606 / 6761 names nobody can own: a stack file still carrying one was never filled in. */
const RESERVED_DOMAIN = /(^|\.)(example\.(com|net|org)|example|test|invalid|localhost)$/;

/** A CIDR a public API endpoint may be open to: IPv4, prefix /8 or longer (never 0.0.0.0/0). */
function cidrProblem(c: unknown): string | undefined {
  const m = typeof c === "string" ? /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(c) : null;
  if (!m || m.slice(1, 5).some((o) => Number(o) > 255) || Number(m[5]) > 32) return `${JSON.stringify(c)} is not an IPv4 CIDR`;
  if (Number(m[5]) < 8) return `${c} opens the Kubernetes API to the internet; list the networks pulumi up and kubectl run from`;
  return undefined;
}

/** `llm-ha:apiEndpoint`: required, because how `pulumi up` reaches the API is the user's choice. */
function apiEndpointOf(v: unknown, k: string, p: Problems): ApiEndpointConfig {
  const choice =
    `choose access: public with publicAccessCidrs: [<the CIDRs pulumi up and kubectl run from>] ` +
    `(the API answers only those; nodes use the private endpoint), or access: private with runnerCidrs: [<CIDRs of an in-VPC or VPN-routed runner>] ` +
    `(pulumi up must then run inside the VPC: docs/infra.md "Private API endpoint")`;
  if (v === undefined) {
    p.add(k, `is required: ${choice}`);
    return { access: "public", publicAccessCidrs: [] };
  }
  if (!isObj(v) || (v.access !== "public" && v.access !== "private")) {
    p.add(`${k}.access`, `must be "public" or "private": ${choice}`);
    return { access: "public", publicAccessCidrs: [] };
  }
  const listKey = v.access === "public" ? "publicAccessCidrs" : "runnerCidrs";
  const other = v.access === "public" ? "runnerCidrs" : "publicAccessCidrs";
  if (v[other] !== undefined) p.add(`${k}.${other}`, `does not apply to access: ${v.access}`);
  const cidrs = v[listKey];
  if (!Array.isArray(cidrs) || cidrs.length === 0) {
    p.add(`${k}.${listKey}`, `is required with access: ${v.access} (a non-empty list of CIDRs; 0.0.0.0/0 is refused)`);
    return v.access === "public" ? { access: "public", publicAccessCidrs: [] } : { access: "private", runnerCidrs: [] };
  }
  for (const c of cidrs) {
    const why = cidrProblem(c);
    if (why) p.add(`${k}.${listKey}`, why);
  }
  const ok = cidrs.filter((c): c is string => cidrProblem(c) === undefined);
  return v.access === "public" ? { access: "public", publicAccessCidrs: ok } : { access: "private", runnerCidrs: ok };
}

/** The program's configuration: `resolveConfig` over the running stack's config. */
export function loadConfig(): StackConfig {
  return resolveConfig({ project: new pulumi.Config(), aws: new pulumi.Config("aws"), stack: pulumi.getStack() });
}

/**
 * Reads and validates the whole stack configuration and fills in the defaults. Every bad
 * key is named in one `InputPropertiesError`, so a user fixes the stack file in one pass.
 */
export function resolveConfig(src: ConfigSources): StackConfig {
  const cfg = src.project;
  const p = new Problems();
  const key = (k: string) => `${cfg.name}:${k}`;
  const obj = (k: string): Obj => {
    const v = cfg.getObject<unknown>(k);
    if (v === undefined) return {};
    if (!isObj(v)) {
      p.add(key(k), "must be an object");
      return {};
    }
    return v;
  };
  const str = (o: Obj, k: string, path: string, dflt?: string): string => {
    const v = o[k] ?? dflt;
    if (typeof v !== "string" || v === "") {
      p.add(path, dflt === undefined && v === undefined ? "is required" : "must be a non-empty string");
      return "";
    }
    return v;
  };
  const int = (o: Obj, k: string, path: string, dflt: number, min = 1): number => {
    const v = o[k] ?? dflt;
    if (!Number.isInteger(v) || (v as number) < min) {
      p.add(path, `must be an integer ≥ ${min}`);
      return dflt;
    }
    return v as number;
  };

  /** `instanceTypes` (a list), or the older single `instanceType`, or the class's type. */
  const instanceTypesOf = (g: Obj, path: string, dflt: string): string[] => {
    const v = g.instanceTypes ?? (g.instanceType !== undefined ? [g.instanceType] : [dflt]);
    if (!Array.isArray(v) || v.length === 0 || !v.every((t) => typeof t === "string" && /^[a-z][a-z0-9-]*\.[a-z0-9]+$/.test(t))) {
      p.add(`${path}.instanceTypes`, "must be a non-empty list of EC2 instance types, e.g. [p5.48xlarge, p5e.48xlarge]");
      return [];
    }
    if (new Set(v).size !== v.length) p.add(`${path}.instanceTypes`, "lists an instance type twice");
    return v as string[];
  };

  const region = src.aws.get("region") ?? "";
  if (!region) p.add("aws:region", "is required");

  const azsRaw = cfg.getObject<unknown>("azs");
  let azs: string[] = [];
  if (!Array.isArray(azsRaw) || !azsRaw.every((a) => typeof a === "string")) {
    p.add(key("azs"), "must be a list of availability zone names");
  } else {
    azs = azsRaw as string[];
    if (azs.length < 2) p.add(key("azs"), `needs at least 2 availability zones for zone failover, got ${azs.length}`);
    if (azs.length > 3) p.add(key("azs"), `MSK spreads brokers over 2 or 3 AZs, got ${azs.length}`);
    if (new Set(azs).size !== azs.length) p.add(key("azs"), "lists an availability zone twice");
    const foreign = azs.filter((a) => region && !(a.startsWith(region) && /^[a-z]$/.test(a.slice(region.length))));
    if (foreign.length) p.add(key("azs"), `${foreign.join(", ")} not in region ${region}`);
  }

  const standbyAz = cfg.get("standbyAz");
  if (standbyAz !== undefined && !azs.includes(standbyAz)) p.add(key("standbyAz"), `${standbyAz} is not one of llm-ha:azs`);

  const net = obj("network");
  const natGateways = net.natGateways ?? "perAz";
  if (natGateways !== "single" && natGateways !== "perAz") p.add(key("network.natGateways"), 'must be "single" or "perAz"');

  const sys = obj("systemNodes");
  const gpuRaw = cfg.getObject<unknown>("gpuClasses");
  const gpuClasses: GpuClassConfig[] = [];
  if (!Array.isArray(gpuRaw) || gpuRaw.length === 0) {
    p.add(key("gpuClasses"), "must be a non-empty list");
  } else {
    gpuRaw.forEach((g: unknown, i) => {
      const path = key(`gpuClasses[${i}]`);
      if (!isObj(g)) return p.add(path, "must be an object");
      const name = g.name;
      if (typeof name !== "string" || !(name in GPU_CLASSES)) {
        return p.add(`${path}.name`, `unknown GPU class ${JSON.stringify(name)}; known: ${Object.keys(GPU_CLASSES).join(", ")}`);
      }
      if (gpuClasses.some((c) => c.name === name)) return p.add(`${path}.name`, `GPU class ${name} listed twice`);
      const known = GPU_CLASSES[name as GpuClassName];
      const desiredPerAz = int(g, "desiredPerAz", `${path}.desiredPerAz`, 1, 0);
      const maxPerAz = int(g, "maxPerAz", `${path}.maxPerAz`, Math.max(desiredPerAz, 1));
      if (maxPerAz < desiredPerAz) p.add(`${path}.maxPerAz`, "must be ≥ desiredPerAz");
      if (g.capacityReservationId !== undefined) {
        p.add(`${path}.capacityReservationId`, "a capacity reservation belongs to one AZ: set capacityReservations: {<az>: cr-…} instead");
      }
      if (g.efa !== undefined) {
        p.add(
          `${path}.efa`,
          "is not supported: tensor parallelism within one node runs over NVLink and needs no EFA; a half-configured EFA " +
            "(no self-referencing security group, placement group or EFA device plugin) only breaks node launch. Remove the key",
        );
      }
      const types = instanceTypesOf(g, path, known.instanceType);
      const capacityType = g.capacityType ?? "ON_DEMAND";
      if (capacityType !== "ON_DEMAND" && capacityType !== "CAPACITY_BLOCK") p.add(`${path}.capacityType`, 'must be "ON_DEMAND" or "CAPACITY_BLOCK"');
      const crs = g.capacityReservations ?? {};
      const reservations: Record<string, string> = {};
      if (!isObj(crs)) p.add(`${path}.capacityReservations`, "must map an availability zone to a reservation id (cr-…)");
      else {
        for (const [az, id] of Object.entries(crs)) {
          if (!azs.includes(az)) p.add(`${path}.capacityReservations.${az}`, `${az} is not one of llm-ha:azs`);
          else if (typeof id !== "string" || !/^cr-[0-9a-f]{8,17}$/.test(id)) p.add(`${path}.capacityReservations.${az}`, "must look like cr-0123456789abcdef0");
          else reservations[az] = id;
        }
        const ids = Object.values(reservations);
        const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
        if (twice.length) p.add(`${path}.capacityReservations`, `${twice[0]} is listed for two AZs; a reservation belongs to one AZ`);
      }
      if ((Object.keys(reservations).length > 0 || capacityType === "CAPACITY_BLOCK") && types.length > 1) {
        p.add(`${path}.instanceTypes`, "a capacity reservation or block is for one instance type: list exactly one");
      }
      if (capacityType === "CAPACITY_BLOCK") {
        const without = azs.filter((az) => reservations[az] === undefined);
        if (without.length) p.add(`${path}.capacityReservations`, `CAPACITY_BLOCK needs a capacity block reservation in every AZ; missing: ${without.join(", ")}`);
      }
      gpuClasses.push({
        name: name as GpuClassName,
        instanceType: types[0] ?? known.instanceType,
        instanceTypes: types.length ? types : [known.instanceType],
        gpusPerNode: int(g, "gpusPerNode", `${path}.gpusPerNode`, known.gpus),
        desiredPerAz,
        maxPerAz,
        capacityReservations: reservations,
        capacityType: capacityType === "CAPACITY_BLOCK" ? "CAPACITY_BLOCK" : "ON_DEMAND",
      });
    });
  }

  const inf = obj("inference");
  const gpusPerPod = inf.gpusPerPod;
  if (gpusPerPod !== undefined && !isPosInt(gpusPerPod)) p.add(key("inference.gpusPerPod"), "must be a positive integer");
  const extraArgs = inf.extraArgs ?? [];
  if (!Array.isArray(extraArgs) || !extraArgs.every((a) => typeof a === "string")) p.add(key("inference.extraArgs"), "must be a list of strings");
  const weightsS3Uri = inf.weightsS3Uri;
  if (weightsS3Uri !== undefined && (typeof weightsS3Uri !== "string" || !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(weightsS3Uri))) {
    p.add(key("inference.weightsS3Uri"), "must be an s3://bucket/prefix URI");
  }
  const model = str(inf, "model", key("inference.model"));
  const hfToken = cfg.getSecret("hfToken");
  const org = model.split("/")[0];
  if (hfToken === undefined && GATED_MODEL_ORGS.includes(org) && weightsS3Uri === undefined) {
    p.add(
      key("hfToken"),
      `is required: ${model} is a gated Hugging Face model (accept its licence, then pulumi config set --secret ${key("hfToken")} hf_…), or prefetch it from S3 with ${key("inference.weightsS3Uri")}`,
    );
  }

  const api = apiEndpointOf(cfg.getObject<unknown>("apiEndpoint"), key("apiEndpoint"), p);
  if (cfg.get("privateEndpointOnly") !== undefined) {
    p.add(key("privateEndpointOnly"), `is replaced by ${key("apiEndpoint")} (access: public with publicAccessCidrs, or access: private with runnerCidrs)`);
  }

  const addonVersions: Partial<Record<AddonName, string>> = {};
  for (const [name, v] of Object.entries(obj("addonVersions"))) {
    if (!(name in ADDON_VERSIONS)) p.add(key(`addonVersions.${name}`), `unknown add-on; known: ${Object.keys(ADDON_VERSIONS).join(", ")}`);
    else if (typeof v !== "string" || !/^v\d+\.\d+\.\d+-eksbuild\.\d+$/.test(v)) p.add(key(`addonVersions.${name}`), "must look like v1.2.3-eksbuild.1");
    else addonVersions[name as AddonName] = v;
  }

  const kubernetesVersion = cfg.get("kubernetesVersion") ?? DEFAULT_EKS_VERSION;
  const versionProblem = eksVersionProblem(kubernetesVersion, isoDay(src.today ?? new Date()));
  if (versionProblem) p.add(key("kubernetesVersion"), versionProblem);

  const agentImageBuild = cfg.getBoolean("agentImageBuild") ?? false;
  const agentImage = cfg.get("agentImage") ?? "";
  if (agentImageBuild && agentImage) p.add(key("agentImage"), `give either ${key("agentImage")} (a digest) or ${key("agentImageBuild")}: true, not both`);
  else if (!agentImageBuild) {
    if (!agentImage) {
      p.add(key("agentImage"), `is required: the agent image by digest (<repo>@sha256:<64 hex>, e.g. pushed to the stack's ECR repository), or ${key("agentImageBuild")}: true to build and push it with Docker`);
    } else if (agentImage.startsWith("ghcr.io/llm-ha/")) {
      p.add(key("agentImage"), `${agentImage} is the documentation's example: nobody publishes it; build agent/Dockerfile and push it (or set ${key("agentImageBuild")}: true)`);
    } else if (!/^[a-z0-9.-]+(:[0-9]+)?\/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$/.test(agentImage)) {
      p.add(key("agentImage"), `${agentImage} must name the image by digest (<repo>@sha256:<64 hex>): a tag can move under running nodes`);
    }
  }

  const hap = obj("haproxy");
  const dns = obj("dns");
  const ttl = int(dns, "ttl", key("dns.ttl"), 30);
  if (ttl > 30) p.add(key("dns.ttl"), `${ttl} s is over 30 s: DNS failover would miss the 60 s zone target`);
  const failureThreshold = int(dns, "failureThreshold", key("dns.failureThreshold"), 2);
  if (failureThreshold > 2) p.add(key("dns.failureThreshold"), `${failureThreshold} is over 2: 10 s × threshold + TTL must stay ≤ 60 s`);
  const shiftArns = dns.zonalShiftResources ?? [];
  if (!Array.isArray(shiftArns) || !shiftArns.every((a) => typeof a === "string" && LOAD_BALANCER_ARN.test(a))) {
    p.add(key("dns.zonalShiftResources"), "must be a list of load balancer ARNs (arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/net/<name>/<id>)");
  } else if (shiftArns.length > 0 && dns.zonalShift !== true) {
    p.add(key("dns.zonalShiftResources"), "needs llm-ha:dns.zonalShift: true (ARC shifts only NLBs with zonal shift turned on)");
  }
  const serviceName = str(dns, "serviceName", key("dns.serviceName"));
  if (serviceName && !/^([a-z0-9-]+\.)+[a-z]{2,}$/.test(serviceName)) p.add(key("dns.serviceName"), "must be a lower-case DNS name");
  else if (serviceName && RESERVED_DOMAIN.test(serviceName)) {
    p.add(key("dns.serviceName"), `${serviceName} is in a reserved example domain (RFC 2606): set the name clients will use, inside the hosted zone ${key("dns.zoneId")}`);
  }
  const zoneId = str(dns, "zoneId", key("dns.zoneId"));
  if (zoneId && !/^Z[A-Z0-9]{5,31}$/.test(zoneId)) p.add(key("dns.zoneId"), `${zoneId} is not a Route53 hosted zone id (Z…, from aws route53 list-hosted-zones)`);
  else if (zoneId && zoneId.includes("0123456789")) p.add(key("dns.zoneId"), `${zoneId} is the example placeholder: set the id of your hosted zone (aws route53 list-hosted-zones)`);

  const redis = obj("redis");
  const redisReplicas = int(redis, "replicas", key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = cfg.getSecret("redisAuthToken");
  if (authToken === undefined) p.add(key("redisAuthToken"), "is required (pulumi config set --secret redisAuthToken <16-128 chars>)");
  const rolePasswordsObj = cfg.getSecretObject<Record<string, string>>("redisRolePasswords");
  // Every role gets its user: a role left out would have no way in (pulumi config set --secret --path 'redisRolePasswords.llmha-agent' …).
  const rolePasswords = rolePasswordsObj
    ? (Object.fromEntries(ROLE_NAMES.map((r) => [r, pulumi.secret(rolePasswordsObj.apply((o) => o[r] ?? ""))])) as Record<RoleName, pulumi.Output<string>>)
    : undefined;

  const kafka = obj("kafka");
  const fallback = fallbackOf(cfg.getObject<unknown>("fallback"), cfg, model, p);

  const obs = obj("observability");
  const thresholds: Partial<AlertThresholds> = {};
  for (const k of Object.keys(DEFAULT_ALERT_THRESHOLDS) as (keyof AlertThresholds)[]) {
    if (obs[k] !== undefined) Object.assign(thresholds, { [k]: obs[k] });
  }
  for (const [k, why] of thresholdProblems({ ...DEFAULT_ALERT_THRESHOLDS, ...thresholds })) p.add(key(`observability.${k}`), why);
  const selectorLabels = obs.selectorLabels ?? {};
  if (!isObj(selectorLabels) || !Object.values(selectorLabels).every((v) => typeof v === "string")) {
    p.add(key("observability.selectorLabels"), "must be a map of strings");
  }
  const grafanaNamespace = obs.grafanaNamespace;
  if (grafanaNamespace !== undefined && (typeof grafanaNamespace !== "string" || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(grafanaNamespace))) {
    p.add(key("observability.grafanaNamespace"), "must be a Kubernetes namespace name");
  }

  let schedule: ScheduleConfig | undefined;
  const sched = cfg.getObject<unknown>("schedule");
  if (sched !== undefined) {
    if (!isObj(sched)) p.add(key("schedule"), "must be an object");
    else {
      const timeZone = str(sched, "timeZone", key("schedule.timeZone"));
      if (timeZone && !isTimeZone(timeZone)) p.add(key("schedule.timeZone"), `${timeZone} is not an IANA time zone`);
      const cron = (k: string, required: boolean): string | undefined => {
        const v = sched[k];
        if (v === undefined && !required) return undefined;
        const why = typeof v === "string" ? cronProblem(v) : "not a string";
        if (typeof v !== "string" || why !== undefined) {
          p.add(key(`schedule.${k}`), `${JSON.stringify(v)} is not a 5-field cron expression: ${why}`);
          return undefined;
        }
        return v;
      };
      schedule = { timeZone, scaleDown: cron("scaleDown", true) ?? "", scaleUp: cron("scaleUp", true) ?? "", weekendDown: cron("weekendDown", false) };
    }
    if (standbyAz === undefined) p.add(key("schedule"), "needs llm-ha:standbyAz: the schedule only ever acts on the standby AZ");
  }

  const standby = standbyOf(cfg, standbyAz, gpuClasses, schedule, p);

  const c: StackConfig = {
    clusterName: cfg.get("clusterName") ?? `llm-ha-${src.stack}`,
    region,
    azs,
    standbyAz,
    vpcCidr: str(net, "cidr", key("network.cidr"), "10.0.0.0/16"),
    natPerAz: natGateways === "perAz",
    kubernetesVersion,
    apiEndpoint: api,
    system: {
      instanceType: str(sys, "instanceType", key("systemNodes.instanceType"), "m6i.large"),
      desiredSize: int(sys, "desiredSize", key("systemNodes.desiredSize"), azs.length),
      maxSize: int(sys, "maxSize", key("systemNodes.maxSize"), azs.length * 2),
    },
    gpuClasses,
    inference: {
      image: str(inf, "image", key("inference.image"), "vllm/vllm-openai:v0.8.5"),
      model,
      gpusPerPod: isPosInt(gpusPerPod) ? gpusPerPod : undefined,
      extraArgs: Array.isArray(extraArgs) ? (extraArgs as string[]) : [],
      weightsS3Uri: typeof weightsS3Uri === "string" ? weightsS3Uri : undefined,
    },
    agentImage,
    agentImageBuild,
    hfToken,
    haproxy: { image: str(hap, "image", key("haproxy.image"), "haproxy:2.6-alpine"), replicas: int(hap, "replicas", key("haproxy.replicas"), 2) },
    dns: { zoneId, serviceName, ttl, failureThreshold, zonalShift: dns.zonalShift === true, zonalShiftResources: Array.isArray(shiftArns) ? (shiftArns as string[]) : [] },
    redis: { nodeType: str(redis, "nodeType", key("redis.nodeType"), "cache.r7g.large"), replicas: redisReplicas, authToken: authToken ?? pulumi.secret(""), rolePasswords },
    kafka: {
      version: str(kafka, "version", key("kafka.version"), "3.6.0"),
      brokersPerAz: int(kafka, "brokersPerAz", key("kafka.brokersPerAz"), 1),
      instanceType: str(kafka, "instanceType", key("kafka.instanceType"), "kafka.m7g.large"),
      volumeSizeGb: int(kafka, "volumeSizeGb", key("kafka.volumeSizeGb"), 100),
    },
    fallback,
    schedule,
    ...standby,
    addonVersions,
    observability: {
      enabled: obs.enabled !== false,
      prometheusOperator: obs.prometheusOperator === true,
      grafanaNamespace: typeof grafanaNamespace === "string" ? grafanaNamespace : undefined,
      selectorLabels: isObj(selectorLabels) ? (selectorLabels as Record<string, string>) : {},
      thresholds,
    },
  };
  if (c.system.maxSize < c.system.desiredSize) p.add(key("systemNodes.maxSize"), "must be ≥ desiredSize");
  if (c.kafka.brokersPerAz * azs.length < 3) p.add(key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  if (c.standbyAz !== undefined && c.schedule === undefined) p.add(key("schedule"), "is required when llm-ha:standbyAz is set");
  p.throwIfAny("stack configuration");
  return c;
}
