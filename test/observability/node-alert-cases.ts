/**
 * The first half of the alert rules' promtool cases (node, fleet and agent alerts), split out of
 * rules.test.ts to keep each file readable; the helpers both halves build their series with.
 */
import { at, type Cases, s, silent, type Series, type TestGroup } from "./promtool-cases";

export const C = "c1";
export const node = (n: string, az: string) => ({ cluster: C, az, node: n });
export const leaderSeries = (leader: string, other: string, values = "1x80", otherValues = "0x80"): Series[] => [
  s("llmha_leader", node(leader, "a"), values),
  s("llmha_leader", node(other, "b"), otherValues),
];

/** The cases, with `fires` from the rule groups under test. */
export function nodeAlertCases(fires: Cases["fires"]): TestGroup[] {
  return [
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
  ];
}
