// Route53 pieces of the policy fixtures: failover and weighted records, the old pair layout, health checks.
import type { CapturedResource } from "../../policies/runner";
import { res, TAGS } from "./fixture-base";

/** One half of the failover pair the happy stack still carries beside its weighted records. */
export function failoverRecord(az: string, failover: "PRIMARY" | "SECONDARY"): CapturedResource {
  return res("aws:route53/record:Record", `api-${az}-${failover.toLowerCase()}`, {
    zoneId: "Z123",
    name: `${az}.api.example.com`,
    type: "CNAME",
    ttl: 30,
    records: [`nlb-${az}.elb.amazonaws.com`],
    setIdentifier: `${az}-${failover.toLowerCase()}`,
    failoverRoutingPolicies: [{ type: failover }],
    healthCheckId: `hc-${failover === "PRIMARY" ? "us-east-1a" : "us-east-1b"}-id`,
  });
}

/** The service name's weighted record of one AZ: its NLB, its capacity, its own health check. */
export function weightedRecord(az: string, weight = 48): CapturedResource {
  return res("aws:route53/record:Record", `api-${az}-weighted`, {
    zoneId: "Z123",
    name: "api.example.com",
    type: "CNAME",
    ttl: 30,
    records: [`nlb-${az}.elb.amazonaws.com`],
    setIdentifier: az,
    weightedRoutingPolicies: [{ weight }],
    healthCheckId: `hc-${az}-id`,
  });
}

/**
 * The layout the stack had before weighted records (for regressions): per AZ a failover pair
 * `<az>.api.example.com` (own NLB, else the next AZ's), and the service name as equal weighted
 * aliases of those pairs.
 */
export function failoverPairLayout(azs: string[]): CapturedResource[] {
  return azs.flatMap((az, i) => {
    const next = azs[(i + 1) % azs.length];
    const pair = (["PRIMARY", "SECONDARY"] as const).map((role) => {
      const to = role === "PRIMARY" ? az : next;
      return res("aws:route53/record:Record", `pair-${az}-${role.toLowerCase()}`, {
        zoneId: "Z123",
        name: `${az}.api.example.com`,
        type: "CNAME",
        ttl: 30,
        records: [`nlb-${to}.elb.amazonaws.com`],
        setIdentifier: `${az}-${role.toLowerCase()}`,
        failoverRoutingPolicies: [{ type: role }],
        healthCheckId: `hc-${to}-id`,
      });
    });
    const alias = res("aws:route53/record:Record", `pair-${az}-weighted`, {
      zoneId: "Z123",
      name: "api.example.com",
      type: "CNAME",
      setIdentifier: az,
      weightedRoutingPolicies: [{ weight: 100 }],
      aliases: [{ name: `${az}.api.example.com`, zoneId: "Z123", evaluateTargetHealth: true }],
    });
    return [...pair, alias];
  });
}

/** An AZ's Route53 health check on `/az/health` through its NLB. */
export function healthCheck(az: string): CapturedResource {
  return res("aws:route53/healthCheck:HealthCheck", `hc-${az}`, {
    type: "HTTPS",
    fqdn: `nlb-${az}.elb.amazonaws.com`,
    port: 443,
    resourcePath: "/az/health",
    requestInterval: 10,
    failureThreshold: 2,
    tags: TAGS,
  });
}
