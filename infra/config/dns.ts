import { LOAD_BALANCER_ARN } from "../../contracts/arn";
import type { Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** RFC 2606 / 6761 names nobody can own: a stack file still carrying one was never filled in. */
const RESERVED_DOMAIN = /(^|\.)(example\.(com|net|org)|example|test|invalid|localhost)$/;

/** `llm-ha:dns`: the Route53 name clients use, its failover timing and ARC zonal shift. */
export function dnsOf(s: Settings): StackConfig["dns"] {
  const { p, key } = s;
  const dns = s.obj("dns");
  const ttl = s.int(dns, "ttl", key("dns.ttl"), 30);
  if (ttl > 30) p.add(key("dns.ttl"), `${ttl} s is over 30 s: DNS failover would miss the 60 s zone target`);
  const failureThreshold = s.int(dns, "failureThreshold", key("dns.failureThreshold"), 2);
  if (failureThreshold > 2) p.add(key("dns.failureThreshold"), `${failureThreshold} is over 2: 10 s × threshold + TTL must stay ≤ 60 s`);
  const shiftArns = dns.zonalShiftResources ?? [];
  if (!Array.isArray(shiftArns) || !shiftArns.every((a) => typeof a === "string" && LOAD_BALANCER_ARN.test(a))) {
    p.add(key("dns.zonalShiftResources"), "must be a list of load balancer ARNs (arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/net/<name>/<id>)");
  } else if (shiftArns.length > 0 && dns.zonalShift !== true) {
    p.add(key("dns.zonalShiftResources"), "needs llm-ha:dns.zonalShift: true (ARC shifts only NLBs with zonal shift turned on)");
  }
  const serviceName = s.str(dns, "serviceName", key("dns.serviceName"));
  if (serviceName && !/^([a-z0-9-]+\.)+[a-z]{2,}$/.test(serviceName)) p.add(key("dns.serviceName"), "must be a lower-case DNS name");
  else if (serviceName && RESERVED_DOMAIN.test(serviceName)) {
    p.add(key("dns.serviceName"), `${serviceName} is in a reserved example domain (RFC 2606): set the name clients will use, inside the hosted zone ${key("dns.zoneId")}`);
  }
  const zoneId = s.str(dns, "zoneId", key("dns.zoneId"));
  if (zoneId && !/^Z[A-Z0-9]{5,31}$/.test(zoneId)) p.add(key("dns.zoneId"), `${zoneId} is not a Route53 hosted zone id (Z…, from aws route53 list-hosted-zones)`);
  else if (zoneId && zoneId.includes("0123456789")) p.add(key("dns.zoneId"), `${zoneId} is the example placeholder: set the id of your hosted zone (aws route53 list-hosted-zones)`);
  return { zoneId, serviceName, ttl, failureThreshold, zonalShift: dns.zonalShift === true, zonalShiftResources: Array.isArray(shiftArns) ? (shiftArns as string[]) : [] };
}
