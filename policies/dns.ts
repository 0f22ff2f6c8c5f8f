// Route53 failover: the L3 zone tier. The 60 s budget is interval 10 s × threshold ≤ 2
// plus TTL ≤ 30 s; anything slower, or a PRIMARY with nowhere to fail to, misses it.
import * as aws from "@pulumi/aws";
import {
  validateResourceOfType,
  type ResourceValidationPolicy,
  type StackValidationPolicy,
} from "@pulumi/policy";
import { list, num, record, str, type Props } from "./props";

const RECORD_TYPE = "aws:route53/record:Record";

function failoverType(props: Props): string | undefined {
  return str(record(list(props.failoverRoutingPolicies)[0])?.type);
}

function recordKey(props: Props): string {
  return `${str(props.zoneId) ?? ""}|${str(props.name) ?? ""}|${str(props.type) ?? ""}`;
}

export const failoverRecordPairs: StackValidationPolicy = {
  name: "failover-record-pairs",
  description:
    "Every PRIMARY failover record has a SECONDARY record with the same zone, name and type, and a health check (L3 zone tier: Route53 needs a health check to notice a dead AZ and a secondary to send its traffic to).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const records = args.resources.filter((r) => r.type === RECORD_TYPE);
    const secondaries = new Set(
      records.map((r) => r.props as Props).filter((p) => failoverType(p) === "SECONDARY").map(recordKey),
    );
    for (const r of records) {
      const p = r.props as Props;
      if (failoverType(p) !== "PRIMARY") continue;
      const label = `${str(p.name) ?? r.name} ${str(p.type) ?? ""}`.trim();
      if (!secondaries.has(recordKey(p))) {
        reportViolation(`PRIMARY failover record ${label} (${r.name}) has no SECONDARY record with the same name and type.`, r.urn);
      }
      if (!str(p.healthCheckId)) {
        reportViolation(`PRIMARY failover record ${label} (${r.name}) has no healthCheckId.`, r.urn);
      }
    }
  },
};

export interface HealthCheckConfig {
  requestInterval: number;
  maxFailureThreshold: number;
  resourcePath: string;
}

const HTTP_TYPES = ["HTTP", "HTTPS", "HTTP_STR_MATCH", "HTTPS_STR_MATCH"];

export const route53HealthCheckFast: ResourceValidationPolicy = {
  name: "route53-health-check-fast",
  description:
    "Route53 health checks probe /az/health over HTTP(S) every 10 s with a failure threshold of at most 2 (L3 zone tier: a dead AZ is detected within 20 s of the 60 s budget).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      requestInterval: { type: "integer", enum: [10, 30], default: 10, description: "Required request interval (s)." },
      maxFailureThreshold: { type: "integer", minimum: 1, maximum: 10, default: 2, description: "Largest failure threshold." },
      resourcePath: { type: "string", default: "/az/health", description: "Path the checkers must probe." },
    },
  },
  validateResource: validateResourceOfType(aws.route53.HealthCheck, (hc, args, reportViolation) => {
    const cfg = args.getConfig<HealthCheckConfig>();
    const type = str(hc.type);
    // Calculated and CloudWatch checks have no interval or path; they inherit their children's speed.
    if (type !== undefined && !HTTP_TYPES.includes(type)) args.notApplicable(`health check type ${type} has no HTTP probe`);
    const interval = num(hc.requestInterval);
    if (interval !== cfg.requestInterval) {
      reportViolation(`Health check ${args.name} has requestInterval ${interval ?? "unset (30)"}; it must be ${cfg.requestInterval}.`);
    }
    const threshold = num(hc.failureThreshold);
    if (threshold === undefined || threshold > cfg.maxFailureThreshold) {
      reportViolation(`Health check ${args.name} has failureThreshold ${threshold ?? "unset (3)"}; it must be at most ${cfg.maxFailureThreshold}.`);
    }
    if (str(hc.resourcePath) !== cfg.resourcePath) {
      reportViolation(`Health check ${args.name} probes ${str(hc.resourcePath) ?? "/"}; it must probe ${cfg.resourcePath}.`);
    }
    if (type === undefined) reportViolation(`Health check ${args.name} has no type; it must be HTTP or HTTPS.`);
  }),
};

export interface FailoverTtlConfig {
  maxTtl: number;
}

export const failoverRecordTtl: ResourceValidationPolicy = {
  name: "failover-record-ttl",
  description:
    "Failover and weighted records have a TTL of at most 30 s (L3 zone tier: resolvers drop a dead AZ's answer within the 60 s budget). Alias records cannot set a TTL and are refused: Route53 answers them with the target's TTL (60 s for a load balancer).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      maxTtl: { type: "integer", minimum: 0, default: 30, description: "Largest TTL (s) of a failover record." },
    },
  },
  validateResource: validateResourceOfType(aws.route53.Record, (rec, args, reportViolation) => {
    const kind = list(rec.failoverRoutingPolicies).length > 0 ? "Failover" : list(rec.weightedRoutingPolicies).length > 0 ? "Weighted" : undefined;
    if (!kind) return;
    const { maxTtl } = args.getConfig<FailoverTtlConfig>();
    const ttl = num(rec.ttl);
    if (ttl === undefined) {
      reportViolation(`${kind} record ${args.name} has no ttl (an alias record answers with its target's TTL); set ttl to at most ${maxTtl}.`);
    } else if (ttl > maxTtl) {
      reportViolation(`${kind} record ${args.name} has ttl ${ttl}; it must be at most ${maxTtl}.`);
    }
  }),
};
