import { describe, expect, it } from "vitest";
import { noPublicHaPorts } from "../../policies/network";
import type { CapturedResource } from "../../policies/runner";
import { changed, happyStack, messages } from "./fixtures";

function rule(type: string, props: Record<string, unknown>): CapturedResource {
  return { type, name: "extra", urn: `urn:pulumi:test::llm-ha::${type}::extra`, props };
}

describe("no-public-ha-ports", () => {
  it("passes Redis open to the VPC and HTTPS open to the world", async () => {
    expect(await messages(noPublicHaPorts, happyStack())).toEqual([]);
  });

  it("fails Redis open to 0.0.0.0/0 in an inline ingress", async () => {
    const rs = changed("redis-sg", (p) => (p.ingress = [{ protocol: "tcp", fromPort: 6379, toPort: 6379, cidrBlocks: ["0.0.0.0/0"] }]));
    expect(await messages(noPublicHaPorts, rs)).toEqual(["redis-sg opens Redis (6379) to 0.0.0.0/0."]);
  });

  it("fails the agent ports open to ::/0 through an ingress rule", async () => {
    const rs = changed("nlb-https", (p) => {
      p.fromPort = 9400;
      p.toPort = 9401;
      delete p.cidrIpv4;
      p.cidrIpv6 = "::/0";
    });
    expect(await messages(noPublicHaPorts, rs)).toEqual(["nlb-https opens llm-ha agent (9400-9401) to ::/0."]);
  });

  it("fails an overlapping range on a security group rule", async () => {
    const rs = [
      ...happyStack(),
      rule("aws:ec2/securityGroupRule:SecurityGroupRule", {
        type: "ingress",
        securityGroupId: "sg",
        protocol: "tcp",
        fromPort: 9000,
        toPort: 9100,
        cidrBlocks: ["10.0.0.0/8", "0.0.0.0/0"],
      }),
    ];
    expect(await messages(noPublicHaPorts, rs)).toEqual(["extra opens Kafka (9092-9098) to 0.0.0.0/0."]);
  });

  it("fails all traffic (-1) from the world, once per protected port", async () => {
    const rs = changed("redis-sg", (p) => (p.ingress = [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"] }]));
    expect(await messages(noPublicHaPorts, rs)).toEqual([
      "redis-sg opens Redis (6379) to 0.0.0.0/0.",
      "redis-sg opens Kafka (9092-9098) to 0.0.0.0/0.",
      "redis-sg opens llm-ha agent (9400-9401) to 0.0.0.0/0.",
      "redis-sg opens kubelet (10250) to 0.0.0.0/0.",
    ]);
  });

  it("counts any public block as the world, not only 0.0.0.0/0 (an office /24, half the internet, global IPv6)", async () => {
    const rs = changed("redis-sg", (p) => (p.ingress = [{ protocol: "tcp", fromPort: 6379, toPort: 6379, cidrBlocks: ["203.0.113.0/24", "0.0.0.0/1", "10.1.0.0/16"], ipv6CidrBlocks: ["2001:db8::/32", "fd00::/8"] }]));
    expect(await messages(noPublicHaPorts, rs)).toEqual(["redis-sg opens Redis (6379) to 203.0.113.0/24 and 0.0.0.0/1 and 2001:db8::/32."]);
  });

  it("lets private, CGNAT and unique-local blocks through", async () => {
    const rs = changed("redis-sg", (p) => (p.ingress = [{ protocol: "tcp", fromPort: 6379, toPort: 6379, cidrBlocks: ["172.16.0.0/12", "192.168.1.0/24", "100.64.0.0/10"], ipv6CidrBlocks: ["fd12:3456::/48"] }]));
    expect(await messages(noPublicHaPorts, rs)).toEqual([]);
  });

  it("ignores egress rules and UDP", async () => {
    const rs = [
      ...happyStack(),
      rule("aws:ec2/securityGroupRule:SecurityGroupRule", { type: "egress", protocol: "tcp", fromPort: 6379, toPort: 6379, cidrBlocks: ["0.0.0.0/0"] }),
      rule("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", { ipProtocol: "udp", fromPort: 10250, toPort: 10250, cidrIpv4: "0.0.0.0/0" }),
    ];
    expect(await messages(noPublicHaPorts, rs)).toEqual([]);
  });

  it("takes the port list from config", async () => {
    const rs = changed("nlb-https", (p) => (p.cidrIpv4 = "0.0.0.0/0"));
    const cfg = { "no-public-ha-ports": { ports: [{ name: "HTTPS", from: 443, to: 443 }] } };
    // The L1 NLBs' API rule is open to clients on 443 by design: the configured list decides.
    expect(await messages(noPublicHaPorts, rs, cfg)).toEqual(["l1-nlb-api opens HTTPS (443) to 0.0.0.0/0.", "nlb-https opens HTTPS (443) to 0.0.0.0/0."]);
  });
});
