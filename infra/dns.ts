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
  /** Each AZ's entry point: the NLB in front of its HAProxy, in stack order. Required, ≥ 2. */
  endpoints: { az: string; hostname: pulumi.Input<string> }[];
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
 * L3 zone failover in Route53: per AZ a health check on `/az/health` through its NLB and
 * HAProxy (a dead proxy, NLB or zone all fail it), a PRIMARY/SECONDARY failover pair
 * `<az>.<service>` (own NLB, else the next AZ's), and the service name as equal weighted
 * aliases of those pairs, so every AZ serves while healthy. Worst case: 10 s × threshold
 * to notice plus the TTL for resolvers to follow, ≤ 60 s.
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
    const next = (i + 1) % args.endpoints.length;
    const azName = `${e.az}.${args.serviceName}`;
    ids[e.az] = checks[i].id;
    const pair = ([["PRIMARY", i], ["SECONDARY", next]] as const).map(([role, j]) =>
      new aws.route53.Record(
        `${name}-${e.az}-${role.toLowerCase()}`,
        {
          zoneId: args.zoneId,
          name: azName,
          type: "CNAME",
          ttl,
          setIdentifier: `${e.az}-${role.toLowerCase()}`,
          failoverRoutingPolicies: [{ type: role }],
          records: [args.endpoints[j].hostname],
          healthCheckId: checks[j].id,
        },
        opts,
      ),
    );
    // Route53 refuses an alias whose target record does not exist yet (InvalidChangeBatch …
    // target was not found), and the alias names its target by a plain string: without this
    // dependsOn it would be created first, before the failover pair waits for its NLBs.
    new aws.route53.Record(
      `${name}-${e.az}-weighted`,
      {
        zoneId: args.zoneId,
        name: args.serviceName,
        type: "CNAME",
        setIdentifier: e.az,
        weightedRoutingPolicies: [{ weight: 100 }],
        aliases: [{ name: azName, zoneId: args.zoneId, evaluateTargetHealth: true }],
      },
      { parent, dependsOn: pair },
    );
  });
  return ids;
}
