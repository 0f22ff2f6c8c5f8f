/**
 * The shipped alert rules under the real `promtool` (Debian `prometheus`): `check rules`,
 * then `test rules` with unit tests written here that feed series and assert which
 * alerts fire — on each fault — and which stay silent: on healthy series, on short blips
 * shorter than `for:`, and on a former leader's stale series.
 */
import { describe, expect, it } from "vitest";
import { alertNames, alertRuleGroups, runbookAnchor } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type Series, type TestGroup } from "./promtool-cases";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RULES_FILE, rulesFileText } from "../../infra/observability/manifests";
import { promtool } from "./promql";

const HAVE = havePromtool();
if (!HAVE) console.warn("promtool not found: skipping the promtool tests (apt-get install -y prometheus)");

// us-east-1c is the standby AZ of these tests (as `llm-ha:standbyAz` makes it in a stack).
const groups = alertRuleGroups({ standbyAz: "us-east-1c" });
const cases = new Cases(groups);
const rules = cases.rules;
const fires = cases.fires.bind(cases);

const C = "c1";
const node = (n: string, az: string) => ({ cluster: C, az, node: n });
const leaderSeries = (leader: string, other: string, values = "1x80", otherValues = "0x80"): Series[] => [
  s("llmha_leader", node(leader, "a"), values),
  s("llmha_leader", node(other, "b"), otherValues),
];

const TESTS: TestGroup[] = [
  {
    name: "node status: out for a minute fires, a 30 s blip and healthy nodes stay silent",
    interval: "15s",
    input_series: [
      s("llmha_node_status", { ...node("n1", "a"), status: "UNHEALTHY" }, "0 1x20"),
      s("llmha_node_status", { ...node("n2", "a"), status: "UNREACHABLE" }, "0 1 1 0x20"),
      s("llmha_node_status", { ...node("n3", "b"), status: "HEALTHY" }, "1x20"),
      s("llmha_node_status", { ...node("n3", "b"), status: "UNHEALTHY" }, "0x20"),
      s("llmha_node_status", { ...node("n4", "b"), status: "UNKNOWN" }, "1x30"),
      s("llmha_node_status", { ...node("n5", "a"), status: "UNKNOWN" }, "1x4 0x30"),
    ],
    alert_rule_test: [
      at("45s", "LlmHaNodeUnhealthy"),
      at("2m", "LlmHaNodeUnhealthy", fires("LlmHaNodeUnhealthy", { ...node("n1", "a"), status: "UNHEALTHY" })),
      at("2m", "LlmHaNodeStatusUnknown"),
      at("6m", "LlmHaNodeStatusUnknown", fires("LlmHaNodeStatusUnknown", node("n4", "b"))),
    ],
  },
  {
    name: "probe latency: P95 over 2 s for 5 minutes fires; one slow probe in 200 does not",
    interval: "15s",
    input_series: [
      // n1: every probe takes ~3 s (bucket 2–5 s); P95 interpolates to 2 + 3 × 0.95 = 4.85 s.
      ...[
        ["0.25", "0+0x60"],
        ["2", "0+0x60"],
        ["5", "0+10x60"],
        ["+Inf", "0+10x60"],
      ].map(([le, v]) => s("llmha_probe_latency_seconds_bucket", { ...node("n1", "a"), le }, v)),
      // n2: fast, except one probe of ~3 s at 2 minutes.
      ...[
        ["0.25", "0+10x60"],
        ["2", "0+10x60"],
        ["5", "0+10x7 81+10x52"],
        ["+Inf", "0+10x7 81+10x52"],
      ].map(([le, v]) => s("llmha_probe_latency_seconds_bucket", { ...node("n2", "a"), le }, v)),
    ],
    alert_rule_test: [
      at("4m", "LlmHaProbeLatencyHigh"),
      at("6m", "LlmHaProbeLatencyHigh", fires("LlmHaProbeLatencyHigh", node("n1", "a"), "4.85s")),
      at("10m", "LlmHaProbeLatencyHigh", fires("LlmHaProbeLatencyHigh", node("n1", "a"), "4.85s")),
    ],
  },
  {
    name: "GPU faults: hardware codes fire at once and hold 5 minutes; soft codes do not",
    interval: "15s",
    input_series: [
      s("llmha_node_reason_active", { ...node("n1", "a"), code: "GPU_ECC_UNCORRECTED" }, "0x3 1 0x40"),
      s("llmha_node_reason_active", { ...node("n2", "a"), code: "GPU_ROW_REMAP_FAILURE" }, "0 1x60"),
      s("llmha_node_reason_active", { ...node("n3", "b"), code: "PROBE_SLOW" }, "1x60"),
      s("llmha_node_reason_active", { ...node("n3", "b"), code: "GPU_ROW_REMAP_PENDING" }, "1x60"),
      s("llmha_node_reason_active", { ...node("n4", "b"), code: "GPU_RETIRED_PAGES_PENDING" }, "1x8 0x40"),
    ],
    alert_rule_test: [
      at("0s", "LlmHaGpuHardwareFault"),
      at(
        "1m",
        "LlmHaGpuHardwareFault",
        fires("LlmHaGpuHardwareFault", { ...node("n1", "a"), code: "GPU_ECC_UNCORRECTED" }),
        fires("LlmHaGpuHardwareFault", { ...node("n2", "a"), code: "GPU_ROW_REMAP_FAILURE" }),
      ),
      at("7m", "LlmHaGpuHardwareFault", fires("LlmHaGpuHardwareFault", { ...node("n2", "a"), code: "GPU_ROW_REMAP_FAILURE" })),
      at("5m", "LlmHaGpuResetPending"),
      at("11m", "LlmHaGpuResetPending", fires("LlmHaGpuResetPending", { ...node("n3", "b"), code: "GPU_ROW_REMAP_PENDING" })),
    ],
  },
  {
    name: "AZ capacity: the leader's view below 75 % fires; a dip, a stale former leader, the standby AZ at zero and an empty AZ do not",
    interval: "15s",
    input_series: [
      ...leaderSeries("n1", "n2"),
      s("llmha_az_healthy_capacity", { ...node("n1", "a"), az: "us-east-1a" }, "8 4x40"),
      s("llmha_az_total_capacity", { ...node("n1", "a"), az: "us-east-1a" }, "8x40"),
      s("llmha_az_healthy_capacity", { ...node("n1", "a"), az: "us-east-1b" }, "8 8 4 4 8x40"),
      s("llmha_az_total_capacity", { ...node("n1", "a"), az: "us-east-1b" }, "8x40"),
      // the standby AZ at night: its stopped nodes still count in the total until forgotten
      s("llmha_az_healthy_capacity", { ...node("n1", "a"), az: "us-east-1c" }, "0x40"),
      s("llmha_az_total_capacity", { ...node("n1", "a"), az: "us-east-1c" }, "16x40"),
      // an AZ with no capacity at all has no ratio to judge
      s("llmha_az_healthy_capacity", { ...node("n1", "a"), az: "us-east-1d" }, "0x40"),
      s("llmha_az_total_capacity", { ...node("n1", "a"), az: "us-east-1d" }, "0x40"),
      // n2 led before and still exports what it last saw.
      s("llmha_az_healthy_capacity", { ...node("n2", "b"), az: "us-east-1b" }, "0x40"),
      s("llmha_az_total_capacity", { ...node("n2", "b"), az: "us-east-1b" }, "8x40"),
    ],
    alert_rule_test: [
      at("1m", "LlmHaAzCapacityLow"),
      at("4m", "LlmHaAzCapacityLow", fires("LlmHaAzCapacityLow", { cluster: C, az: "us-east-1a" }, "50%")),
    ],
  },
  {
    name: "tiers: L2 fires after a minute, L3 after 30 s, L4 at once; a 30 s L2 and a stale L4 stay silent",
    interval: "15s",
    input_series: [
      ...leaderSeries("n1", "n2"),
      s("llmha_tier_level", node("n1", "a"), "0x3 2 2 0x4 2x8 3x4 4x4 0x20"),
      s("llmha_tier_level", node("n2", "b"), "4x60"),
    ],
    alert_rule_test: [
      ...silent("1m30s", "LlmHaTierElevated", "LlmHaZoneFailedOver", "LlmHaGlobalOutage"),
      at("3m45s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
      at("3m45s", "LlmHaZoneFailedOver"),
      at("5m15s", "LlmHaZoneFailedOver"),
      at("5m30s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "3")),
      at("5m30s", "LlmHaZoneFailedOver", fires("LlmHaZoneFailedOver", { cluster: C }, "3")),
      at("6m15s", "LlmHaGlobalOutage", fires("LlmHaGlobalOutage", { cluster: C })),
      at("6m15s", "LlmHaZoneFailedOver", fires("LlmHaZoneFailedOver", { cluster: C }, "4")),
      ...silent("7m30s", "LlmHaTierElevated", "LlmHaGlobalOutage"),
    ],
  },
  {
    name: "leadership: none for over a minute fires, a hand-over does not; churn over 3 terms in 10 minutes fires",
    interval: "15s",
    input_series: [
      // c1: n1 leads, hands over to n2 after a 30 s gap.
      s("llmha_leader", { ...node("n1", "a") }, "1x8 0x40"),
      s("llmha_leader", { ...node("n2", "b") }, "0x10 1x40"),
      s("llmha_lease_acquisitions_total", node("n1", "a"), "1x60"),
      s("llmha_lease_acquisitions_total", node("n2", "b"), "0x10 1x40"),
      // c2: nobody leads.
      s("llmha_leader", { cluster: "c2", az: "a", node: "m1" }, "0x40"),
      s("llmha_leader", { cluster: "c2", az: "b", node: "m2" }, "0x40"),
      // c3: the lease goes back and forth every 30 s.
      s("llmha_lease_acquisitions_total", { cluster: "c3", az: "a", node: "k1" }, "0 0 1 1 1 1 2 2 2 2 3 3 3 3 4x30"),
      s("llmha_lease_acquisitions_total", { cluster: "c3", az: "b", node: "k2" }, "0 0 0 0 1 1 1 1 2 2 2 2 3 3 3x30"),
    ],
    alert_rule_test: [
      at("3m", "LlmHaNoLeader", fires("LlmHaNoLeader", { cluster: "c2" })),
      at("4m", "LlmHaLeaderChurn", fires("LlmHaLeaderChurn", { cluster: "c3" })),
    ],
  },
  {
    name: "blast-radius cap: the leader's suspect check for a minute fires; a blip and a former leader's stale flag do not",
    interval: "15s",
    input_series: [
      ...leaderSeries("n1", "n2"),
      s("llmha_blast_radius_suspect", { ...node("n1", "a"), check: "PROBE_SLOW" }, "0 1x20"),
      s("llmha_blast_radius_suspect", { ...node("n1", "a"), check: "PROBE_FAILED" }, "0 1 1 0x20"),
      s("llmha_blast_radius_suspect", { ...node("n2", "b"), check: "PROBE_TIMEOUT" }, "1x20"),
    ],
    alert_rule_test: [at("45s", "LlmHaBlastRadiusCapTripped"), at("2m", "LlmHaBlastRadiusCapTripped", fires("LlmHaBlastRadiusCapTripped", { cluster: C, check: "PROBE_SLOW" }))],
  },
  {
    name: "standby: still at zero 15 minutes into L2 fires; waking in time or no wake wanted does not",
    interval: "1m",
    input_series: [
      ...["c1", "c2", "c3"].map((c) => s("llmha_leader", { cluster: c, az: "a", node: "n1" }, "1x20")),
      s("llmha_tier_level", { cluster: "c1", az: "a", node: "n1" }, "2x20"),
      s("llmha_standby_wake", { cluster: "c1", az: "a", node: "n1" }, "1x20"),
      s("llmha_standby_healthy_capacity", { cluster: "c1", az: "a", node: "n1" }, "0x20"),
      s("llmha_tier_level", { cluster: "c2", az: "a", node: "n1" }, "2x20"),
      s("llmha_standby_wake", { cluster: "c2", az: "a", node: "n1" }, "1x20"),
      s("llmha_standby_healthy_capacity", { cluster: "c2", az: "a", node: "n1" }, "0x9 8x10"),
      s("llmha_tier_level", { cluster: "c3", az: "a", node: "n1" }, "2x20"),
      s("llmha_standby_wake", { cluster: "c3", az: "a", node: "n1" }, "0x20"),
      s("llmha_standby_healthy_capacity", { cluster: "c3", az: "a", node: "n1" }, "0x20"),
    ],
    alert_rule_test: [at("14m", "LlmHaStandbyNotWaking"), at("16m", "LlmHaStandbyNotWaking", fires("LlmHaStandbyNotWaking", { cluster: "c1" }))],
  },
  {
    name: "agents: a target down for 2 minutes fires, a restart does not; Redis lost by one node vs by most",
    interval: "15s",
    input_series: [
      s("up", { ...node("n1", "a"), job: "llm-ha-agent" }, "1 0x20"),
      s("up", { ...node("n2", "a"), job: "llm-ha-agent" }, "1 0x3 1x20"),
      s("up", { ...node("n3", "b"), job: "llm-ha-agent" }, "1x20"),
      s("llmha_redis_connected", node("n1", "a"), "1 0x20"),
      s("llmha_redis_connected", node("n2", "a"), "1 0 0 1x20"),
      s("llmha_redis_connected", node("n3", "b"), "1x20"),
      ...["m1", "m2", "m3"].map((n, i) => s("llmha_redis_connected", { cluster: "c2", az: "a", node: n }, i === 0 ? "1x20" : "0x20")),
    ],
    alert_rule_test: [
      at("1m", "LlmHaAgentDown"),
      at("3m", "LlmHaAgentDown", fires("LlmHaAgentDown", { ...node("n1", "a"), job: "llm-ha-agent" })),
      at("3m", "LlmHaAgentsMissing"),
      at(
        "3m",
        "LlmHaRedisUnreachable",
        fires("LlmHaRedisUnreachable", node("n1", "a")),
        fires("LlmHaRedisUnreachable", { cluster: "c2", az: "a", node: "m2" }),
        fires("LlmHaRedisUnreachable", { cluster: "c2", az: "a", node: "m3" }),
      ),
      at("3m", "LlmHaRedisUnreachableFleet", fires("LlmHaRedisUnreachableFleet", { cluster: "c2" })),
    ],
  },
  {
    name: "agents: a loop stuck past 30 s for 2 minutes fires; a slow evaluation does not",
    interval: "15s",
    input_series: [
      s("llmha_evaluation_age_seconds", node("n1", "a"), "1 2 1 0+15x20"),
      s("llmha_evaluation_age_seconds", node("n2", "a"), "1 45 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"),
    ],
    alert_rule_test: [
      at("1m", "LlmHaAgentStalled"),
      at("5m", "LlmHaAgentStalled", fires("LlmHaAgentStalled", node("n1", "a"))),
    ],
  },
  {
    name: "agents: no agent target at all for 10 minutes fires",
    interval: "1m",
    input_series: [s("up", { job: "node-exporter", instance: "x" }, "1x15")],
    alert_rule_test: [at("5m", "LlmHaAgentsMissing"), at("12m", "LlmHaAgentsMissing", fires("LlmHaAgentsMissing", { job: "llm-ha-agent" }))],
  },
  {
    name: "L1 data missing: no proxy scraped, a proxy down, an AZ's proxy with no usable server (issue 19 item 5)",
    interval: "15s",
    input_series: [
      // c1: proxies up; the one in az a has neither own-AZ nor backup servers UP after 1 minute.
      s("up", { cluster: C, az: "a", instance: "10.0.0.1:8404", job: "l1-proxy" }, "1x40"),
      s("up", { cluster: C, az: "b", instance: "10.0.1.1:8404", job: "l1-proxy" }, "1 0x40"),
      s("haproxy_backend_active_servers", { cluster: C, az: "a", instance: "10.0.0.1:8404", proxy: "inference_servers" }, "2 2 2 2 0x40"),
      s("haproxy_backend_backup_servers", { cluster: C, az: "a", instance: "10.0.0.1:8404", proxy: "inference_servers" }, "4 4 4 4 0x40"),
      s("haproxy_backend_active_servers", { cluster: C, az: "c", instance: "10.0.2.1:8404", proxy: "inference_servers" }, "0x40"),
      s("haproxy_backend_backup_servers", { cluster: C, az: "c", instance: "10.0.2.1:8404", proxy: "inference_servers" }, "3x40"),
      // another backend with no servers is not the L1 one
      s("haproxy_backend_active_servers", { cluster: C, az: "c", instance: "10.0.2.1:8404", proxy: "az_health_agents" }, "0x40"),
      s("haproxy_backend_backup_servers", { cluster: C, az: "c", instance: "10.0.2.1:8404", proxy: "az_health_agents" }, "0x40"),
    ],
    alert_rule_test: [
      at("1m30s", "LlmHaL1NoUsableServers"),
      at("3m", "LlmHaL1NoUsableServers", fires("LlmHaL1NoUsableServers", { cluster: C, az: "a", instance: "10.0.0.1:8404" })),
      at("1m30s", "LlmHaL1ProxyDown"),
      at("3m", "LlmHaL1ProxyDown", fires("LlmHaL1ProxyDown", { cluster: C, az: "b", instance: "10.0.1.1:8404", job: "l1-proxy" })),
      at("8m", "LlmHaL1ProxiesMissing"),
    ],
  },
  {
    name: "L1 data missing: no l1-proxy target at all for 5 minutes fires",
    interval: "1m",
    input_series: [s("up", { job: "llm-ha-agent", instance: "x" }, "1x15")],
    alert_rule_test: [at("4m", "LlmHaL1ProxiesMissing"), at("7m", "LlmHaL1ProxiesMissing", fires("LlmHaL1ProxiesMissing", {}))],
  },
  {
    name: "model loading is no page (issue 19 item 4): UNHEALTHY while MODEL_LOADING stays silent; a load past 30m fires LlmHaModelLoadStuck",
    interval: "1m",
    input_series: [
      // n1 loads for 10 minutes (scale-out), then serves.
      s("llmha_node_status", { ...node("n1", "a"), status: "UNHEALTHY" }, "1x10 0x40"),
      s("llmha_node_reason_active", { ...node("n1", "a"), code: "MODEL_LOADING" }, "1x10 0x40"),
      // n2 never finishes loading.
      s("llmha_node_status", { ...node("n2", "b"), status: "UNHEALTHY" }, "1x50"),
      s("llmha_node_reason_active", { ...node("n2", "b"), code: "MODEL_LOADING" }, "1x50"),
      // n3 has a real fault (its model crashed) after loading.
      s("llmha_node_status", { ...node("n3", "b"), status: "UNHEALTHY" }, "1x50"),
      s("llmha_node_reason_active", { ...node("n3", "b"), code: "MODEL_LOADING" }, "1x5 0x45"),
      s("llmha_node_reason_active", { ...node("n3", "b"), code: "PROCESS_GONE" }, "0x5 1x45"),
    ],
    alert_rule_test: [
      at("4m", "LlmHaNodeUnhealthy"),
      at("9m", "LlmHaNodeUnhealthy", fires("LlmHaNodeUnhealthy", { ...node("n3", "b"), status: "UNHEALTHY" })),
      at("25m", "LlmHaModelLoadStuck"),
      at("32m", "LlmHaModelLoadStuck", fires("LlmHaModelLoadStuck", node("n2", "b"))),
    ],
  },
  {
    name: "leader change (issue 19 item 3): the tier held at L2 across a hand-over keeps LlmHaTierElevated firing",
    interval: "15s",
    input_series: [
      // n1 leads until 5m, nobody for 30 s, then n2.
      s("llmha_leader", node("n1", "a"), "1x19 0x40"),
      s("llmha_leader", node("n2", "b"), "0x21 1x40"),
      s("llmha_tier_level", node("n1", "a"), "2x60"),
      s("llmha_tier_level", node("n2", "b"), "0x21 2x40"),
    ],
    alert_rule_test: [
      at("2m", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
      at("5m15s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
      at("5m30s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
      at("6m15s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
      at("6m45s", "LlmHaTierElevated", fires("LlmHaTierElevated", { cluster: C }, "2")),
    ],
  },
  {
    name: "leader change: L4 after L3 keeps LlmHaZoneFailedOver (inhibited by LlmHaGlobalOutage, not resolved); capacity and suspect checks bridge a hand-over",
    interval: "15s",
    input_series: [
      s("llmha_leader", node("n1", "a"), "1x19 0x40"),
      s("llmha_leader", node("n2", "b"), "0x21 1x40"),
      s("llmha_tier_level", node("n1", "a"), "3x8 4x60"),
      s("llmha_tier_level", node("n2", "b"), "0x21 4x40"),
      s("llmha_az_healthy_capacity", { ...node("n1", "a"), az: "us-east-1a" }, "2x60"),
      s("llmha_az_total_capacity", { ...node("n1", "a"), az: "us-east-1a" }, "8x60"),
      s("llmha_az_healthy_capacity", { ...node("n2", "b"), az: "us-east-1a" }, "0x21 2x40"),
      s("llmha_az_total_capacity", { ...node("n2", "b"), az: "us-east-1a" }, "0x21 8x40"),
      s("llmha_blast_radius_suspect", { ...node("n1", "a"), check: "PROBE_SLOW" }, "1x60"),
      s("llmha_blast_radius_suspect", { ...node("n2", "b"), check: "PROBE_SLOW" }, "0x21 1x40"),
    ],
    alert_rule_test: [
      at("3m", "LlmHaZoneFailedOver", fires("LlmHaZoneFailedOver", { cluster: C }, "4")),
      at("5m30s", "LlmHaZoneFailedOver", fires("LlmHaZoneFailedOver", { cluster: C }, "4")),
      at("5m30s", "LlmHaGlobalOutage", fires("LlmHaGlobalOutage", { cluster: C })),
      at("5m30s", "LlmHaAzCapacityLow", fires("LlmHaAzCapacityLow", { cluster: C, az: "us-east-1a" }, "25%")),
      at("5m30s", "LlmHaBlastRadiusCapTripped", fires("LlmHaBlastRadiusCapTripped", { cluster: C, check: "PROBE_SLOW" })),
    ],
  },
  {
    name: "standby capacity unavailable (issue 15): the leader's word under L2 fires after a minute; a former leader's stale gauge and a practice at L0 do not",
    interval: "1m",
    input_series: [
      ...leaderSeries("n1", "n2", "1x30", "0x30"),
      s("llmha_standby_capacity_unavailable", { ...node("n1", "a"), kind: "aws" }, "0x4 1x25"),
      s("llmha_tier_level", node("n1", "a"), "2x30"),
      // n2 led before and kept its gauge at 1.
      s("llmha_standby_capacity_unavailable", { ...node("n2", "b"), kind: "aws" }, "1x30"),
      s("llmha_tier_level", node("n2", "b"), "2x30"),
      // Another cluster at L0: its practice cannot get capacity (LlmHaPracticeWakeFailed speaks for it).
      s("llmha_leader", { cluster: "c2", az: "a", node: "m1" }, "1x30"),
      s("llmha_standby_capacity_unavailable", { cluster: "c2", az: "a", node: "m1", kind: "aws" }, "1x30"),
      s("llmha_tier_level", { cluster: "c2", az: "a", node: "m1" }, "0x30"),
    ],
    alert_rule_test: [
      at("4m", "LlmHaStandbyCapacityUnavailable"),
      at("5m", "LlmHaStandbyCapacityUnavailable"),
      at("7m", "LlmHaStandbyCapacityUnavailable", fires("LlmHaStandbyCapacityUnavailable", { cluster: C })),
    ],
  },
  {
    name: "foreign cloud actions (issue 26): the leader's audit seeing one fires at once and holds while it stands; a former leader's stale gauge does not; a sighting counted and gone within 15 m still fires",
    interval: "1m",
    input_series: [
      ...leaderSeries("n1", "n2", "1x30", "0x30"),
      s("llmha_foreign_actions_active", { ...node("n1", "a"), kind: "shift" }, "0x4 1x5 0x20"),
      s("llmha_foreign_actions_total", { ...node("n1", "a"), kind: "shift" }, "0x4 1x25"),
      s("llmha_foreign_actions_active", { ...node("n1", "a"), kind: "standby" }, "0x30"),
      s("llmha_foreign_actions_total", { ...node("n1", "a"), kind: "standby" }, "0x30"),
      // n2 led before: its gauge is stale (its counter never moved).
      s("llmha_foreign_actions_active", { ...node("n2", "b"), kind: "standby" }, "1x30"),
      s("llmha_foreign_actions_total", { ...node("n2", "b"), kind: "standby" }, "0x30"),
    ],
    alert_rule_test: [
      at("3m", "LlmHaForeignCloudAction"),
      at("5m", "LlmHaForeignCloudAction", fires("LlmHaForeignCloudAction", { cluster: C, kind: "shift" })),
      // Cancelled at 10 m: the 15 m increase keeps it until the counter's rise leaves the window.
      at("12m", "LlmHaForeignCloudAction", fires("LlmHaForeignCloudAction", { cluster: C, kind: "shift" })),
      at("25m", "LlmHaForeignCloudAction"),
    ],
  },
  {
    name: "practice wakes (issue 15): a failed practice fires until one serves, whichever agent recorded it; the last served practice slower than 15 m fires",
    interval: "1m",
    input_series: [
      // c1: served at t=1000 s, failed at 5 m (t=2000 s), served again at 20 m (t=3000 s) by another agent.
      s("llmha_practice_last_timestamp_seconds", { ...node("n1", "a"), outcome: "served" }, "1000x30"),
      s("llmha_practice_last_timestamp_seconds", { ...node("n1", "a"), outcome: "failed" }, "_ _ _ _ _ 2000x25"),
      s("llmha_practice_last_timestamp_seconds", { ...node("n2", "b"), outcome: "served" }, "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 3000x10"),
      s("llmha_practice_last_wake_seconds", node("n1", "a"), "300x30"),
      s("llmha_practice_last_wake_seconds", node("n2", "b"), "0x19 1020x10"),
      // An agent that never practised exports 0 and no timestamp.
      s("llmha_practice_last_wake_seconds", node("n3", "a"), "0x30"),
      // c2: one practice, failed, never one served.
      s("llmha_practice_last_timestamp_seconds", { cluster: "c2", az: "a", node: "m1", outcome: "failed" }, "4000x30"),
    ],
    alert_rule_test: [
      at("3m", "LlmHaPracticeWakeFailed", fires("LlmHaPracticeWakeFailed", { cluster: "c2" })),
      at("10m", "LlmHaPracticeWakeFailed", fires("LlmHaPracticeWakeFailed", { cluster: C }), fires("LlmHaPracticeWakeFailed", { cluster: "c2" })),
      at("25m", "LlmHaPracticeWakeFailed", fires("LlmHaPracticeWakeFailed", { cluster: "c2" })),
      at("10m", "LlmHaPracticeWakeSlow"),
      // The newest served practice (n2's, 17 min) is over 15 m; n1's older 5-minute one does not hide it.
      at("25m", "LlmHaPracticeWakeSlow", fires("LlmHaPracticeWakeSlow", { cluster: C }, "17m 0s")),
    ],
  },
  {
    name: "leader change: the standby's 'wanted since' survives hand-overs every 4 minutes; LlmHaStandbyNotWaking fires at 15 m, not later or never",
    interval: "15s",
    input_series: [
      // The lease changes hands every 4 minutes with a 30 s gap: n1 0–4m, n2 4m30–8m30, n1 9m–13m, n2 13m30–…
      s("llmha_leader", node("n1", "a"), "1x15 0x19 1x15 0x40"),
      s("llmha_leader", node("n2", "b"), "0x17 1x15 0x19 1x40"),
      ...["n1", "n2"].flatMap((n, i) => {
        const l = node(n, i ? "b" : "a");
        return [s("llmha_tier_level", l, "2x100"), s("llmha_standby_wake", l, "1x100"), s("llmha_standby_healthy_capacity", l, "0x100")];
      }),
    ],
    alert_rule_test: [at("14m", "LlmHaStandbyNotWaking"), at("16m", "LlmHaStandbyNotWaking", fires("LlmHaStandbyNotWaking", { cluster: C }))],
  },
];

// Issue 16: the leader's count of nodes serving another model than the majority.
TESTS.push({
  name: "model mismatch: the leader's outlier count for 30 minutes fires; a shorter roll-out and a former leader's stale count do not",
  interval: "1m",
  input_series: [
    ...leaderSeries("n1", "n2", "1x120", "0x120"),
    // Outliers from 6 m to 46 m (fires at 36 m), gone, then a 20-minute roll-out from 58 m to 78 m.
    s("llmha_model_outlier_nodes", node("n1", "a"), "0x5 2x40 0x10 1x20 0x40"),
    // n2 led before and kept its last count: not the leader's view.
    s("llmha_model_outlier_nodes", node("n2", "b"), "3x120"),
  ],
  alert_rule_test: [
    at("30m", "LlmHaModelMismatch"),
    at("40m", "LlmHaModelMismatch", fires("LlmHaModelMismatch", { cluster: C }, "2")),
    at("55m", "LlmHaModelMismatch"),
    at("78m", "LlmHaModelMismatch"),
  ],
});

// Issue 32: a node drained for wrong canary answers; most of the fleet disagreeing with the expectation (capped, no drain).
TESTS.push({
  name: "canaries: a CANARY_MISMATCH drain fires at once; capped nodes for 5 minutes fire the fleet alert",
  interval: "1m",
  input_series: [
    s("llmha_node_reason_active", { ...node("n1", "a"), code: "CANARY_MISMATCH" }, "0x2 1x5 0x5"),
    s("llmha_canary_phase", { ...node("n2", "a"), phase: "capped" }, "0x2 1x10"),
    s("llmha_canary_phase", { ...node("n3", "b"), phase: "capped" }, "0x2 1x10"),
  ],
  alert_rule_test: [
    at("1m", "LlmHaCanaryMismatch"),
    at("4m", "LlmHaCanaryMismatch", fires("LlmHaCanaryMismatch", { ...node("n1", "a") })),
    at("10m", "LlmHaCanaryMismatch"),
    at("5m", "LlmHaCanaryFleetDisagrees"),
    at("8m", "LlmHaCanaryFleetDisagrees", fires("LlmHaCanaryFleetDisagrees", { cluster: C }, "2")),
  ],
});

describe("runbooks", () => {
  it("every runbook_url points at a section of docs/observability.md named after its alert", () => {
    const doc = readFileSync(join(__dirname, "../../docs/observability.md"), "utf8");
    const headings = new Set([...doc.matchAll(/^### (\S+)$/gm)].map((m) => runbookAnchor(m[1])));
    for (const r of rules.values()) {
      const anchor = r.annotations.runbook_url.split("#")[1];
      expect(headings.has(anchor), `${r.alert}: no "### ${r.alert}" in docs/observability.md`).toBe(true);
    }
  });
});

describe.skipIf(!HAVE)("alert rules under promtool", () => {
  const dir = mkdtempSync(join(tmpdir(), "llmha-check-"));
  it("promtool check rules accepts the generated file", () => {
    writeFileSync(join(dir, RULES_FILE), rulesFileText(groups));
    const r = promtool(["check", "rules", RULES_FILE], dir);
    rmSync(dir, { recursive: true, force: true });
    expect(r.out).toContain(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`);
    expect(r.code).toBe(0);
  });

  it("every alert has a severity, a summary, a description with first steps and a runbook_url, and a unit test", () => {
    const tested = new Set(TESTS.flatMap((g) => (g.alert_rule_test ?? []).filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname)));
    const slo = ["LlmHaAvailabilityBudgetBurnFast", "LlmHaAvailabilityBudgetBurnSlow", "LlmHaLatencyBudgetBurnFast", "LlmHaLatencyBudgetBurnSlow"];
    for (const r of rules.values()) {
      expect(["critical", "warning", "info"]).toContain(r.labels.severity);
      expect(r.annotations.summary.length, r.alert).toBeGreaterThan(10);
      expect(r.annotations.description, r.alert).toMatch(/ First steps: .{20,}/);
      expect(r.annotations.runbook_url, r.alert).toMatch(/^https:\/\/.+\/docs\/observability\.md#[a-z0-9]+$/);
      // The SLO alerts are tested in slo-rules.test.ts, the fallback's in fallback-alerts.test.ts.
      if (!slo.includes(r.alert) && !r.alert.startsWith("LlmHaFallback")) expect(tested.has(r.alert), `${r.alert} fires in some test`).toBe(true);
    }
    expect(alertNames(groups)).toEqual(expect.arrayContaining(slo));
  });

  it("promtool test rules: each alert fires on its fault and stays silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS);
    expect(r.out).toContain("SUCCESS");
    expect(r.code, r.out).toBe(0);
  });
});
