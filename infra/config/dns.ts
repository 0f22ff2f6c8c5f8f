import type { Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** RFC 2606 / 6761 names nobody can own: a stack file still carrying one was never filled in. */
const RESERVED_DOMAIN = /(^|\.)(example\.(com|net|org)|example|test|invalid|localhost)$/;

/**
 * `llm-ha:dns`: the Route53 name clients use and its failover timing. The keys of the ARC
 * zonal shift the stack once carried are refused: each L1 NLB lives in one AZ's subnet, and
 * ARC does not shift a load balancer that sits in a single AZ, so the shift moved nothing; a
 * lost AZ leaves DNS through its own health check (infra/dns.ts) instead.
 */
export function dnsOf(s: Settings): StackConfig["dns"] {
  const { p, key } = s;
  const dns = s.obj("dns");
  const ttl = s.int(dns, "ttl", key("dns.ttl"), 30);
  if (ttl > 30) p.add(key("dns.ttl"), `${ttl} s is over 30 s: DNS failover would miss the 60 s zone target`);
  const failureThreshold = s.int(dns, "failureThreshold", key("dns.failureThreshold"), 2);
  if (failureThreshold > 2) p.add(key("dns.failureThreshold"), `${failureThreshold} is over 2: 10 s × threshold + TTL must stay ≤ 60 s`);
  for (const k of ["zonalShift", "zonalShiftResources"]) {
    if (dns[k] !== undefined) {
      p.add(
        key(`dns.${k}`),
        "is no longer a setting: each AZ's NLB sits in that AZ alone, and ARC zonal shift ignores a single-AZ load balancer, so it shifted nothing. A lost AZ leaves DNS by its own health check on the weighted records (docs/infra.md, L3). Remove the key (pulumi config rm --path llm-ha:dns." + k + ")",
      );
    }
  }
  const serviceName = s.str(dns, "serviceName", key("dns.serviceName"));
  if (serviceName && !/^([a-z0-9-]+\.)+[a-z]{2,}$/.test(serviceName)) p.add(key("dns.serviceName"), "must be a lower-case DNS name");
  else if (serviceName && RESERVED_DOMAIN.test(serviceName)) {
    p.add(key("dns.serviceName"), `${serviceName} is in a reserved example domain (RFC 2606): set the name clients will use, inside the hosted zone ${key("dns.zoneId")}`);
  }
  const zoneId = s.str(dns, "zoneId", key("dns.zoneId"));
  if (zoneId && !/^Z[A-Z0-9]{5,31}$/.test(zoneId)) p.add(key("dns.zoneId"), `${zoneId} is not a Route53 hosted zone id (Z…, from aws route53 list-hosted-zones)`);
  else if (zoneId && zoneId.includes("0123456789")) p.add(key("dns.zoneId"), `${zoneId} is the example placeholder: set the id of your hosted zone (aws route53 list-hosted-zones)`);
  return { zoneId, serviceName, ttl, failureThreshold };
}
