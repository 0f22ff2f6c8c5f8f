/**
 * What `LLMHA_ACTUATOR=aws` reads, checked: the standby AZ's groups and their wake sizes
 * (`LLMHA_STANDBY_ASGS`), AZ name → AZ id (`LLMHA_AZ_IDS`) and the load balancers to shift
 * (`LLMHA_SHIFT_RESOURCES`). `loadConfig` runs these same parsers at startup, so a bad
 * value stops the agent there rather than failing the first action.
 */
import { LOAD_BALANCER_ARN } from "../../../../../contracts/arn";

export interface StandbyGroup {
  /** Auto Scaling group name (an EKS managed node group's ASG). */
  name: string;
  /** Nodes to run while woken: min and desired are raised to it, max at least to it. */
  wakeSize: number;
}

/** A malformed `aws` setting; `variable` names it (`LLMHA_STANDBY_ASGS`…). */
export class ActuatorSettingError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = "ActuatorSettingError";
  }
}

const ASG_NAME = /^[^,=\s][^,=]{0,254}$/;
const AZ_NAME = /^[a-z]{2}(-[a-z]+)+-\d+[a-z]$/;
const AZ_ID = /^[a-z]{2,}\d*-az\d+$/;

function entries(variable: string, value: string, what: string): [string, string][] {
  const parts = value.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (parts.length === 0) throw new ActuatorSettingError(variable, `is empty; expected ${what}`);
  return parts.map((p) => {
    const i = p.indexOf("=");
    if (i <= 0 || i === p.length - 1) throw new ActuatorSettingError(variable, `entry ${JSON.stringify(p)} is not ${what}`);
    return [p.slice(0, i).trim(), p.slice(i + 1).trim()];
  });
}

/** `LLMHA_STANDBY_ASGS`: `asg-name=wakeSize[,…]`, wake sizes ≥ 1, no group twice. */
export function parseStandbyGroups(value: string, variable = "LLMHA_STANDBY_ASGS"): StandbyGroup[] {
  const seen = new Set<string>();
  return entries(variable, value, "asg-name=wakeSize").map(([name, size]) => {
    if (!ASG_NAME.test(name)) throw new ActuatorSettingError(variable, `${JSON.stringify(name)} is not an Auto Scaling group name`);
    if (!/^\d+$/.test(size) || Number(size) < 1 || Number(size) > 10_000) {
      throw new ActuatorSettingError(variable, `wake size of ${name} must be an integer from 1 to 10000, got ${JSON.stringify(size)}`);
    }
    if (seen.has(name)) throw new ActuatorSettingError(variable, `lists ${name} twice`);
    seen.add(name);
    return { name, wakeSize: Number(size) };
  });
}

/** `LLMHA_AZ_IDS`: `us-east-1a=use1-az1[,…]` (AZ names differ per account; ARC wants the id). */
export function parseAzIds(value: string, variable = "LLMHA_AZ_IDS"): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [az, id] of entries(variable, value, "az-name=az-id")) {
    if (!AZ_NAME.test(az)) throw new ActuatorSettingError(variable, `${JSON.stringify(az)} is not an availability zone name like us-east-1a`);
    if (!AZ_ID.test(id)) throw new ActuatorSettingError(variable, `${JSON.stringify(id)} (for ${az}) is not an AZ id like use1-az1`);
    if (az in out) throw new ActuatorSettingError(variable, `lists ${az} twice`);
    out[az] = id;
  }
  return out;
}

/** `LLMHA_SHIFT_RESOURCES` entries must be load balancer ARNs (ARC shifts ALBs and NLBs). */
export function checkShiftResources(arns: readonly string[], variable = "LLMHA_SHIFT_RESOURCES"): void {
  for (const a of arns) {
    if (!LOAD_BALANCER_ARN.test(a)) throw new ActuatorSettingError(variable, `${JSON.stringify(a)} is not a load balancer ARN (arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/net/<name>/<id>)`);
  }
}

/**
 * A GPU group on a capacity reservation or Capacity Block that `pulumi up` created at zero
 * (EC2 refuses a group's creation at a size the reservation cannot hold yet): the leader sizes
 * it once the reservation is active (aws/reserved.ts).
 */
export interface ReservedGroup {
  /** Auto Scaling group name (the EKS managed node group's ASG). */
  name: string;
  /** The reservation its launch template targets (`cr-…`). */
  reservationId: string;
  /** The size the stack wants for it (`gpuClasses[].desiredPerAz`). */
  size: number;
}

const RESERVATION_ID = /^cr-[0-9a-f]{8,17}$/;

/** `LLMHA_RESERVED_GROUPS`: `asg-name=cr-id:size[,…]`, sizes ≥ 1, no group twice. */
export function parseReservedGroups(value: string, variable = "LLMHA_RESERVED_GROUPS"): ReservedGroup[] {
  const seen = new Set<string>();
  return entries(variable, value, "asg-name=cr-id:size").map(([name, rest]) => {
    if (!ASG_NAME.test(name)) throw new ActuatorSettingError(variable, `${JSON.stringify(name)} is not an Auto Scaling group name`);
    const m = /^(cr-[0-9a-z]+):(\d+)$/.exec(rest);
    if (!m) throw new ActuatorSettingError(variable, `entry for ${name} must be cr-id:size, got ${JSON.stringify(rest)}`);
    if (!RESERVATION_ID.test(m[1])) throw new ActuatorSettingError(variable, `${JSON.stringify(m[1])} (for ${name}) is not a capacity reservation id like cr-0123456789abcdef0`);
    const size = Number(m[2]);
    if (size < 1 || size > 10_000) throw new ActuatorSettingError(variable, `size of ${name} must be an integer from 1 to 10000, got ${m[2]}`);
    if (seen.has(name)) throw new ActuatorSettingError(variable, `lists ${name} twice`);
    seen.add(name);
    return { name, reservationId: m[1], size };
  });
}
