import { describe, expect, it } from "vitest";
import { failoverRecordPairs, failoverRecordTtl, route53HealthCheckFast } from "../../policies/dns";
import { changed, happyStack, messages } from "./fixtures";

const PRIMARY = "api-us-east-1a-primary";
const SECONDARY = "api-us-east-1a-secondary";
const HC = "hc-us-east-1a";

describe("failover-record-pairs", () => {
  it("passes a PRIMARY with its SECONDARY and a health check", async () => {
    expect(await messages(failoverRecordPairs, happyStack())).toEqual([]);
  });

  it("fails a PRIMARY whose twin has another type", async () => {
    expect(await messages(failoverRecordPairs, changed(SECONDARY, (p) => (p.type = "A")))).toEqual([
      "PRIMARY failover record us-east-1a.api.example.com CNAME (api-us-east-1a-primary) has no SECONDARY record with the same name and type.",
    ]);
  });

  it("fails a PRIMARY whose twin has another name", async () => {
    expect(await messages(failoverRecordPairs, changed(SECONDARY, (p) => (p.name = "other.api.example.com")))).toEqual([
      "PRIMARY failover record us-east-1a.api.example.com CNAME (api-us-east-1a-primary) has no SECONDARY record with the same name and type.",
    ]);
  });

  it("fails a PRIMARY without a health check", async () => {
    expect(await messages(failoverRecordPairs, changed(PRIMARY, (p) => delete p.healthCheckId))).toEqual([
      "PRIMARY failover record us-east-1a.api.example.com CNAME (api-us-east-1a-primary) has no healthCheckId.",
    ]);
  });
});

describe("route53-health-check-fast", () => {
  it("passes interval 10, threshold 2, /az/health", async () => {
    expect(await messages(route53HealthCheckFast, happyStack())).toEqual([]);
  });

  it("fails the 30 s default interval", async () => {
    expect(await messages(route53HealthCheckFast, changed(HC, (p) => delete p.requestInterval))).toEqual([
      "Health check hc-us-east-1a has requestInterval unset (30); it must be 10.",
    ]);
  });

  it("fails threshold 3", async () => {
    expect(await messages(route53HealthCheckFast, changed(HC, (p) => (p.failureThreshold = 3)))).toEqual([
      "Health check hc-us-east-1a has failureThreshold 3; it must be at most 2.",
    ]);
  });

  it("fails another path", async () => {
    expect(await messages(route53HealthCheckFast, changed(HC, (p) => (p.resourcePath = "/health")))).toEqual([
      "Health check hc-us-east-1a probes /health; it must probe /az/health.",
    ]);
  });

  it("does not apply to calculated checks", async () => {
    const rs = changed(HC, (p) => {
      p.type = "CALCULATED";
      delete p.requestInterval;
    });
    expect(await messages(route53HealthCheckFast, rs)).toEqual([]);
  });

  it("lets config allow threshold 1 only", async () => {
    const cfg = { "route53-health-check-fast": { maxFailureThreshold: 1 } };
    expect(await messages(route53HealthCheckFast, happyStack(), cfg)).toEqual([
      "Health check hc-us-east-1a has failureThreshold 2; it must be at most 1.",
      "Health check hc-us-east-1b has failureThreshold 2; it must be at most 1.",
    ]);
  });
});

describe("failover-record-ttl", () => {
  it("passes TTL 30", async () => {
    expect(await messages(failoverRecordTtl, happyStack())).toEqual([]);
  });

  it("fails TTL 60", async () => {
    expect(await messages(failoverRecordTtl, changed(PRIMARY, (p) => (p.ttl = 60)))).toEqual([
      "Failover record api-us-east-1a-primary has ttl 60; it must be at most 30.",
    ]);
  });

  it("fails an alias failover record (no TTL of its own)", async () => {
    const rs = changed(SECONDARY, (p) => {
      delete p.ttl;
      delete p.records;
      p.aliases = [{ name: "nlb-us-east-1b.elb.amazonaws.com", zoneId: "Z35SXDOTRQ7X7K", evaluateTargetHealth: true }];
    });
    expect(await messages(failoverRecordTtl, rs)).toEqual([
      "Failover record api-us-east-1a-secondary has no ttl (an alias record answers with its target's TTL); set ttl to at most 30.",
    ]);
  });

  it("ignores records without a failover policy", async () => {
    const rs = changed(PRIMARY, (p) => {
      delete p.failoverRoutingPolicies;
      p.ttl = 300;
    });
    expect(await messages(failoverRecordTtl, rs)).toEqual([]);
  });
});
