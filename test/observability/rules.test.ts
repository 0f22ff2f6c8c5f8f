/**
 * The shipped alert rules under the real `promtool` (Debian `prometheus`): `check rules`,
 * then `test rules` with unit tests written here that feed series and assert which
 * alerts fire — on each fault — and which stay silent: on healthy series, on short blips
 * shorter than `for:`, and on a former leader's stale series.
 */
import { describe, expect, it } from "vitest";
import { alertNames, alertRuleGroups, runbookAnchor } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, type TestGroup } from "./promtool-cases";
import { C, leaderSeries, node, nodeAlertCases } from "./node-alert-cases";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { RULES_FILE, rulesFileText } from "../../infra/observability/manifests";
import { promtool } from "./promql";
import { testTempDir } from "../support/temp-dir";

const HAVE = havePromtool();
if (!HAVE) console.warn("promtool not found: skipping the promtool tests (apt-get install -y prometheus)");

// us-east-1c is the standby AZ of these tests (as `llm-ha:standbyAz` makes it in a stack).
const groups = alertRuleGroups({ standbyAz: "us-east-1c" });
const cases = new Cases(groups);
const rules = cases.rules;
const fires = cases.fires.bind(cases);

const TESTS: TestGroup[] = [
  ...nodeAlertCases(fires),
  {
    name: "L1 data missing: no proxy scraped, a proxy down, an AZ's proxy with no usable server",
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
    name: "model loading is no page: UNHEALTHY while MODEL_LOADING stays silent; a load past 30m fires LlmHaModelLoadStuck",
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
    name: "leader change: the tier held at L2 across a hand-over keeps LlmHaTierElevated firing",
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
    name: "standby capacity unavailable: the leader's word under L2 fires after a minute; a former leader's stale gauge and a practice at L0 do not",
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
    name: "foreign cloud actions: the leader's audit seeing one fires at once and holds while it stands; a former leader's stale gauge does not; a sighting counted and gone within 15 m still fires",
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
    name: "practice wakes: a failed practice fires until one serves, whichever agent recorded it; the last served practice slower than 15 m fires",
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

// Same model everywhere: the leader's count of nodes serving another model than the majority.
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

// Canaries: a node drained for wrong canary answers; most of the fleet disagreeing with the expectation (capped, no drain).
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
  it("promtool check rules accepts the generated file", () => {
    const dir = testTempDir("llmha-check-");
    writeFileSync(join(dir, RULES_FILE), rulesFileText(groups));
    const r = promtool(["check", "rules", RULES_FILE], dir);
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
      // The SLO alerts are tested in slo-rules.test.ts, the fallback's in fallback-alerts.test.ts, the relay's in continuation-alerts.test.ts, forged node records in forgery-alert.test.ts.
      const elsewhere = ["LlmHaQueryOfDeath", "LlmHaContinuationMismatch", "LlmHaNodeCredentialMisused" /* forgery-alert.test.ts */, "LlmHaRepairHeld" /* repair-alert.test.ts */, "LlmHaRolloutRolledBack" /* rollout-alert.test.ts */];
      if (!slo.includes(r.alert) && !r.alert.startsWith("LlmHaFallback") && !elsewhere.includes(r.alert)) expect(tested.has(r.alert), `${r.alert} fires in some test`).toBe(true);
    }
    expect(alertNames(groups)).toEqual(expect.arrayContaining(slo));
  });

  it("promtool test rules: each alert fires on its fault and stays silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS);
    expect(r.out).toContain("SUCCESS");
    expect(r.code, r.out).toBe(0);
  });
});
