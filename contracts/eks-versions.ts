/**
 * Amazon EKS Kubernetes versions and their support windows: the one table the stack's
 * default, its validation (infra/config/cluster.ts), the policy pack (`eks-version-supported`) and
 * `llm-ha preflight` read. Dates are AWS's (standard support 14 months from release, then
 * 12 months of extended support at extra cost); checked 2026-11-30, 1.36 added 2026-12-02
 * (its EKS release day from a third-party post, the two ends by AWS's 14 + 12 month rule:
 * `aws eks describe-cluster-versions` confirms them). Add a row when AWS releases a version;
 * a version older than the table or never released is refused, a newer one only warned.
 */
export interface EksVersionSupport {
  /** `1.35` */
  version: string;
  /** First day on EKS (YYYY-MM-DD). */
  released: string;
  /** Last day of standard support (YYYY-MM-DD). */
  standardUntil: string;
  /** Last day of extended support (YYYY-MM-DD); after it EKS upgrades the control plane itself. */
  extendedUntil: string;
}

export const EKS_VERSIONS: readonly EksVersionSupport[] = Object.freeze([
  { version: "1.31", released: "2024-09-26", standardUntil: "2025-11-26", extendedUntil: "2026-11-26" },
  { version: "1.32", released: "2025-01-23", standardUntil: "2026-03-23", extendedUntil: "2027-03-23" },
  { version: "1.33", released: "2025-05-29", standardUntil: "2026-07-29", extendedUntil: "2027-07-29" },
  { version: "1.34", released: "2025-10-02", standardUntil: "2026-12-02", extendedUntil: "2027-12-02" },
  { version: "1.35", released: "2026-01-28", standardUntil: "2027-03-27", extendedUntil: "2028-03-27" },
  { version: "1.36", released: "2026-06-02", standardUntil: "2027-08-02", extendedUntil: "2028-08-02" },
]);

/**
 * The version a stack gets when it sets none: 1.36, in standard support until 2027-08-02. 1.35
 * leaves standard support on 2027-03-27, after which EKS upgrades the control plane on its own
 * (upgradePolicy STANDARD) and the next `pulumi up` would try to take it back. Moving the
 * default upgrades the control plane of every stack that sets none on its next `pulumi up`
 * (its nodes and add-ons after it, the add-ons resolved for the new version): it moves on
 * purpose, with a migration note (docs/infra.md). A stack that must stay sets
 * `llm-ha:kubernetesVersion: "1.35"` until it upgrades.
 */
export const DEFAULT_EKS_VERSION = "1.36";

/** Days before a version's end of standard support from which the pack and preflight warn. */
export const EKS_SUPPORT_WARNING_DAYS = 120;

/**
 * A warning when `version` leaves standard support within `days` of `day` (both UTC
 * `YYYY-MM-DD`), naming the end and the newer versions in support; undefined otherwise (also
 * for a version the table does not know or one already out: eksVersionProblem says those).
 */
export function eksSupportEndingSoon(version: string, day: string, days = EKS_SUPPORT_WARNING_DAYS): string | undefined {
  const row = EKS_VERSIONS.find((v) => v.version === version);
  if (row === undefined || day < row.released || day > row.standardUntil) return undefined;
  const left = Math.round((Date.parse(`${row.standardUntil}T00:00:00Z`) - Date.parse(`${day}T00:00:00Z`)) / 86_400_000);
  if (left > days) return undefined;
  const newer = EKS_VERSIONS.filter((v) => v.released <= day && v.standardUntil > row.standardUntil).map((v) => v.version);
  return (
    `EKS version ${version} leaves standard support on ${row.standardUntil}, in ${left} days: then EKS upgrades the control plane itself and the next \`pulumi up\` tries to take it back` +
    `; upgrade to ${newer.join(" or ") || "a newer version once the table has one"} (llm-ha:kubernetesVersion)`
  );
}

/** `YYYY-MM-DD` of a date, in UTC. */
export function isoDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/**
 * Why `version` may not be deployed on `day` (UTC `YYYY-MM-DD`), or undefined when it is in
 * standard support (with `allowExtended`, also while in extended support).
 */
export function eksVersionProblem(version: string, day: string, allowExtended = false): string | undefined {
  const row = EKS_VERSIONS.find((v) => v.version === version);
  const known = EKS_VERSIONS.map((v) => v.version).join(", ");
  if (row === undefined) return `EKS version ${JSON.stringify(version)} is not in the support table (contracts/eks-versions.ts; known: ${known})`;
  if (day < row.released) return `EKS version ${version} is not released until ${row.released}`;
  if (day <= row.standardUntil) return undefined;
  if (allowExtended && day <= row.extendedUntil) return undefined;
  const supported = EKS_VERSIONS.filter((v) => v.released <= day && day <= v.standardUntil).map((v) => v.version);
  return (
    `EKS version ${version} left standard support on ${row.standardUntil}` +
    (day <= row.extendedUntil ? ` (extended support, at extra cost, until ${row.extendedUntil})` : ` and extended support on ${row.extendedUntil}`) +
    `; in standard support on ${day}: ${supported.join(", ") || "none in the table"}`
  );
}
