/**
 * The shipped alert rules judged against the drill's real series (issue 19): a real Prometheus
 * scrapes every active node's agent and every AZ proxy's HAProxy exporter, as the production
 * scrape jobs do, evaluates `infra/observability`'s rules, and the drill reports which alerts
 * fired during each scenario. Optional: without the `prometheus` binary the drill says so and
 * runs on.
 *
 * Time scaled: a drill scenario holds its fault for seconds, the SLO windows are minutes to
 * days (a 6 s AZ loss is 0.2 % of an hour: no page, rightly, in production). So the drill's
 * rules run with `sloTimeScale` 1/60 — a production minute is a drill second: 5m → 5 s,
 * 1h → 60 s, 3d → 72 min, `l1LostFor` 5m → 5 s — on the drill's 1 s scrapes and evaluations.
 * Every other rule (`for:`, thresholds) is as shipped.
 */
import { PrometheusMissingError, shippedRules, startPrometheus, type FiredAlert, type PrometheusHandle, type PrometheusTarget } from "../engines/prometheus";
import type { DrillStack } from "./stack";

/** A production minute is a drill second (see above). */
export const DRILL_SLO_TIME_SCALE = 1 / 60;

/** The scrape targets, labelled as the Kubernetes jobs label them; the standby AZ's nodes are left out (scaled to zero, they are no target). */
export function drillScrapeTargets(st: DrillStack): PrometheusTarget[] {
  const active = st.nodes.filter((n) => !st.azOf(n).standby);
  return [
    ...active.map((n) => ({ job: "llm-ha-agent", address: `${n.address}:${n.httpPort}`, honorLabels: true, labels: { cluster: st.cluster, az: n.az, node: n.id } })),
    ...st.azs.map((a) => ({
      job: "l1-proxy",
      address: `${a.address}:${st.monitorPort}`,
      params: { "no-maint": [""] },
      labels: { cluster: st.cluster, az: a.name },
      // The drill names each AZ's proxy after its AZ; production's is `inference`.
      metricRelabelConfigs: [
        { source_labels: ["proxy"], regex: "az_.+_servers", target_label: "proxy", replacement: "inference_servers" },
        { source_labels: ["proxy"], regex: "az_[a-z0-9_]+", target_label: "proxy", replacement: "inference" },
      ],
    })),
  ];
}

/** Starts Prometheus over the drill; null (with a line saying why) when it is not installed. */
export async function startDrillPrometheus(st: DrillStack, progress: (line: string) => void): Promise<PrometheusHandle | null> {
  try {
    const p = await startPrometheus({ ruleFiles: [shippedRules({ standbyAz: st.standby?.name ?? null, sloTimeScale: DRILL_SLO_TIME_SCALE })], targets: drillScrapeTargets(st) });
    progress(`Prometheus ${p.url} scraping ${drillScrapeTargets(st).length} targets with the shipped alert rules (SLO windows × 1/60: 1h → 60 s)`);
    return p;
  } catch (err) {
    if (err instanceof PrometheusMissingError) {
      progress("alerts not evaluated: prometheus is not installed (apt-get install -y prometheus)");
      return null;
    }
    throw err;
  }
}

/** `Name{az=…}` for each alert that fired, sorted, unique. */
export function alertNames(fired: readonly FiredAlert[]): string[] {
  return [...new Set(fired.map((a) => `${a.alertname}${a.labels.az ? `{az=${a.labels.az}}` : ""}`))].sort();
}
