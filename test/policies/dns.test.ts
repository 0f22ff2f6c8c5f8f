import { describe, expect, it } from "vitest";
import { failoverRecordPairs, failoverRecordTtl, route53HealthCheckFast } from "../../policies/dns";
import { dnsAzLossSpread } from "../../policies/dns-spread";
import { failoverPairLayout, weightedRecord } from "./dns-fixtures";
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
      "Health check hc-us-east-1c has failureThreshold 2; it must be at most 1.",
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

describe("dns-az-loss-spread", () => {
  const AZS = ["us-east-1a", "us-east-1b", "us-east-1c"];
  const withoutWeighted = () => happyStack().filter((r) => !/-(weighted|primary|secondary)$/.test(r.name));

  it("passes one weighted record per AZ, each with its own health check", async () => {
    expect(await messages(dnsAzLossSpread, happyStack())).toEqual([]);
  });

  it("fails the failover-pair layout: a lost AZ's whole share goes to its neighbour (2/3 of the answers)", async () => {
    const rs = [...withoutWeighted(), ...failoverPairLayout(AZS)];
    expect(await messages(dnsAzLossSpread, rs)).toEqual(
      AZS.map(
        (az, i) =>
          `Losing nlb-${az}.elb.amazonaws.com sends 66.7% of api.example.com's DNS answers to nlb-${AZS[(i + 1) % 3]}.elb.amazonaws.com, 1.33 × its fair share of 50.0% (at most 1.2 ×): give the service name one weighted record per AZ, weighted by capacity, each with its own AZ's health check.`,
      ),
    );
  });

  it("passes the failover-pair layout with two AZs (the neighbour is the only one left)", async () => {
    expect(await messages(dnsAzLossSpread, [...withoutWeighted(), ...failoverPairLayout(AZS.slice(0, 2))])).toEqual([]);
  });

  it("judges fair share by capacity: unequal weights that follow capacity pass", async () => {
    const rs = [...withoutWeighted(), weightedRecord("us-east-1a", 96), weightedRecord("us-east-1b", 48), weightedRecord("us-east-1c", 48)];
    expect(await messages(dnsAzLossSpread, rs)).toEqual([]);
  });

  it("fails a weighted record without a health check (Route53 keeps answering the lost AZ)", async () => {
    expect(await messages(dnsAzLossSpread, changed("api-us-east-1b-weighted", (p) => delete p.healthCheckId))).toEqual([
      "Weighted record api-us-east-1b-weighted (api.example.com) has no healthCheckId: Route53 keeps answering its AZ when that AZ is lost.",
    ]);
  });

  it("lets config loosen the ratio", async () => {
    const rs = [...withoutWeighted(), ...failoverPairLayout(AZS)];
    expect(await messages(dnsAzLossSpread, rs, { "dns-az-loss-spread": { maxShareRatio: 1.4 } })).toEqual([]);
  });
});

describe("failover-record-ttl on weighted records", () => {
  it("fails a weighted record with TTL 60", async () => {
    expect(await messages(failoverRecordTtl, changed("api-us-east-1c-weighted", (p) => (p.ttl = 60)))).toEqual([
      "Weighted record api-us-east-1c-weighted has ttl 60; it must be at most 30.",
    ]);
  });
});
