/**
 * The EC2 vCPU quotas `pulumi up` draws on: Service Quotas' value (the applied one, else AWS's
 * default) against what the stack's groups need at their maximum. The P quota covers the GPU
 * groups (`pQuotaNeeded`); the Standard quota covers every other group, which on a fresh account
 * is often short of a prod system node group at its maximum.
 */
import { DescribeInstanceTypesCommand, type EC2Client, type _InstanceType } from "@aws-sdk/client-ec2";
import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand, type ServiceQuotasClient } from "@aws-sdk/client-service-quotas";
import { systemGroupSize, type StackConfig } from "../config";
import type { CheckRow } from "./checks";

/** Service Quotas code of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (vCPUs) in EC2. */
export const STANDARD_QUOTA_CODE = "L-1216C47A";
export const STANDARD_QUOTA_NAME = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances";
export const STANDARD_QUOTA_CHECK = "Standard quota";

/**
 * Instance families (the letters before the generation digit) that count against the Standard
 * quota. Others have quotas of their own: P, G and VT, Inf, Trn, DL, HPC, X, F, Mac, high memory.
 */
const STANDARD_FAMILIES: readonly string[] = ["a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z"];

/** True when `instanceType` (`m6i.large`) counts against the Standard On-Demand quota. */
export function isStandardType(instanceType: string): boolean {
  const family = /^([a-z]+)\d/.exec(instanceType)?.[1];
  return family !== undefined && STANDARD_FAMILIES.includes(family);
}

/** A node group that is not a GPU group: what it is called, the key that sizes it, its type and maximum. */
export interface NonGpuGroup {
  name: string;
  key: string;
  instanceType: string;
  maxSize: number;
}

/**
 * The stack's node groups that are not GPU groups. Only the system group: the controllers, the
 * L1 proxies and the L4 fallback beside each of them run there; Redis and MSK are not EC2 instances.
 */
export function nonGpuGroups(c: Pick<StackConfig, "system" | "azs">): NonGpuGroup[] {
  const perAz = systemGroupSize({ desired: c.system.desiredSize, max: c.system.maxSize }, c.azs.length);
  return [{ name: `system node groups (${perAz.max} in each of ${c.azs.length} AZs)`, key: "llm-ha:systemNodes", instanceType: c.system.instanceType, maxSize: perAz.max * c.azs.length }];
}

/**
 * A quota's value in the region: the applied one, or AWS's default where nothing was ever applied
 * (Service Quotas answers NoSuchResourceException then).
 */
export async function quotaValue(quotas: ServiceQuotasClient, code: string): Promise<number> {
  try {
    const r = await quotas.send(new GetServiceQuotaCommand({ ServiceCode: "ec2", QuotaCode: code }));
    return r.Quota?.Value ?? 0;
  } catch (err) {
    if ((err as Error).name !== "NoSuchResourceException") throw err;
    const r = await quotas.send(new GetAWSDefaultServiceQuotaCommand({ ServiceCode: "ec2", QuotaCode: code }));
    return r.Quota?.Value ?? 0;
  }
}

/** The Standard On-Demand quota against the non-GPU groups' vCPUs at their maximum (EC2 gives each type's vCPUs). */
export async function standardQuotaRows(c: StackConfig, ec2: EC2Client, quotas: ServiceQuotasClient): Promise<CheckRow[]> {
  const check = STANDARD_QUOTA_CHECK;
  const groups = nonGpuGroups(c);
  const standard = groups.filter((g) => isStandardType(g.instanceType) && g.maxSize > 0);
  const rows: CheckRow[] = groups
    .filter((g) => !isStandardType(g.instanceType))
    .map((g) => ({ check: `quota ${g.name}`, status: "warn", detail: `${g.instanceType} is not a Standard (A, C, D, H, I, M, R, T, Z) type: its own family's On-Demand quota is not checked`, fix: `aws service-quotas list-service-quotas --service-code ec2 --region ${c.region} (the quota of its family)` }));
  if (standard.length === 0) return [...rows, { check, status: "ok", detail: "no group runs Standard instances", fix: "" }];

  const types = [...new Set(standard.map((g) => g.instanceType))];
  let vcpus: Map<string, number>;
  try {
    const r = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: types as _InstanceType[] }));
    vcpus = new Map((r.InstanceTypes ?? []).map((t) => [String(t.InstanceType), t.VCpuInfo?.DefaultVCpus ?? 0]));
  } catch (err) {
    if ((err as Error).name !== "InvalidInstanceType") throw err;
    vcpus = new Map();
  }
  const unknown = standard.filter((g) => !vcpus.get(g.instanceType));
  if (unknown.length) {
    return [
      ...rows,
      ...unknown.map((g) => ({
        check,
        status: "invalid" as const,
        detail: `EC2 knows no instance type ${g.instanceType} in ${c.region} (${g.key}.instanceType)`,
        fix: `set ${g.key}.instanceType to a type of aws ec2 describe-instance-types --region ${c.region} (m6i.large)`,
      })),
    ];
  }
  const need = standard.reduce((n, g) => n + vcpus.get(g.instanceType)! * g.maxSize, 0);
  const groupsText = standard.map((g) => `${g.name} ${g.maxSize} × ${g.instanceType} (${vcpus.get(g.instanceType)} vCPUs)`).join(", ");
  const have = await quotaValue(quotas, STANDARD_QUOTA_CODE);
  if (have >= need) return [...rows, { check, status: "ok", detail: `${STANDARD_QUOTA_NAME}: ${have} vCPUs ≥ ${need} needed at the maximum: ${groupsText}`, fix: "" }];
  return [
    ...rows,
    {
      check,
      status: "missing",
      detail: `${STANDARD_QUOTA_NAME}: ${have} vCPUs in ${c.region}, ${need} needed at the maximum (${groupsText}); instances already running in the account count against it too`,
      fix: `aws service-quotas request-service-quota-increase --service-code ec2 --quota-code ${STANDARD_QUOTA_CODE} --desired-value ${need} --region ${c.region}`,
    },
  ];
}
