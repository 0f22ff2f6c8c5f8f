import { describe, expect, it } from "vitest";
import { azHealthFromRoute53Only, withinCidr } from "../../policies/az-health";
import type { CapturedResource } from "../../policies/runner";
import { checkerCidrs, ROUTE53_HEALTHCHECK_SNAPSHOT } from "../../contracts/route53-ranges";
import { find, happyStack, messages } from "./fixtures";

const LB = "service.beta.kubernetes.io/aws-load-balancer";
const RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule";
const rule = (name: string, props: Record<string, unknown>): CapturedResource => ({ type: RULE, name, urn: `urn:pulumi:test::llm-ha::${RULE}::${name}`, props });
const annotations = (rs: CapturedResource[]) => (find(rs, "l1-us-east-1a-nlb").props.metadata as { annotations: Record<string, string> }).annotations;

describe("az-health-from-route53-only", () => {
  it("passes an NLB whose frontend group admits the API to everyone and :8081 to Route53's checkers only", async () => {
    expect(await messages(azHealthFromRoute53Only, happyStack())).toEqual([]);
  });

  for (const cidr of ["0.0.0.0/0", "::/0"]) {
    it(`refuses :8081 open to ${cidr} on the NLB's frontend group`, async () => {
      const rs = happyStack();
      const r = find(rs, "l1-nlb-az-health-use1");
      delete r.props.cidrIpv4;
      r.props[cidr.includes(":") ? "cidrIpv6" : "cidrIpv4"] = cidr;
      expect(await messages(azHealthFromRoute53Only, rs)).toEqual([
        `Security group l1-nlb (rule l1-nlb-az-health-use1), the NLB frontend of l1-us-east-1a-nlb, opens :8081 (/az/health) to ${cidr}: anyone can hold its connections until Route53's checkers time out; admit only the ROUTE53_HEALTHCHECKS ranges (contracts/route53-healthcheck-ranges.json).`,
      ]);
    });
  }

  it("refuses a source outside the snapshot (an office's block, a private range), a rule over a port range that takes in 8081, and a group as source", async () => {
    const rs = [
      ...happyStack(),
      rule("office", { securityGroupId: "l1-nlb-id", cidrIpv4: "198.51.100.0/24", ipProtocol: "tcp", fromPort: 8081, toPort: 8081 }),
      rule("vpc-wide", { securityGroupId: "l1-nlb-id", cidrIpv4: "10.0.0.0/8", ipProtocol: "tcp", fromPort: 8000, toPort: 9000 }),
      rule("from-group", { securityGroupId: "l1-nlb-id", referencedSecurityGroupId: "sg-other", ipProtocol: "-1" }),
    ];
    const found = await messages(azHealthFromRoute53Only, rs);
    expect(found).toEqual([
      "Security group l1-nlb (rule office), the NLB frontend of l1-us-east-1a-nlb, opens :8081 (/az/health) to 198.51.100.0/24, outside Route53's health checkers' ranges (contracts/route53-healthcheck-ranges.json).",
      "Security group l1-nlb (rule vpc-wide), the NLB frontend of l1-us-east-1a-nlb, opens :8081 (/az/health) to 10.0.0.0/8, outside Route53's health checkers' ranges (contracts/route53-healthcheck-ranges.json).",
      "Security group l1-nlb (rule from-group), the NLB frontend of l1-us-east-1a-nlb, admits a security group on :8081 (referencedSecurityGroupId); only Route53's health checkers may reach /az/health.",
    ]);
  });

  it("refuses an NLB Service without a frontend group of the stack (the controller's own is open to the world), and source ranges outside the snapshot", async () => {
    const rs = happyStack();
    delete annotations(rs)[`${LB}-security-groups`];
    const found = await messages(azHealthFromRoute53Only, rs);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^Service l1-us-east-1a-nlb exposes \/az\/health \(:8081\) on its NLB to 0\.0\.0\.0\/0 \(no frontend security group: .*name the stack's NLB frontend group in service\.beta\.kubernetes\.io\/aws-load-balancer-security-groups/);
    (find(rs, "l1-us-east-1a-nlb").props.spec as Record<string, unknown>).loadBalancerSourceRanges = ["15.177.0.0/18", "203.0.113.0/24"];
    expect((await messages(azHealthFromRoute53Only, rs))[0]).toMatch(/on its NLB to 203\.0\.113\.0\/24; /);
    (find(rs, "l1-us-east-1a-nlb").props.spec as Record<string, unknown>).loadBalancerSourceRanges = ["15.177.0.0/18", "107.23.255.0/26"];
    expect(await messages(azHealthFromRoute53Only, rs)).toEqual([]);
  });

  it("refuses a frontend group that admits none of the checkers (every health check would fail)", async () => {
    const rs = happyStack().filter((r) => !r.name.startsWith("l1-nlb-az-health"));
    expect(await messages(azHealthFromRoute53Only, rs)).toEqual([
      "Security group l1-nlb, the NLB frontend of l1-us-east-1a-nlb, admits none of Route53's health checkers on :8081: every health check of the AZ fails.",
    ]);
  });

  it("refuses :8081 to the world on any other group too (the L1 pods' own)", async () => {
    const rs = [...happyStack(), rule("pods-8081", { securityGroupId: "l1-pods-id", cidrIpv4: "0.0.0.0/0", ipProtocol: "tcp", fromPort: 8081, toPort: 8081 })];
    expect(await messages(azHealthFromRoute53Only, rs)).toEqual([
      "pods-8081 opens :8081 (/az/health) to 0.0.0.0/0, outside Route53's health checkers' ranges (contracts/route53-healthcheck-ranges.json).",
    ]);
  });

  it("takes the allowed ranges from config (a refreshed snapshot)", async () => {
    const cfg = { "az-health-from-route53-only": { allowedCidrs: ["15.177.0.0/18"] } };
    expect((await messages(azHealthFromRoute53Only, happyStack(), cfg))[0]).toMatch(/rule l1-nlb-az-health-use1\), .* to 107\.23\.255\.0\/26, outside/);
  });
});

describe("the Route53 checkers' snapshot", () => {
  it("is AWS's file's ROUTE53_HEALTHCHECKS entries with their syncToken and createDate; the stack takes every checker region and GLOBAL", () => {
    expect(ROUTE53_HEALTHCHECK_SNAPSHOT.syncToken).toMatch(/^\d{10}$/);
    expect(ROUTE53_HEALTHCHECK_SNAPSHOT.createDate).toMatch(/^\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d$/);
    const { ipv4, ipv6 } = checkerCidrs();
    expect(ipv4).toHaveLength(17);
    expect(ipv4).toContain("15.177.0.0/18");
    // Other partitions' checkers (China, GovCloud) are not the stack's.
    expect(ipv4.some((c) => c.startsWith("52.80.") || c.startsWith("160.1."))).toBe(false);
    expect(ipv6).toContain("2600:1f18:7fff:f800::/56");
    expect(checkerCidrs(undefined, ["us-east-1"]).ipv4).toEqual(["107.23.255.0/26", "15.177.0.0/18", "54.243.31.192/26"]);
  });

  it("contains IPv4 and IPv6 blocks inside a block", () => {
    expect(withinCidr("15.177.0.0/18", "15.177.63.0/24")).toBe(true);
    expect(withinCidr("15.177.0.0/18", "15.177.64.0/24")).toBe(false);
    expect(withinCidr("15.177.0.0/18", "0.0.0.0/0")).toBe(false);
    expect(withinCidr("2600:1f18:7fff:f800::/56", "2600:1f18:7fff:f8ff::/64")).toBe(true);
    expect(withinCidr("2600:1f18:7fff:f800::/56", "2600:1f18:7fff:f900::/64")).toBe(false);
    expect(withinCidr("2600:1f18:7fff:f800::/56", "::/0")).toBe(false);
    expect(withinCidr("2600:1f18:7fff:f800::/56", "15.177.0.0/18")).toBe(false);
  });
});
