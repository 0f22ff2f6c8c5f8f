/**
 * The shipped alert rules judged against the drill's real series: a real Prometheus
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
import { sleep } from "../../agent/src/util/net";
import { L1_TARGET_RATE } from "../../infra/observability/alerts/slo";
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
        { source_labels: ["proxy"], regex: "az_.+_(servers|relayed)", target_label: "proxy", replacement: "inference_$1" },
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
    // Warm-up: a proxy killed before Prometheus recorded its request rate (two scrapes and a rule
    // evaluation; the first scrape and evaluation come up to a few seconds after start) leaves
    // nothing to count as lost. Then one short SLO window (5m → 5 s) of history.
    const warm = await warmUp(p, st.azs.length, 30_000);
    progress(warm ? "Prometheus has every AZ proxy's request rate" : "Prometheus has not recorded every AZ proxy's request rate within 30 s: alerts may be missed");
    await sleep(Math.round(300_000 * DRILL_SLO_TIME_SCALE));
    return p;
  } catch (err) {
    if (err instanceof PrometheusMissingError) {
      progress("alerts not evaluated: prometheus is not installed (apt-get install -y prometheus)");
      return null;
    }
    throw err;
  }
}

/** Until `cluster_az_instance:llmha_l1_requests:irate` has a series for each of the `proxies` L1 targets; false at the deadline. */
async function warmUp(p: PrometheusHandle, proxies: number, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const n = await p.query(`count(${L1_TARGET_RATE})`).catch(() => []);
    if ((n[0]?.value ?? 0) >= proxies) return true;
    await sleep(250);
  }
  return false;
}

/**
 * `Name{az=…}` for each alert that fired, sorted, unique; `(carried)` after one already firing
 * when the range began (the scaled SLO windows hold a page about 30 s and a ticket about 2 min
 * after the budget stops burning: into the next scenario).
 */
export function alertNames(fired: readonly FiredAlert[]): string[] {
  const name = (a: FiredAlert) => `${a.alertname}${a.labels.az ? `{az=${a.labels.az}}` : ""}`;
  const fresh = new Set(fired.filter((a) => !a.carried).map(name));
  return [...new Set(fired.map(name))].map((n) => (fresh.has(n) ? n : `${n} (carried)`)).sort();
}
