/**
 * The game day's stop conditions: CloudWatch alarms on the availability SLO's fast burn, read
 * from the Route53 health checks the stack already has (infra/dns.ts), one per AZ on
 * `/az/health` through the NLB and HAProxy.
 *
 * Why that source: the SLO's own ratio (failed requests over requests) lives in Prometheus,
 * which FIS cannot read; of what CloudWatch holds, Route53's `HealthCheckStatus` is the one
 * signal that says an AZ has stopped answering clients, exactly when Route53 stops answering
 * with it. The NLBs are made by the load balancer controller (their ids and target groups are
 * not known to the program), and a GPU count would stop experiments that remove GPUs on purpose.
 * The metrics exist only in us-east-1 (`llm-ha:gameday` requires that region).
 *
 * Fast burn: the availability objective is 99.9 % over 30 days; the page fires at 14.4× the
 * budget rate, 1.44 % of requests failing over 5 minutes (and 1 hour). An active AZ that fails
 * its check is out of the answers only after 2 checks (20 s) and the 30 s TTL: about 50 s of
 * its share failing. With two active AZs answering, that is half the requests for 50 s, about
 * 8 % over 5 minutes; with three, a third: both far above 1.44 %. So an AZ lost that the
 * experiment did not mean to take is a fast burn already, and each alarm fires on the first
 * minute it sees one:
 * - `anyActiveAz`: fewer healthy active AZs than there are (for the templates that must not
 *   take an AZ at all: one GPU, the Redis primary, the leader, latency to Redis);
 * - `beyondOneAz`: fewer than all but one (for the templates that take one AZ on purpose).
 * The standby AZ is left out: asleep, its check fails by design (the leader's DOWN), and an
 * alarm already in ALARM would keep every experiment from starting. Missing data counts as
 * breaching: a stop condition that cannot see must stop.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { tagged } from "../tags";
import type { StopAlarm } from "./scenarios";

export interface StopAlarmsArgs {
  clusterName: string;
  /** Route53 health check id per AZ (infra/dns.ts), and the AZs that serve (not the standby). */
  healthCheckIds: Record<string, pulumi.Input<string>>;
  activeAzs: string[];
}

/** The alarm's threshold: healthy active AZs below it is the fast burn. */
export function stopThreshold(kind: StopAlarm, activeAzs: number): number {
  return kind === "anyActiveAz" ? activeAzs : Math.max(1, activeAzs - 1);
}

export function createStopAlarms(name: string, args: StopAlarmsArgs, parent: pulumi.Resource): Record<StopAlarm, aws.cloudwatch.MetricAlarm> {
  const metrics = args.activeAzs.map((az, i) => ({
    id: `az${i}`,
    label: az,
    returnData: false,
    metric: { namespace: "AWS/Route53", metricName: "HealthCheckStatus", dimensions: { HealthCheckId: args.healthCheckIds[az] }, period: 60, stat: "Minimum" },
  }));
  const ids = metrics.map((m) => m.id).join(", ");
  const alarm = (kind: StopAlarm, what: string) =>
    new aws.cloudwatch.MetricAlarm(
      `${name}-stop-${kind}`,
      {
        name: `${args.clusterName}-gameday-stop-${kind}`,
        alarmDescription: `llm-ha game day stop condition (availability SLO fast burn): ${what}`,
        metricQueries: [...metrics, { id: "healthy", label: "healthy active AZs", expression: `SUM([${ids}])`, returnData: true }],
        comparisonOperator: "LessThanThreshold",
        threshold: stopThreshold(kind, args.activeAzs.length),
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        treatMissingData: "breaching",
        tags: tagged(),
      },
      { parent },
    );
  return {
    anyActiveAz: alarm("anyActiveAz", `an active AZ (${args.activeAzs.join(", ")}) fails its Route53 health check`),
    beyondOneAz: alarm("beyondOneAz", `more than one active AZ (${args.activeAzs.join(", ")}) fails its Route53 health check`),
  };
}
