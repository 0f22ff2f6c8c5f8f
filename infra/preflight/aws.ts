/**
 * The online checks of `llm-ha preflight`: read-only AWS calls (no create, no change), each
 * turned into rows of the preflight table. Clients are passed in so tests drive them with
 * aws-sdk-client-mock.
 */
import { DescribeCapacityReservationsCommand, DescribeInstanceTypeOfferingsCommand, EC2Client, type CapacityReservation } from "@aws-sdk/client-ec2";
import { GetHostedZoneCommand, Route53Client } from "@aws-sdk/client-route-53";
import { GetServiceQuotaCommand, ServiceQuotasClient } from "@aws-sdk/client-service-quotas";
import { standbySize, type StackConfig } from "../config";
import { P_QUOTA_CODE, RESERVATION_END_WARN_DAYS, pQuotaNeeded, type CheckRow } from "./checks";
import { awsCli, cliChecks, type AwsCli } from "./aws-cli";
import { fetchIpRanges, route53RangesRow, type IpRangesFetch } from "./route53-ranges";
import { capacityBlockMostlyNote } from "../../contracts/scarce-gpus";

export interface AwsClients {
  ec2: EC2Client;
  quotas: ServiceQuotasClient;
  route53: Route53Client;
  /** EKS add-on versions, the ECR image, the S3 weights (`aws` CLI). Absent: those checks are not made. */
  cli?: AwsCli;
  /** AWS's ip-ranges.json (no credentials): the Route53 checkers' ranges against the snapshot. Absent: not compared. */
  ipRanges?: IpRangesFetch;
}

export function awsClients(region: string): AwsClients {
  return { ec2: new EC2Client({ region }), quotas: new ServiceQuotasClient({ region }), route53: new Route53Client({ region: "us-east-1" }), cli: awsCli(region), ipRanges: fetchIpRanges };
}

const why = (err: unknown) => (err instanceof Error ? `${err.name}: ${err.message}` : String(err));

/** Runs every online check; a failing call is a `fail` row naming the call, never a crash. */
export async function onlineChecks(c: StackConfig, clients: AwsClients, today = new Date()): Promise<CheckRow[]> {
  const rows: CheckRow[] = [];
  const guard = async (check: string, f: () => Promise<CheckRow[]>) => {
    try {
      rows.push(...(await f()));
    } catch (err) {
      rows.push({ check, status: "fail", detail: `the AWS call failed: ${why(err)}`, fix: "check the credentials and region (read-only calls: ec2:Describe*, servicequotas:GetServiceQuota, route53:GetHostedZone, eks:DescribeAddonVersions, ecr:DescribeImages, s3:ListBucket)" });
    }
  };

  await guard("GPU quota", async () => {
    const need = pQuotaNeeded(c);
    if (need === 0) return [{ check: "GPU quota", status: "ok", detail: "no On-Demand P instances (capacity blocks only)", fix: "" }];
    const r = await clients.quotas.send(new GetServiceQuotaCommand({ ServiceCode: "ec2", QuotaCode: P_QUOTA_CODE }));
    const have = r.Quota?.Value ?? 0;
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
    // The standby's fallback group (issue 15) launches only when the standby group cannot: not blocking, but it must be able to.
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

  const wanted = c.gpuClasses.flatMap((g) =>
    Object.entries(g.capacityReservations).map(([az, id]) => ({
      id,
      az,
      type: g.instanceType,
      cls: g.name,
      block: g.capacityType === "CAPACITY_BLOCK",
      max: az === c.standbyAz ? standbySize(g, c.standbyCapacityRatio).max : g.maxPerAz,
    })),
  );
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
  // The NLBs' :8081 admits the committed snapshot of the checkers' ranges: warn when AWS has moved them.
  if (clients.ipRanges) rows.push(await route53RangesRow(clients.ipRanges));
  return rows;
}

/** A configured reservation: its class, AZ, type, whether the class runs on Capacity Blocks, and the group's maximum there. */
interface WantedReservation {
  id: string;
  az: string;
  type: string;
  cls: string;
  block: boolean;
  max: number;
}

/**
 * One configured reservation against what EC2 says of it. Invalid: not there, another AZ or
 * type, not usable, a plain reservation for a CAPACITY_BLOCK class. Warned, with the capacity
 * semantics of docs/infra.md: a group whose maximum is above the reservation's count (a
 * targeted reservation does not overflow to On-Demand: the launches past it fail), and a
 * reservation that ends soon (a Capacity Block runs at most 182 days and EC2 reclaims its
 * instances at the end).
 */
export function reservationRow(w: WantedReservation, x: CapacityReservation | undefined, region: string, today: Date): CheckRow {
  const check = `reservation ${w.id}`;
  if (!x) return { check, status: "missing", detail: `not found in ${region}`, fix: `check gpuClasses[${w.cls}].capacityReservations.${w.az}` };
  const problems: string[] = [];
  if (x.AvailabilityZone !== w.az) problems.push(`it is in ${x.AvailabilityZone}, configured for ${w.az}`);
  if (x.InstanceType !== w.type) problems.push(`it is for ${x.InstanceType}, the class launches ${w.type}`);
  if (!["active", "scheduled", "pending"].includes(String(x.State))) problems.push(`its state is ${x.State}`);
  if (w.block && x.ReservationType !== "capacity-block") problems.push(`the class is CAPACITY_BLOCK but this is a ${x.ReservationType ?? "default"} reservation, not a Capacity Block`);
  if (problems.length) {
    return { check, status: "invalid", detail: problems.join("; "), fix: `set gpuClasses[${w.cls}].capacityReservations to {<its AZ>: ${w.id}} or use another reservation` };
  }
  const count = x.TotalInstanceCount;
  const ends = x.EndDate ? ` until ${x.EndDate.toISOString().slice(0, 16).replace("T", " ")} UTC` : "";
  const detail = `${x.InstanceType} × ${count ?? "?"} in ${x.AvailabilityZone}, ${x.State}${ends}`;
  const warnings: string[] = [];
  const fixes: string[] = [];
  if (count !== undefined && count < w.max) {
    warnings.push(`the group in ${w.az} may grow to ${w.max}, above its ${count}: a targeted reservation does not overflow to On-Demand, launches past ${count} fail (ReservationCapacityExceeded)`);
    fixes.push(`raise the reservation to ${w.max} instances or lower gpuClasses[${w.cls}].maxPerAz`);
  }
  const daysLeft = x.EndDate ? (x.EndDate.getTime() - today.getTime()) / 86_400_000 : undefined;
  if (daysLeft !== undefined && daysLeft < RESERVATION_END_WARN_DAYS) {
    warnings.push(`it ends in ${Math.max(0, Math.floor(daysLeft))} days: EC2 takes its instances back then`);
    fixes.push(`extend it before the end (its id stays), or ${w.block ? "buy the next Capacity Block" : "reserve again"} and set gpuClasses[${w.cls}].capacityReservations.${w.az} to it`);
  }
  return warnings.length ? { check, status: "warn", detail: `${detail}; ${warnings.join("; ")}`, fix: fixes.join("; ") } : { check, status: "ok", detail, fix: "" };
}
