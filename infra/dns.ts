import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { PORTS } from "../contracts/names";
import { Problems } from "./problems";
import { tagged } from "./tags";

export interface DnsArgs {
  /** Existing Route53 hosted zone. Required. */
  zoneId: string;
  /** The name clients use, e.g. `infer.example.com`, inside that zone. Required. */
  serviceName: string;
  /**
   * Each AZ's entry point: the NLB in front of its HAProxy, in stack order, and its weight:
   * the AZ's configured capacity (GPU nodes), 0–255. Route53 answers each AZ in proportion
   * to its weight among the healthy ones. Required, ≥ 2.
   */
  endpoints: { az: string; hostname: pulumi.Input<string>; weight: number }[];
  /** Record TTL in seconds, ≤ 30. Default 30. */
  ttl?: number;
  /** Failed checks (10 s apart) before an AZ counts as down, ≤ 2. Default 2. */
  failureThreshold?: number;
  /**
   * Port of the NLB listener the health checks probe: the L1 proxy's own `/az/health`
   * listener, which a full inference frontend (port 80) does not hold up. Default
   * `PORTS.l1AzHealth` (8081).
   */
  port?: number;
  /** The NLB listener is TLS (`llm-ha:edge.certificateArn`): the checks speak HTTPS (Route53 does not validate the certificate). Default false. */
  https?: boolean;
}

/**
 * L3 zone tier in Route53, as AWS lays it out for a multi-AZ service: the service name is a
 * set of weighted records, one per AZ, each naming that AZ's NLB and carrying that AZ's
 * health check (`/az/health` through the NLB and HAProxy: a dead proxy, NLB or zone all fail
 * it). Route53 drops the unhealthy records and answers the healthy ones in proportion to
 * their weights, so a lost AZ's share spreads over every healthy AZ by capacity (a failover
 * pair per AZ sent it all to one neighbour: 2/3 of the answers with 3 AZs). With every check
 * failing Route53 answers them all (fail-open). Worst case: 10 s × threshold to notice plus
 * the TTL for resolvers to follow, ≤ 60 s.
 */
export class Dns extends pulumi.ComponentResource {
  readonly fqdn: string;
  readonly healthCheckIds: Record<string, pulumi.Output<string>>;

  constructor(name: string, args: DnsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:Dns", name, {}, opts);
    this.healthCheckIds = createDns(name, args, this);
    this.fqdn = args.serviceName;
    this.registerOutputs({ fqdn: this.fqdn, healthCheckIds: this.healthCheckIds });
  }
}

export function createDns(name: string, args: DnsArgs, parent: pulumi.Resource): Record<string, pulumi.Output<string>> {
  const ttl = args.ttl ?? 30;
  const failureThreshold = args.failureThreshold ?? 2;
  const p = new Problems();
  if (args.endpoints.length < 2) p.add("endpoints", "failover needs at least 2 AZs");
  for (const e of args.endpoints) {
    if (!(Number.isInteger(e.weight) && e.weight >= 0 && e.weight <= 255)) p.add(`endpoints.${e.az}.weight`, `${e.weight} is outside Route53's 0–255`);
  }
  if (args.endpoints.length > 0 && args.endpoints.every((e) => e.weight === 0)) p.add("endpoints", "every weight is 0: no AZ would be answered in proportion to its capacity");
  if (!(ttl >= 1 && ttl <= 30)) p.add("ttl", `${ttl} is outside 1–30 s`);
  if (!(failureThreshold >= 1 && failureThreshold <= 2)) p.add("failureThreshold", `${failureThreshold} is outside 1–2`);
  p.throwIfAny("Dns arguments");
  const opts = { parent };
  const port = args.port ?? PORTS.l1AzHealth;

  const checks = args.endpoints.map(
    (e) =>
      new aws.route53.HealthCheck(
        `${name}-hc-${e.az}`,
        {
          type: args.https ? "HTTPS" : "HTTP",
          fqdn: e.hostname,
          port,
          resourcePath: "/az/health",
          requestInterval: 10,
          failureThreshold,
          tags: tagged({ Name: `${args.serviceName} ${e.az}` }),
        },
        opts,
      ),
  );
  const ids: Record<string, pulumi.Output<string>> = {};
  args.endpoints.forEach((e, i) => {
    ids[e.az] = checks[i].id;
    // The logical name of the weighted alias this record replaces (same name and set
    // identifier in Route53): an existing stack updates it in place rather than creating a
    // second record with the same set identifier, which Route53 would refuse. Should the
    // provider replace it, deleting first leaves that AZ out of the set for a moment while the
    // other AZs keep answering.
    new aws.route53.Record(
      `${name}-${e.az}-weighted`,
      {
        zoneId: args.zoneId,
        name: args.serviceName,
        type: "CNAME",
        ttl,
        setIdentifier: e.az,
        weightedRoutingPolicies: [{ weight: e.weight }],
        records: [e.hostname],
        healthCheckId: checks[i].id,
      },
      { parent, deleteBeforeReplace: true },
    );
  });
  return ids;
}

/**
 * Each AZ's DNS weight: its configured GPUs (every class's `desiredPerAz × gpusPerNode`),
 * at most Route53's 255. Every class is configured per AZ, so the weights are equal today; they
 * follow capacity should an AZ ever be configured larger. The standby AZ counts at its
 * configured size like the others: it serves all week, and while it sleeps its `/az/health`
 * (the leader's DOWN) takes it out of the answers like any lost AZ. With no GPUs configured
 * every AZ weighs 1 (equal shares).
 */
export function capacityWeights(azs: string[], classes: { desiredPerAz: number; gpusPerNode: number }[]): Record<string, number> {
  const gpus = classes.reduce((n, c) => n + c.desiredPerAz * c.gpusPerNode, 0);
  return Object.fromEntries(azs.map((az) => [az, Math.min(255, gpus) || 1]));
}
