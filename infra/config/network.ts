import * as pulumi from "@pulumi/pulumi";
import type { Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** `aws:region`, `llm-ha:azs`, `standbyAz` and `network`: where the stack runs. */
export function networkOf(s: Settings, aws: pulumi.Config): Pick<StackConfig, "region" | "azs" | "standbyAz" | "vpcCidr" | "natPerAz"> {
  const { cfg, p, key } = s;
  const region = aws.get("region") ?? "";
  if (!region) p.add("aws:region", "is required");

  const azsRaw = cfg.getObject<unknown>("azs");
  let azs: string[] = [];
  if (!Array.isArray(azsRaw) || !azsRaw.every((a) => typeof a === "string")) {
    p.add(key("azs"), "must be a list of availability zone names");
  } else {
    azs = azsRaw as string[];
    if (azs.length < 2) p.add(key("azs"), `needs at least 2 availability zones for zone failover, got ${azs.length}`);
    if (azs.length > 3) p.add(key("azs"), `MSK spreads brokers over 2 or 3 AZs, got ${azs.length}`);
    if (new Set(azs).size !== azs.length) p.add(key("azs"), "lists an availability zone twice");
    const foreign = azs.filter((a) => region && !(a.startsWith(region) && /^[a-z]$/.test(a.slice(region.length))));
    if (foreign.length) p.add(key("azs"), `${foreign.join(", ")} not in region ${region}`);
  }

  const standbyAz = cfg.get("standbyAz");
  if (standbyAz !== undefined && !azs.includes(standbyAz)) p.add(key("standbyAz"), `${standbyAz} is not one of llm-ha:azs`);

  const net = s.obj("network");
  const natGateways = net.natGateways ?? "perAz";
  if (natGateways !== "single" && natGateways !== "perAz") p.add(key("network.natGateways"), 'must be "single" or "perAz"');
  const vpcCidr = s.str(net, "cidr", key("network.cidr"), "10.0.0.0/16");
  return { region, azs, standbyAz, vpcCidr, natPerAz: natGateways === "perAz" };
}
