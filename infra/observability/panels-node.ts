/**
 * The per-node rows of the dashboard: probe and engine, GPUs, the L1 proxy (HAProxy).
 */
import { type AlertThresholds } from "./thresholds";
import { L1_BACKEND } from "../../contracts/names";
import { hq, l1, m, type RowSpec } from "./panel-spec";

export function nodeRows(t: AlertThresholds): RowSpec[] {
  const availBudget = 1 - t.availabilityObjective;
  return [
    {
      title: "Probe and engine",
      panels: [
        {
          type: "timeseries",
          title: "Probe latency P95",
          description: `P95 of the tiny completion each agent sends; the alert fires above ${t.probeLatencyP95Seconds} s for 5 minutes`,
          w: 12,
          unit: "s",
          redAbove: t.probeLatencyP95Seconds,
          alerts: ["LlmHaProbeLatencyHigh"],
          queries: [{ expr: hq(0.95, "az, node", "llmha_probe_latency_seconds"), legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Probe latency P50",
          description: "Median probe latency per node",
          w: 12,
          unit: "s",
          queries: [{ expr: hq(0.5, "az, node", "llmha_probe_latency_seconds"), legend: "{{node}}" }],
        },
        {
          type: "timeseries",
          title: "Source errors",
          description: "Results of each source (gpu, model, probe, engine, xid) that were errors or timeouts",
          w: 8,
          queries: [{ expr: `sum by (source) (rate(${m("llmha_source_errors_total")}[$__rate_interval]))`, legend: "{{source}}" }],
        },
        {
          type: "timeseries",
          title: "Engine queue",
          description: "Requests the inference engine runs and keeps waiting, per node",
          w: 8,
          queries: [
            { expr: `max by (node) (${m("llmha_engine_requests_running")})`, legend: "{{node}} running" },
            { expr: `max by (node) (${m("llmha_engine_requests_waiting")})`, legend: "{{node}} waiting" },
          ],
        },
        {
          type: "timeseries",
          title: "KV cache usage",
          description: "Share of the engine's KV cache in use",
          w: 8,
          unit: "percentunit",
          min: 0,
          max: 1,
          queries: [{ expr: `max by (node) (${m("llmha_engine_kv_cache_usage_ratio")})`, legend: "{{node}}" }],
        },
      ],
    },
    {
      title: "GPUs",
      panels: [
        {
          type: "timeseries",
          title: "GPU temperature",
          description: "Per node and GPU index",
          w: 8,
          unit: "celsius",
          redAbove: 85,
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_temperature_celsius")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "GPU power",
          description: "Power draw per node and GPU index",
          w: 8,
          unit: "watt",
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_power_watts")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "Uncorrected ECC errors",
          description: "Volatile uncorrected ECC errors; any is a hard fault that takes the node out",
          w: 8,
          redAbove: 1,
          queries: [{ expr: `max by (node, gpu) (${m("llmha_gpu_ecc_uncorrected_volatile")})`, legend: "{{node}}/{{gpu}}" }],
        },
        {
          type: "timeseries",
          title: "GPUs visible vs expected",
          description: "Fewer visible than expected is a fault (EKS treats it as XID 79)",
          w: 12,
          queries: [
            { expr: `sum by (node) (${m("llmha_gpus_visible")})`, legend: "{{node}} visible" },
            { expr: `sum by (node) (${m("llmha_gpus_expected")})`, legend: "{{node}} expected" },
          ],
        },
        {
          type: "timeseries",
          title: "GPU utilization",
          description: "Average over the node's GPUs",
          w: 12,
          unit: "percent",
          min: 0,
          max: 100,
          queries: [{ expr: `avg by (node) (${m("llmha_gpu_utilization_percent")})`, legend: "{{node}}" }],
        },
      ],
    },
    {
      title: "L1 proxy (HAProxy)",
      panels: [
        {
          type: "timeseries",
          title: "Error ratio",
          description: `Share of L1 responses that are 5xx, per AZ; at the availability objective ${t.availabilityObjective} the budget allows ${+availBudget.toPrecision(6)}`,
          w: 8,
          unit: "percentunit",
          redAbove: +availBudget.toPrecision(6),
          queries: [{ expr: `sum by (az) (rate(${l1("5xx")}[$__rate_interval])) / sum by (az) (rate(${l1()}[$__rate_interval]))`, legend: "{{az}}" }],
        },
        {
          type: "table",
          title: "Servers by state",
          description: "Each L1 proxy's servers and their state now (slots of the server-template not resolved are left out of the scrape: no-maint)",
          w: 8,
          queries: [{ expr: `max by (az, server, state) (${m("haproxy_server_status", `proxy="${L1_BACKEND}"`)}) == 1`, table: true, instant: true }],
        },
        {
          type: "timeseries",
          title: "Servers up",
          description: "Own-AZ (active) and cross-zone (backup) servers HAProxy sees UP",
          w: 8,
          alerts: ["LlmHaL1NoUsableServers"],
          queries: [
            { expr: `sum by (az) (${m("haproxy_backend_active_servers", `proxy="${L1_BACKEND}"`)})`, legend: "{{az}} active" },
            { expr: `sum by (az) (${m("haproxy_backend_backup_servers", `proxy="${L1_BACKEND}"`)})`, legend: "{{az}} backup" },
          ],
        },
      ],
    },
  ];
}
