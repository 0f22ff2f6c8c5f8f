/**
 * Where on AWS the agent runs, and the `aws` actuator's settings: the region, the zone from
 * IMDSv2 (on EC2 only), and the formats of the Auto Scaling groups, AZ ids and shift resources.
 */
import { readFileSync } from "node:fs";
import type { AgentConfig } from "./spec";
import { ConfigError } from "./error";

/** `LLMHA_AWS_REGION`, else `AWS_REGION`, else the AZ name less its letter (`us-east-1a` → `us-east-1`). */
export function resolveAwsRegion(cfg: Pick<AgentConfig, "awsRegion" | "az">, env: NodeJS.ProcessEnv): string {
  const region = cfg.awsRegion ?? (env.AWS_REGION || null) ?? (/^[a-z]{2}(-[a-z]+)+-\d+[a-z]$/.test(cfg.az) ? cfg.az.slice(0, -1) : null);
  if (!region) throw new ConfigError("LLMHA_AWS_REGION", `is required: no AWS_REGION, and LLMHA_AZ (${cfg.az}) is not an AWS zone name`);
  return region;
}

/** The `aws` formats, checked with the actuator's own parsers (loaded only when `aws` is chosen). */
export async function checkAwsFormats(cfg: AgentConfig): Promise<void> {
  const { parseStandbyGroups, parseAzIds, parseReservedGroups, checkShiftResources } = await import("../fleet/actuators/aws.js");
  const check = (variable: string, value: string | null, parse: (v: string) => unknown): void => {
    if (value === null) return;
    try {
      parse(value);
    } catch (err) {
      throw new ConfigError(variable, (err as Error).message);
    }
  };
  check("LLMHA_STANDBY_ASGS", cfg.standbyAsgs, parseStandbyGroups);
  check("LLMHA_STANDBY_FALLBACK", cfg.standbyFallback, (v) => parseStandbyGroups(v, "LLMHA_STANDBY_FALLBACK"));
  check("LLMHA_RESERVED_GROUPS", cfg.reservedGroups, parseReservedGroups);
  check("LLMHA_AZ_IDS", cfg.azIds, parseAzIds);
  check("LLMHA_SHIFT_RESOURCES", cfg.shiftResources.length ? "" : null, () => checkShiftResources(cfg.shiftResources));
  if (cfg.zonalShift && cfg.azIds) {
    const ids = parseAzIds(cfg.azIds);
    // The controller's own "AZ" is no zone (it checks no node).
    const missing = [cfg.role === "controller" ? null : cfg.az, cfg.standbyAz].filter((az): az is string => az !== null && !(az in ids));
    if (missing.length) throw new ConfigError("LLMHA_AZ_IDS", `has no AZ id for ${missing.join(", ")}`);
  }
}

/** EC2 instance placement via IMDSv2, only when the DMI data says this is EC2 (no traffic elsewhere). */
export async function imdsAvailabilityZone(timeoutMs = 1000): Promise<string | null> {
  let vendor: string;
  try {
    vendor = readFileSync("/sys/devices/virtual/dmi/id/board_vendor", "utf8") + readFileSync("/sys/devices/virtual/dmi/id/sys_vendor", "utf8");
  } catch {
    return null;
  }
  if (!/amazon/i.test(vendor)) return null;
  const base = "http://169.254.169.254";
  try {
    const tokenRes = await fetch(`${base}/latest/api/token`, {
      method: "PUT",
      headers: { "X-aws-ec2-metadata-token-ttl-seconds": "60" },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!tokenRes.ok) return null;
    const token = await tokenRes.text();
    const az = await fetch(`${base}/latest/meta-data/placement/availability-zone`, {
      headers: { "X-aws-ec2-metadata-token": token },
      signal: AbortSignal.timeout(timeoutMs),
    });
    return az.ok ? (await az.text()).trim() : null;
  } catch {
    return null;
  }
}
