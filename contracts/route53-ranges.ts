/**
 * The addresses Route53's health checkers probe from (`ROUTE53_HEALTHCHECKS` in AWS's
 * ip-ranges.json), as a snapshot committed with its `syncToken` and `createDate`: the stack
 * opens the L1 NLBs' `/az/health` listener (:8081) to them alone, and the policy
 * `az-health-from-route53-only` refuses any other source there. Open to the world, anyone
 * could hold idle connections on that listener until the checkers time out and a healthy AZ
 * fails over. `llm-ha preflight --online` compares the snapshot with the live file.
 */
import snapshot from "./route53-healthcheck-ranges.json";

/** Where AWS publishes its ranges. */
export const IP_RANGES_URL = "https://ip-ranges.amazonaws.com/ip-ranges.json";
export const HEALTHCHECK_SERVICE = "ROUTE53_HEALTHCHECKS";

/**
 * The regions a Route53 health check may probe from (the `regions` of `aws.route53.HealthCheck`;
 * all of them when it names none, as the stack's do). Prefixes of region `GLOBAL` serve every one.
 */
export const CHECKER_REGIONS: readonly string[] = Object.freeze(["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "sa-east-1"]);

export interface HealthCheckRanges {
  syncToken: string;
  createDate: string;
  prefixes: { ip_prefix: string; region: string }[];
  ipv6_prefixes: { ipv6_prefix: string; region: string }[];
}

/** The committed snapshot (contracts/route53-healthcheck-ranges.json). */
export const ROUTE53_HEALTHCHECK_SNAPSHOT: HealthCheckRanges = snapshot;

/** The command that rewrites the snapshot from the live file (needs network). */
export const REFRESH_COMMAND = "npx tsx infra/preflight/route53-ranges.ts --write";

/**
 * The checkers' IPv4 and IPv6 blocks for `regions` (default: every checker region), the
 * `GLOBAL` ones included, sorted: what the NLBs' :8081 rules admit.
 */
export function checkerCidrs(ranges: HealthCheckRanges = ROUTE53_HEALTHCHECK_SNAPSHOT, regions: readonly string[] = CHECKER_REGIONS): { ipv4: string[]; ipv6: string[] } {
  const wanted = new Set([...regions, "GLOBAL"]);
  return {
    ipv4: [...new Set(ranges.prefixes.filter((p) => wanted.has(p.region)).map((p) => p.ip_prefix))].sort(),
    ipv6: [...new Set(ranges.ipv6_prefixes.filter((p) => wanted.has(p.region)).map((p) => p.ipv6_prefix))].sort(),
  };
}

/** The `ROUTE53_HEALTHCHECKS` entries of a whole ip-ranges.json document, in the snapshot's shape. Throws on a document that is not one. */
export function healthCheckRangesOf(doc: unknown): HealthCheckRanges {
  const d = doc as { syncToken?: unknown; createDate?: unknown; prefixes?: unknown; ipv6_prefixes?: unknown };
  if (typeof d !== "object" || d === null || typeof d.syncToken !== "string" || typeof d.createDate !== "string" || !Array.isArray(d.prefixes) || !Array.isArray(d.ipv6_prefixes)) {
    throw new Error("not an ip-ranges.json document (syncToken, createDate, prefixes, ipv6_prefixes)");
  }
  type P = { service?: unknown; region?: unknown; ip_prefix?: unknown; ipv6_prefix?: unknown };
  const ours = (p: P) => p.service === HEALTHCHECK_SERVICE && typeof p.region === "string";
  return {
    syncToken: d.syncToken,
    createDate: d.createDate,
    prefixes: (d.prefixes as P[]).filter((p) => ours(p) && typeof p.ip_prefix === "string").map((p) => ({ ip_prefix: p.ip_prefix as string, region: p.region as string })),
    ipv6_prefixes: (d.ipv6_prefixes as P[]).filter((p) => ours(p) && typeof p.ipv6_prefix === "string").map((p) => ({ ipv6_prefix: p.ipv6_prefix as string, region: p.region as string })),
  };
}

/** What the live ranges add to and remove from the snapshot's, for the checker regions. */
export function rangesDrift(live: HealthCheckRanges, committed: HealthCheckRanges = ROUTE53_HEALTHCHECK_SNAPSHOT): { added: string[]; removed: string[] } {
  const flat = (r: HealthCheckRanges) => {
    const c = checkerCidrs(r);
    return new Set([...c.ipv4, ...c.ipv6]);
  };
  const now = flat(live);
  const then = flat(committed);
  return { added: [...now].filter((c) => !then.has(c)).sort(), removed: [...then].filter((c) => !now.has(c)).sort() };
}
