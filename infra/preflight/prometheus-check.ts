/**
 * Who reads the shipped alert rules and dashboard: the stack installs no Prometheus,
 * so preflight looks for the user's. What the AWS API can see it checks — an Amazon Managed
 * Service for Prometheus scraper pointed at this cluster; an in-cluster Prometheus it cannot
 * see from outside the cluster, and says so with the command that checks it.
 */
import type { StackConfig } from "../config";
import type { AwsCli, AwsCliError } from "./aws-cli";
import type { CheckRow } from "./checks";

type Obj = Record<string, unknown>;
export const PROMETHEUS_CHECK = "prometheus";
const CRDS = "prometheusrules.monitoring.coreos.com podmonitors.monitoring.coreos.com";

/** The cluster's ARN, or null when it does not exist yet (first `pulumi up`). */
async function clusterArn(cli: AwsCli, name: string): Promise<string | null> {
  try {
    const r = (await cli(["eks", "describe-cluster", "--name", name])) as { cluster?: Obj };
    return typeof r.cluster?.arn === "string" ? r.cluster.arn : null;
  } catch (err) {
    if ((err as AwsCliError).code === "ResourceNotFoundException") return null;
    throw err;
  }
}

export async function prometheusRows(c: Pick<StackConfig, "clusterName" | "observability">, cli: AwsCli): Promise<CheckRow[]> {
  const arn = await clusterArn(cli, c.clusterName);
  const operator = c.observability.prometheusOperator;
  if (arn === null) {
    return [{
      check: PROMETHEUS_CHECK, status: "warn",
      detail: `cluster ${c.clusterName} does not exist yet; the stack installs no Prometheus: its rules and dashboard need one`,
      fix: operator ? `after pulumi up: kubectl get crd ${CRDS} (both must exist before the stack's PrometheusRule and PodMonitors)` : "after pulumi up: point a Prometheus at the rule and scrape ConfigMaps (docs/observability.md), or rerun preflight --online",
    }];
  }
  const scrapers = ((await cli(["amp", "list-scrapers"])) as { scrapers?: Obj[] }).scrapers ?? [];
  const ours = scrapers.filter((s) => ((s.source as Obj | undefined)?.eksConfiguration as Obj | undefined)?.clusterArn === arn);
  if (ours.length > 0) {
    const names = ours.map((s) => String(s.alias ?? s.scraperId)).join(", ");
    return [{ check: PROMETHEUS_CHECK, status: "ok", detail: `Amazon Managed Prometheus scraper ${names} reads ${c.clusterName}; load the rules into its workspace (docs/observability.md)`, fix: "" }];
  }
  // An in-cluster Prometheus is invisible to the AWS API: say what to run instead of guessing.
  return [{
    check: PROMETHEUS_CHECK, status: "warn",
    detail: `no Amazon Managed Prometheus scraper reads ${c.clusterName}, and an in-cluster Prometheus cannot be seen from the AWS API`,
    fix: operator ? `kubectl get crd ${CRDS} must list both (kube-prometheus-stack installs them)` : "point your Prometheus at the rule and scrape ConfigMaps (docs/observability.md), or set llm-ha:observability.prometheusOperator: true with kube-prometheus-stack",
  }];
}
