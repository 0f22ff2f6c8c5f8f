/**
 * What users feel: two SLOs over every inference request through L1 and multi-window,
 * multi-burn-rate alerts on them (SRE workbook, ch. 5 "Alerting on SLOs"), by cluster and
 * by AZ.
 *
 * - **availability**: the share of L1 responses that are not 5xx (HAProxy's own 503s
 *   included), counting streams cut after their status line (`haproxy_backend_response_errors_total`)
 *   as failed too;
 * - **latency**: the share of requests whose time to first token is at most `latencySeconds`,
 *   from vLLM's `vllm:time_to_first_token_seconds` histogram (the inference PodMonitor
 *   scrapes it) or, in an AZ whose servers export none, from the agent's probe histogram.
 *
 * An L1 proxy that is gone (its scrape fails: the pod crashed, the AZ is lost) counts no
 * request, yet its clients get connection errors until DNS moves them. So while a proxy
 * target is down its last measured request rate (between its last two good scrapes) counts
 * as failing, for at most `l1LostFor` after its last good scrape (by then Route53 has moved
 * its clients); a proxy that carried nothing (the standby AZ at zero, an AZ whose traffic
 * was shifted away first) adds nothing, and a deleted pod (no target any more) neither.
 *
 * Recording rules give each SLI's request rate and bad-event ratio over 5m … 3d; the alerts
 * page at 14.4× (1 h and 5 m) or 6× (6 h and 30 m) the budget's burn, open a ticket at 3×
 * (1 d and 2 h) or 1× (3 d and 6 h), and only with `sloMinRequests` requests in the long
 * window (one failure in ten requests at night is not an outage).
 */
import { L1_BACKENDS_MATCHER } from "../../../contracts/names";
import { durationSeconds, type AlertThresholds } from "../thresholds";
import { pct, type AlertSpec, type RecordingRule, type RuleGroupSpec } from "./common";

export const SLO_WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"] as const;
export type SloWindow = (typeof SLO_WINDOWS)[number];
const SECONDS: Record<SloWindow, number> = { "5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200 };

/** Burn rates: [factor, long window, short window]. */
export const PAGE_BURNS: readonly [number, SloWindow, SloWindow][] = [
  [14.4, "1h", "5m"],
  [6, "6h", "30m"],
];
export const TICKET_BURNS: readonly [number, SloWindow, SloWindow][] = [
  [3, "1d", "2h"],
  [1, "3d", "6h"],
];

export type Sli = "l1" | "ttft";
/** Recorded series: `<level>:llmha_<sli>_<what>:rate<window>`. */
export const sloSeries = (level: "cluster" | "cluster_az", sli: Sli, what: "requests" | "errors" | "error_ratio", w: SloWindow): string =>
  `${level}:llmha_${sli}_${what}:rate${w}`;

const num = (x: number): string => String(+x.toPrecision(6));

/** A window's length under `sloTimeScale` (whole seconds, at least 1). */
const scaledSeconds = (seconds: number, scale: number): number => Math.max(1, Math.round(seconds * scale));
/** The PromQL range of a window: its nominal name, or seconds when scaled. */
const range = (w: SloWindow, scale: number): string => (scale === 1 ? w : `${scaledSeconds(SECONDS[w], scale)}s`);

/** Each L1 target's request rate between its last two scrapes, recorded only while it is up. */
export const L1_TARGET_RATE = "cluster_az_instance:llmha_l1_requests:irate";
/** Requests per second failing now at L1 proxies that are gone (0 for every AZ with an L1 target in the last 3 d). */
export const L1_LOST_RATE = "cluster_az:llmha_l1_lost_requests:rate";

/** `a + b` where both exist, else whichever does (series keyed by cluster and az). */
const plus = (a: string, b: string): string => `(${a}) + (${b}) or (${a}) or (${b})`;

/** `le` as either exporter writes it: prom-client `1`, Python's prometheus_client `1.0`. */
function leMatcher(seconds: number): string {
  const s = num(seconds);
  return s.includes(".") ? `le="${s}"` : `le=~"${s}(\\\\.0)?"`;
}

function windowRules(sli: Sli, w: SloWindow, requests: string, errors: string): RecordingRule[] {
  const r = (level: "cluster" | "cluster_az", what: "requests" | "errors" | "error_ratio") => sloSeries(level, sli, what, w);
  return [
    { record: r("cluster_az", "requests"), expr: requests },
    { record: r("cluster_az", "errors"), expr: errors },
    { record: r("cluster_az", "error_ratio"), expr: `${r("cluster_az", "errors")} / ${r("cluster_az", "requests")}` },
    { record: r("cluster", "requests"), expr: `sum by (cluster) (${r("cluster_az", "requests")})` },
    { record: r("cluster", "error_ratio"), expr: `sum by (cluster) (${r("cluster_az", "errors")}) / ${r("cluster", "requests")}` },
  ];
}

/**
 * The lost traffic at L1 proxies that are gone: a target's irate recorded while it is up; while
 * it is down, its last recorded rate (for `l1LostFor`), summed per AZ; 0 for the other AZs
 * (every AZ with an L1 target in the last 3 d) so that `avg_over_time` averages over time.
 */
export function l1LostRules(t: AlertThresholds): RecordingRule[] {
  const up = `up{job="${t.l1Job}"}`;
  const on = "on (cluster, az, instance)";
  const lostFor = `${scaledSeconds(durationSeconds(t.l1LostFor), t.sloTimeScale)}s`;
  return [
    {
      record: L1_TARGET_RATE,
      expr: `sum by (cluster, az, instance) (irate(haproxy_backend_http_responses_total{${L1_BACKENDS_MATCHER}}[2m])) and ${on} (${up} == 1)`,
    },
    {
      record: L1_LOST_RATE,
      expr:
        `sum by (cluster, az) (last_over_time(${L1_TARGET_RATE}[${lostFor}]) and ${on} (${up} == 0))` +
        ` or (group by (cluster, az) (last_over_time(${up}[${range("3d", t.sloTimeScale)}])) * 0)`,
    },
  ];
}

/** The SLIs' recording rules for every window. */
export function sloRecordingRules(t: AlertThresholds): RecordingRule[] {
  const by = "sum by (cluster, az)";
  const l1 = `haproxy_backend_http_responses_total{${L1_BACKENDS_MATCHER}`;
  const le = leMatcher(t.latencySeconds);
  return [
    ...l1LostRules(t),
    ...SLO_WINDOWS.flatMap((w) => {
      const rw = range(w, t.sloTimeScale);
      const rate = (sel: string) => `${by} (rate(${sel}[${rw}]))`;
      const lost = `avg_over_time(${L1_LOST_RATE}[${rw}])`;
      const http5xx = rate(`${l1}, code="5xx"}`);
      const l1Rules = windowRules(
        "l1",
        w,
        plus(rate(`${l1}}`), lost),
        // Streams cut after their 200 are failures the status counters never see; a gone proxy's clients fail unseen.
        plus(`(${http5xx} + ${rate(`haproxy_backend_response_errors_total{${L1_BACKENDS_MATCHER}}`)}) or ${http5xx}`, lost),
      );
      const slow = (h: string) => `(${rate(`${h}_count`)} - ${rate(`${h}_bucket{${le}}`)})`;
      const ttftRules = windowRules(
        "ttft",
        w,
        `${rate("vllm:time_to_first_token_seconds_count")} or ${rate("llmha_probe_latency_seconds_count")}`,
        `${slow("vllm:time_to_first_token_seconds")} or ${slow("llmha_probe_latency_seconds")}`,
      );
      return [...l1Rules, ...ttftRules];
    }),
  ];
}

function burnExpr(sli: Sli, level: "cluster" | "cluster_az", budget: number, burns: readonly [number, SloWindow, SloWindow][], minRequests: number, scale: number): string {
  const on = level === "cluster" ? "cluster" : "cluster, az";
  return burns
    .map(([factor, long, short]) => {
      const limit = num(factor * budget);
      return (
        `(${sloSeries(level, sli, "error_ratio", long)} > ${limit} and on (${on}) ${sloSeries(level, sli, "error_ratio", short)} > ${limit}` +
        ` and on (${on}) ${sloSeries(level, sli, "requests", long)} * ${scaledSeconds(SECONDS[long], scale)} >= ${minRequests})`
      );
    })
    .join(" or ");
}

interface SloDef {
  sli: Sli;
  name: "Availability" | "Latency";
  objective: number;
  what: string;
  runbook: string;
}

export function sloAlerts(t: AlertThresholds): AlertSpec[] {
  const defs: SloDef[] = [
    {
      sli: "l1",
      name: "Availability",
      objective: t.availabilityObjective,
      what: `of inference requests through L1 succeed (not 5xx, not cut)`,
      runbook:
        "the dashboard's user impact row (which AZ, since when); HAProxy stats (:8404/stats): local servers DOWN, backups, queue; the AZ state and tier; then the inference pods' logs.",
    },
    {
      sli: "ttft",
      name: "Latency",
      objective: t.latencyObjective,
      what: `of inference requests get their first token within ${t.latencySeconds} s`,
      runbook: "the dashboard's latency and queue panels (which AZ, which nodes); engine queue and KV cache; load against capacity (the standby AZ awake?); a model server roll-out.",
    },
  ];
  const out: AlertSpec[] = [];
  for (const d of defs) {
    const budget = 1 - d.objective;
    for (const [speed, severity, burns] of [
      ["Fast", "critical", PAGE_BURNS],
      ["Slow", "warning", TICKET_BURNS],
    ] as const) {
      const expr = `${burnExpr(d.sli, "cluster", budget, burns, t.sloMinRequests, t.sloTimeScale)} or ${burnExpr(d.sli, "cluster_az", budget, burns, t.sloMinRequests, t.sloTimeScale)}`;
      const rates = burns.map(([f, l, s]) => `${f}× over ${l} and ${s}`).join(", or ");
      out.push({
        alert: `LlmHa${d.name}BudgetBurn${speed}`,
        expr,
        labels: { severity, slo: d.name.toLowerCase() },
        annotations: {
          summary: `${d.name} SLO: the error budget burns ${speed === "Fast" ? "fast" : "steadily"} in {{ $labels.cluster }}{{ if $labels.az }} {{ $labels.az }}{{ end }} ({{ $value | humanizePercentage }} bad)`,
          description:
            `The objective is ${pct(d.objective)} ${d.what} over 30 days; the budget burns at ${rates} ` +
            `(${speed === "Fast" ? "at 14.4× a month's budget is gone in about 2 days" : "at 1× it lasts exactly the month"}).`,
          runbook: d.runbook,
        },
      });
    }
  }
  return out;
}

export function sloRules(t: AlertThresholds): RuleGroupSpec[] {
  return [
    { name: "llm-ha.slo.recording", rules: sloRecordingRules(t) },
    { name: "llm-ha.slo", rules: sloAlerts(t) },
  ];
}
