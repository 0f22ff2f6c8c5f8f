import * as pulumi from "@pulumi/pulumi";
import { cronProblem } from "../contracts/cron";
import { DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "./observability/thresholds";
import { LOAD_BALANCER_ARN } from "../contracts/arn";
import { Problems } from "./problems";

/** GPU classes llm-ha knows, with the instance type and GPU count of each. */
export const GPU_CLASSES = Object.freeze({
  a100: { instanceType: "p4d.24xlarge", gpus: 8 },
  h100: { instanceType: "p5.48xlarge", gpus: 8 },
});
export type GpuClassName = keyof typeof GPU_CLASSES;

/** One GPU class deployed in every AZ. */
export interface GpuClassConfig {
  name: GpuClassName;
  /** EC2 instance type; defaults to the class's (`p4d.24xlarge`, `p5.48xlarge`). */
  instanceType: string;
  /** GPUs per node; defaults to the class's (8). */
  gpusPerNode: number;
  /** Nodes per AZ while active. */
  desiredPerAz: number;
  /** Upper bound per AZ (also the HAProxy server slots for the AZ). */
  maxPerAz: number;
  /** On-demand capacity reservation to launch into (p5 usually needs one). */
  capacityReservationId?: string;
  /** Attach an EFA interface (multi-node NCCL); off by default. */
  efa: boolean;
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
  privateEndpointOnly: boolean;
  system: { instanceType: string; desiredSize: number; maxSize: number };
  gpuClasses: GpuClassConfig[];
  inference: { image: string; model: string; gpusPerPod?: number; extraArgs: string[] };
  agentImage: string;
  haproxy: { image: string; replicas: number };
  /** `zonalShiftResources`: ARNs of the L1 NLBs the agent may zonal-shift (made by the load balancer controller, so not outputs). */
  dns: { zoneId: string; serviceName: string; ttl: number; failureThreshold: number; zonalShift: boolean; zonalShiftResources: string[] };
  redis: { nodeType: string; replicas: number; authToken: pulumi.Output<string> };
  kafka: { version: string; brokersPerAz: number; instanceType: string; volumeSizeGb: number };
  schedule?: ScheduleConfig;
  observability: ObservabilityConfig;
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
      const cr = g.capacityReservationId;
      if (cr !== undefined && (typeof cr !== "string" || !/^cr-[0-9a-f]+$/.test(cr))) p.add(`${path}.capacityReservationId`, "must look like cr-0123abcd");
      gpuClasses.push({
        name: name as GpuClassName,
        instanceType: str(g, "instanceType", `${path}.instanceType`, known.instanceType),
        gpusPerNode: int(g, "gpusPerNode", `${path}.gpusPerNode`, known.gpus),
        desiredPerAz,
        maxPerAz,
        capacityReservationId: typeof cr === "string" ? cr : undefined,
        efa: g.efa === true,
      });
    });
  }

  const inf = obj("inference");
  const gpusPerPod = inf.gpusPerPod;
  if (gpusPerPod !== undefined && !isPosInt(gpusPerPod)) p.add(key("inference.gpusPerPod"), "must be a positive integer");
  const extraArgs = inf.extraArgs ?? [];
  if (!Array.isArray(extraArgs) || !extraArgs.every((a) => typeof a === "string")) p.add(key("inference.extraArgs"), "must be a list of strings");

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

  const redis = obj("redis");
  const redisReplicas = int(redis, "replicas", key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = cfg.getSecret("redisAuthToken");
  if (authToken === undefined) p.add(key("redisAuthToken"), "is required (pulumi config set --secret redisAuthToken <16-128 chars>)");

  const kafka = obj("kafka");

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

  const c: StackConfig = {
    clusterName: cfg.get("clusterName") ?? `llm-ha-${src.stack}`,
    region,
    azs,
    standbyAz,
    vpcCidr: str(net, "cidr", key("network.cidr"), "10.0.0.0/16"),
    natPerAz: natGateways === "perAz",
    kubernetesVersion: cfg.get("kubernetesVersion") ?? "1.31",
    privateEndpointOnly: cfg.getBoolean("privateEndpointOnly") ?? false,
    system: {
      instanceType: str(sys, "instanceType", key("systemNodes.instanceType"), "m6i.large"),
      desiredSize: int(sys, "desiredSize", key("systemNodes.desiredSize"), azs.length),
      maxSize: int(sys, "maxSize", key("systemNodes.maxSize"), azs.length * 2),
    },
    gpuClasses,
    inference: {
      image: str(inf, "image", key("inference.image"), "vllm/vllm-openai:v0.8.5"),
      model: str(inf, "model", key("inference.model")),
      gpusPerPod: isPosInt(gpusPerPod) ? gpusPerPod : undefined,
      extraArgs: Array.isArray(extraArgs) ? (extraArgs as string[]) : [],
    },
    agentImage: cfg.get("agentImage") ?? "",
    haproxy: { image: str(hap, "image", key("haproxy.image"), "haproxy:2.6-alpine"), replicas: int(hap, "replicas", key("haproxy.replicas"), 2) },
    dns: { zoneId: str(dns, "zoneId", key("dns.zoneId")), serviceName, ttl, failureThreshold, zonalShift: dns.zonalShift === true, zonalShiftResources: Array.isArray(shiftArns) ? (shiftArns as string[]) : [] },
    redis: { nodeType: str(redis, "nodeType", key("redis.nodeType"), "cache.r7g.large"), replicas: redisReplicas, authToken: authToken ?? pulumi.secret("") },
    kafka: {
      version: str(kafka, "version", key("kafka.version"), "3.6.0"),
      brokersPerAz: int(kafka, "brokersPerAz", key("kafka.brokersPerAz"), 1),
      instanceType: str(kafka, "instanceType", key("kafka.instanceType"), "kafka.m7g.large"),
      volumeSizeGb: int(kafka, "volumeSizeGb", key("kafka.volumeSizeGb"), 100),
    },
    schedule,
    observability: {
      enabled: obs.enabled !== false,
      prometheusOperator: obs.prometheusOperator === true,
      grafanaNamespace: typeof grafanaNamespace === "string" ? grafanaNamespace : undefined,
      selectorLabels: isObj(selectorLabels) ? (selectorLabels as Record<string, string>) : {},
      thresholds,
    },
  };
  if (!c.agentImage) p.add(key("agentImage"), "is required (the image built from agent/Dockerfile)");
  if (c.system.maxSize < c.system.desiredSize) p.add(key("systemNodes.maxSize"), "must be ≥ desiredSize");
  if (c.kafka.brokersPerAz * azs.length < 3) p.add(key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  if (c.standbyAz !== undefined && c.schedule === undefined) p.add(key("schedule"), "is required when llm-ha:standbyAz is set");
  p.throwIfAny("stack configuration");
  return c;
}
