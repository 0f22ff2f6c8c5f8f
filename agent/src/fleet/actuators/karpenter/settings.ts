/**
 * What `LLMHA_CAPACITY_ENGINE=karpenter` reads, checked: the standby AZ's NodePools and the GPUs
 * each may hold while woken (`LLMHA_STANDBY_NODEPOOLS`), the placeholder Deployment whose pending
 * pods make Karpenter provision (`LLMHA_STANDBY_PLACEHOLDER`), and the park/wake schedule the
 * leader runs itself (`LLMHA_STANDBY_SCHEDULE`: Karpenter has no scheduled scaling). `loadConfig`
 * runs these same parsers at start-up, so a bad value stops the agent there.
 */
import { cronProblem } from "../../../../../contracts/cron";
import { ActuatorSettingError } from "../aws/settings";

export interface StandbyNodePool {
  /** NodePool name (`llm-ha-<az>-<gpuClass>` as infra names them). */
  name: string;
  /** Its `spec.limits["nvidia.com/gpu"]` while woken (asleep: `"0"`). */
  gpus: number;
}

export interface StandbyPlaceholder {
  namespace: string;
  deployment: string;
  /** Replicas while woken (asleep: 0). */
  replicas: number;
}

/** The leader's park and wake crons for this engine (5 fields each). */
export interface StandbyScheduleSpec {
  scaleDown: string;
  scaleUp: string;
  weekendDown?: string;
}

/** A Kubernetes object name (DNS subdomain, as NodePools and Deployments are named). */
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** `LLMHA_STANDBY_NODEPOOLS`: `nodepool=gpus[,…]` in fallback order, gpus ≥ 1, no pool twice. */
export function parseStandbyNodePools(value: string, variable = "LLMHA_STANDBY_NODEPOOLS"): StandbyNodePool[] {
  const parts = value.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (parts.length === 0) throw new ActuatorSettingError(variable, "is empty; expected nodepool=gpus,…");
  const seen = new Set<string>();
  return parts.map((p) => {
    const i = p.indexOf("=");
    if (i <= 0 || i === p.length - 1) throw new ActuatorSettingError(variable, `entry ${JSON.stringify(p)} is not nodepool=gpus`);
    const name = p.slice(0, i).trim();
    const gpus = p.slice(i + 1).trim();
    if (!NAME.test(name)) throw new ActuatorSettingError(variable, `${JSON.stringify(name)} is not a NodePool name (lower-case letters, digits, '-' and '.')`);
    if (!/^\d+$/.test(gpus) || Number(gpus) < 1 || Number(gpus) > 100_000) {
      throw new ActuatorSettingError(variable, `GPU limit of ${name} must be an integer from 1 to 100000, got ${JSON.stringify(gpus)}`);
    }
    if (seen.has(name)) throw new ActuatorSettingError(variable, `lists ${name} twice`);
    seen.add(name);
    return { name, gpus: Number(gpus) };
  });
}

/** `LLMHA_STANDBY_PLACEHOLDER`: `namespace/deployment=replicas`, replicas ≥ 1. */
export function parseStandbyPlaceholder(value: string, variable = "LLMHA_STANDBY_PLACEHOLDER"): StandbyPlaceholder {
  const m = /^\s*([^/=\s]+)\/([^/=\s]+)=(\S+)\s*$/.exec(value);
  if (!m) throw new ActuatorSettingError(variable, `${JSON.stringify(value)} is not namespace/deployment=replicas`);
  const [, namespace, deployment, replicas] = m;
  if (!NAMESPACE.test(namespace)) throw new ActuatorSettingError(variable, `${JSON.stringify(namespace)} is not a namespace name`);
  if (!NAME.test(deployment)) throw new ActuatorSettingError(variable, `${JSON.stringify(deployment)} is not a Deployment name`);
  if (!/^\d+$/.test(replicas) || Number(replicas) < 1 || Number(replicas) > 10_000) {
    throw new ActuatorSettingError(variable, `replicas of ${namespace}/${deployment} must be an integer from 1 to 10000, got ${JSON.stringify(replicas)}`);
  }
  return { namespace, deployment, replicas: Number(replicas) };
}

/** `LLMHA_STANDBY_SCHEDULE`: `scaleDown;scaleUp[;weekendDown]`, each a 5-field cron. */
export function parseStandbySchedule(value: string, variable = "LLMHA_STANDBY_SCHEDULE"): StandbyScheduleSpec {
  const parts = value.split(";").map((s) => s.trim());
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => p === "")) {
    throw new ActuatorSettingError(variable, `${JSON.stringify(value)} is not scaleDown;scaleUp[;weekendDown] (5-field crons separated by ';')`);
  }
  const names = ["scaleDown", "scaleUp", "weekendDown"];
  parts.forEach((p, i) => {
    const problem = cronProblem(p);
    if (problem) throw new ActuatorSettingError(variable, `${names[i]} ${JSON.stringify(p)}: ${problem}`);
  });
  return { scaleDown: parts[0], scaleUp: parts[1], ...(parts[2] ? { weekendDown: parts[2] } : {}) };
}
