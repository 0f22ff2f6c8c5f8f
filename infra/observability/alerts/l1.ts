import type { AlertThresholds } from "../thresholds";
import { pct, type RuleGroup } from "./common";
import { L1_BACKEND } from "../../../contracts/names";

export function l1Rules(t: AlertThresholds): RuleGroup {
  const l1 = (code?: string) =>
    `sum by (cluster, az) (rate(haproxy_backend_http_responses_total{proxy="${L1_BACKEND}"${code ? `, code="${code}"` : ""}}[5m]))`;
  return {
    name: "llm-ha.l1",
    rules: [
      {
        alert: "LlmHaL1ErrorRateHigh",
        expr: `${l1("5xx")} / ${l1()} > ${t.l1ErrorRatio}`,
        for: "5m",
        labels: { severity: "critical" },
        annotations: {
          summary: "{{ $value | humanizePercentage }} of requests fail at the L1 proxy in {{ $labels.az }}",
          description: `Over ${pct(t.l1ErrorRatio)} of the responses HAProxy returned for ${L1_BACKEND} were 5xx for 5 minutes: clients see errors.`,
          runbook: "HAProxy stats (:8404/stats) for servers DOWN; if all local servers are down check the backups and the AZ state; else the inference pods' logs.",
        },
      },
    ],
  };
}
