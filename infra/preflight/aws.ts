/**
 * The online checks of `llm-ha preflight`: read-only AWS calls (no create, no change), each
 * turned into rows of the preflight table. Clients are passed in so tests drive them with
 * aws-sdk-client-mock.
 */
import { DescribeCapacityReservationsCommand, DescribeInstanceTypeOfferingsCommand, EC2Client } from "@aws-sdk/client-ec2";
import { GetHostedZoneCommand, Route53Client } from "@aws-sdk/client-route-53";
import { ServiceQuotasClient } from "@aws-sdk/client-service-quotas";
import type { StackConfig } from "../config";
import { P_QUOTA_CODE, pQuotaNeeded, type CheckRow } from "./checks";
import { awsCli, cliChecks, type AwsCli } from "./aws-cli";
import { quotaValue, STANDARD_QUOTA_CHECK, standardQuotaRows } from "./quotas";
import { reservationRow, wantedReservations } from "./reservations";
import { fetchIpRanges, route53RangesRow, type IpRangesFetch } from "./route53-ranges";
import { capacityBlockMostlyNote } from "../../contracts/scarce-gpus";
import { cliClusterReader, existingClusterRows, type ClusterReader } from "./existing-cluster";

export interface AwsClients {
  ec2: EC2Client;
  quotas: ServiceQuotasClient;
  route53: Route53Client;
  /** EKS add-on versions, the ECR image, the S3 weights, the ACM certificate, the pull-through secret (`aws` CLI). Absent: those checks are not made. */
  cli?: AwsCli;
  /** AWS's ip-ranges.json (no credentials): the Route53 checkers' ranges against the snapshot. Absent: not compared. */
  ipRanges?: IpRangesFetch;
  /** An existing cluster's reads (`aws eks`, `kubectl`): with `llm-ha:existingCluster` only. Absent: not checked. */
  cluster?: ClusterReader;
}

export function awsClients(region: string): AwsClients {
  return { ec2: new EC2Client({ region }), quotas: new ServiceQuotasClient({ region }), route53: new Route53Client({ region: "us-east-1" }), cli: awsCli(region), ipRanges: fetchIpRanges, cluster: cliClusterReader(region) };
}

const why = (err: unknown) => (err instanceof Error ? `${err.name}: ${err.message}` : String(err));

/** Runs every online check; a failing call is a `fail` row naming the call, never a crash. */
export async function onlineChecks(c: StackConfig, clients: AwsClients, today = new Date()): Promise<CheckRow[]> {
  const rows: CheckRow[] = [];
  const guard = async (check: string, f: () => Promise<CheckRow[]>) => {
    try {
      rows.push(...(await f()));
    } catch (err) {
      rows.push({ check, status: "fail", detail: `the AWS call failed: ${why(err)}`, fix: "check the credentials and region (read-only calls: ec2:Describe*, servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, route53:GetHostedZone, eks:DescribeAddonVersions, ecr:DescribeImages, s3:ListBucket, acm:DescribeCertificate, secretsmanager:DescribeSecret; with an adopted Redis or MSK: elasticache:DescribeReplicationGroups, elasticache:DescribeCacheClusters, elasticache:DescribeCacheParameters, kafka:DescribeClusterV2, kafka:DescribeConfigurationRevision)" });
    }
  };

  await guard("GPU quota", async () => {
    const need = pQuotaNeeded(c);
    if (need === 0) return [{ check: "GPU quota", status: "ok", detail: "no On-Demand P instances (capacity blocks only)", fix: "" }];
    const have = await quotaValue(clients.quotas, P_QUOTA_CODE);
    return [
      have >= need
        ? { check: "GPU quota", status: "ok", detail: `Running On-Demand P instances: ${have} vCPUs ≥ ${need} needed at every group's maximum (standby fallback groups included)`, fix: "" }
        : {
            check: "GPU quota",
            status: "missing",
            detail: `Running On-Demand P instances: ${have} vCPUs in ${c.region}, ${need} needed at every group's maximum`,
            fix: `aws service-quotas request-service-quota-increase --service-code ec2 --quota-code ${P_QUOTA_CODE} --desired-value ${need} --region ${c.region}`,
          },
    ];
  });

  // An existing cluster's system nodes are the operator's: no Standard instances of the stack's own.
  if (c.existingCluster === undefined) await guard(STANDARD_QUOTA_CHECK, () => standardQuotaRows(c, clients.ec2, clients.quotas));

  await guard("instance types offered", async () => {
    const fallbacks = Object.entries(c.standbyFallback) as [string, string[]][];
    const types = [...new Set([...c.gpuClasses.flatMap((g) => g.instanceTypes), ...fallbacks.flatMap(([, t]) => t)])];
    const r = await clients.ec2.send(
      new DescribeInstanceTypeOfferingsCommand({
        LocationType: "availability-zone",
        Filters: [
          { Name: "instance-type", Values: types },
          { Name: "location", Values: c.azs },
        ],
      }),
    );
    const offered = new Set((r.InstanceTypeOfferings ?? []).map((o) => `${o.InstanceType}@${o.Location}`));
    const out: CheckRow[] = [];
    for (const g of c.gpuClasses) {
      for (const az of c.azs) {
        const here = g.instanceTypes.filter((t) => offered.has(`${t}@${az}`));
        if (here.length === 0) {
          out.push({ check: `offered ${g.name} in ${az}`, status: "missing", detail: `none of ${g.instanceTypes.join(", ")} is offered in ${az}`, fix: `pick AZs that offer it (llm-ha:azs) or add a type to gpuClasses[].instanceTypes` });
        } else if (here.length < g.instanceTypes.length) {
          out.push({ check: `offered ${g.name} in ${az}`, status: "warn", detail: `only ${here.join(", ")} of ${g.instanceTypes.join(", ")} offered`, fix: "" });
        }
      }
    }
    // The standby's fallback group launches only when the standby group cannot: not blocking, but it must be able to.
    for (const [cls, fb] of fallbacks) {
      const az = c.standbyAz!;
      if (!fb.some((t) => offered.has(`${t}@${az}`))) {
        out.push({
          check: `fallback ${cls} in ${az}`,
          status: "warn",
          detail: `none of ${fb.join(", ")} is offered in ${az}: the standby's fallback group could never launch`,
          fix: `set llm-ha:standbyFallback.${cls} to a type offered in ${az} ([] and llm-ha:standbyCapacityWaiver if none is)`,
        });
      } else {
        const note = capacityBlockMostlyNote(fb.filter((t) => offered.has(`${t}@${az}`)));
        if (note) out.push({ check: `fallback ${cls} in ${az}`, status: "warn", detail: note, fix: `llm-ha:gpuClasses[].capacityReservations for ${az}, or llm-ha:standbyFallback.${cls}` });
      }
    }
    return out.length ? out : [{ check: "instance types offered", status: "ok", detail: `${types.join(", ")} offered in ${c.azs.join(", ")}`, fix: "" }];
  });

  const wanted = wantedReservations(c);
  if (wanted.length) {
    await guard("capacity reservations", async () => {
      const r = await clients.ec2.send(new DescribeCapacityReservationsCommand({ CapacityReservationIds: wanted.map((w) => w.id) }));
      const found = new Map((r.CapacityReservations ?? []).map((x) => [x.CapacityReservationId, x]));
      return wanted.map((w) => reservationRow(w, found.get(w.id), c.region, today));
    });
  }

  await guard("hosted zone", async () => {
    let r;
    try {
      r = await clients.route53.send(new GetHostedZoneCommand({ Id: c.dns.zoneId }));
    } catch (err) {
      if ((err as Error).name !== "NoSuchHostedZone") throw err;
      return [{ check: "hosted zone", status: "missing", detail: `no hosted zone ${c.dns.zoneId} in this account`, fix: `aws route53 create-hosted-zone --name <parent of ${c.dns.serviceName}> --caller-reference $(date +%s), delegate it, set llm-ha:dns.zoneId` }];
    }
    const zone = (r.HostedZone?.Name ?? "").replace(/\.$/, "");
    const inside = c.dns.serviceName === zone || c.dns.serviceName.endsWith(`.${zone}`);
    const priv = r.HostedZone?.Config?.PrivateZone === true;
    if (!inside || priv) {
      return [
        {
          check: "hosted zone",
          status: "invalid",
          detail: `${c.dns.zoneId} is ${zone || "(no name)"}${priv ? " (private)" : ""}; ${c.dns.serviceName} ${inside ? "is inside it, but clients resolve only public zones" : "is not inside it"}`,
          fix: "set llm-ha:dns.zoneId to the public zone of llm-ha:dns.serviceName",
        },
      ];
    }
    if (c.dns.serviceName === zone) {
      // infra/dns.ts makes the service name's weighted records CNAMEs (aliases of the per-AZ CNAME pairs).
      return [{ check: "hosted zone", status: "invalid", detail: `${c.dns.serviceName} is the zone's apex: Route53 refuses a CNAME record there, and the service name's records are CNAMEs`, fix: `set llm-ha:dns.serviceName to a name inside ${zone} (infer.${zone})` }];
    }
    return [{ check: "hosted zone", status: "ok", detail: `${c.dns.zoneId} is ${zone}, public; ${c.dns.serviceName} is inside it`, fix: "" }];
  });
  if (clients.cli) await cliChecks(c, clients.cli, guard);
  // An existing cluster: its version, the add-ons and Karpenter llm-ha expects there, the nodes' labels, your access.
  if (c.existingCluster !== undefined && clients.cluster) rows.push(...(await existingClusterRows(c, clients.cluster, today)));
  // The NLBs' :8081 admits the committed snapshot of the checkers' ranges: warn when AWS has moved them.
  if (clients.ipRanges) rows.push(await route53RangesRow(clients.ipRanges));
  return rows;
}
