/**
 * The L4 fallback's alerts: `LlmHaFallbackQueueLag` and `LlmHaFallbackQueueNearCap`
 * under the real `promtool test rules` — they fire on a stalled replay below L4 and on a queue
 * near its cap, and stay silent at L4 (the queue is meant to fill), while a backlog drains, on
 * an unreadable lag (-1) and below the cap — and every `llmha_fallback_*` name a rule or a
 * panel reads is one a REAL fallback serves on its metrics listener.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { createLogger } from "../../agent/src/util/log";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { buildDashboard, dashboardExprs } from "../../infra/observability/dashboard";
import { DEFAULT_ALERT_THRESHOLDS } from "../../infra/observability/thresholds";
import { exportedFamilies, havePromtool, isExported, metricNames } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type Series, type TestGroup } from "./promtool-cases";

const HAVE = havePromtool();
const groups = alertRuleGroups();
const cases = new Cases(groups);
const fires = cases.fires.bind(cases);

/** The leader of `cluster` publishing the tier `values`. */
const tier = (cluster: string, values: string): Series[] => [
  s("llmha_leader", { cluster, node: `${cluster}-n1`, az: "a" }, `1x60`),
  s("llmha_tier_level", { cluster, node: `${cluster}-n1`, az: "a" }, values),
];
/** One fallback (an L1 pod) of `cluster`. */
const fb = (cluster: string, pod: string) => ({ cluster, job: "llm-ha-fallback", instance: `${pod}:9411`, az: "a" });

const TESTS: TestGroup[] = [
  {
    name: "queue lag: a replay that makes no progress below L4 fires after 10 m; L4, a draining backlog and an unreadable lag stay silent",
    interval: "1m",
    input_series: [
      // c1: L4 for 5 minutes, 5 requests queued, then L0 and nothing is ever replayed.
      ...tier("c1", "4x5 0x40"),
      s("llmha_fallback_consumer_lag", fb("c1", "p1"), "0 5x44"),
      s("llmha_fallback_consumer_lag", fb("c1", "p2"), "0 5x44"),
      // c2: L4 all along with 7 queued: the queue is meant to hold them.
      ...tier("c2", "4x45"),
      s("llmha_fallback_consumer_lag", fb("c2", "p1"), "7x45"),
      // c3: below L4, a 300-message backlog worked off at the replay rate (30 minutes): no alert, however long.
      ...tier("c3", "0x45"),
      s("llmha_fallback_consumer_lag", fb("c3", "p1"), "300-10x30 0x14"),
      s("llmha_fallback_replayed_total", { ...fb("c3", "p1"), result: "done" }, "0+10x30 300x14"),
      // c4: the replay stops after 10 minutes with 20 left: fires 10 m after its last progress left the 5 m window.
      ...tier("c4", "0x45"),
      s("llmha_fallback_consumer_lag", fb("c4", "p1"), "100-10x8 20x36"),
      s("llmha_fallback_replayed_total", { ...fb("c4", "p1"), result: "done" }, "0+10x8 80x36"),
      // c5: Kafka unreadable (-1) below L4: not a lag.
      ...tier("c5", "0x45"),
      s("llmha_fallback_consumer_lag", fb("c5", "p1"), "-1x45"),
    ],
    alert_rule_test: [
      ...silent("5m", "LlmHaFallbackQueueLag"),
      // c1 below L4 since 6 m: pending until 16 m.
      ...silent("15m", "LlmHaFallbackQueueLag"),
      at("17m", "LlmHaFallbackQueueLag", fires("LlmHaFallbackQueueLag", { cluster: "c1" }, "5")),
      // c4's last replay at 8 m leaves the 5 m window at 13 m: pending from 13 m, firing from 23 m.
      at("22m", "LlmHaFallbackQueueLag", fires("LlmHaFallbackQueueLag", { cluster: "c1" }, "5")),
      at("25m", "LlmHaFallbackQueueLag", fires("LlmHaFallbackQueueLag", { cluster: "c1" }, "5"), fires("LlmHaFallbackQueueLag", { cluster: "c4" }, "20")),
      at("40m", "LlmHaFallbackQueueLag", fires("LlmHaFallbackQueueLag", { cluster: "c1" }, "5"), fires("LlmHaFallbackQueueLag", { cluster: "c4" }, "20")),
    ],
  },
  {
    name: "queue near its cap: a fallback at 80 % of its depth cap for a minute fires; 70 %, no queue (cap 0) and an unknown depth stay silent",
    interval: "1m",
    input_series: [
      s("llmha_fallback_queue_depth", fb("c1", "p1"), "0 10+10x8 90x10"),
      s("llmha_fallback_queue_depth_cap", fb("c1", "p1"), "100x20"),
      s("llmha_fallback_queue_depth", fb("c1", "p2"), "0x20"),
      s("llmha_fallback_queue_depth_cap", fb("c1", "p2"), "100x20"),
      s("llmha_fallback_queue_depth", fb("c2", "p1"), "70x20"),
      s("llmha_fallback_queue_depth_cap", fb("c2", "p1"), "100x20"),
      s("llmha_fallback_queue_depth", fb("c3", "p1"), "-1x20"),
      s("llmha_fallback_queue_depth_cap", fb("c3", "p1"), "0x20"),
    ],
    alert_rule_test: [
      ...silent("7m", "LlmHaFallbackQueueNearCap"),
      // 80 % at 8 m, for 1 m.
      ...silent("8m", "LlmHaFallbackQueueNearCap"),
      at("12m", "LlmHaFallbackQueueNearCap", fires("LlmHaFallbackQueueNearCap", { cluster: "c1" }, "90%")),
    ],
  },
  {
    name: "a misconfigured provider (401/403/404) fires while it refused within 15 m; a provider that only failed (5xx) does not",
    interval: "1m",
    input_series: [
      s("llmha_fallback_provider_misconfigured_total", { ...fb("c1", "p1"), provider: "primary" }, "0x4 1+1x5 6x30"),
      s("llmha_fallback_provider_misconfigured_total", { ...fb("c1", "p1"), provider: "secondary" }, "0x40"),
      s("llmha_fallback_upstream_attempts_total", { ...fb("c1", "p1"), provider: "secondary", result: "error" }, "0+5x40"),
    ],
    alert_rule_test: [
      ...silent("4m", "LlmHaFallbackProviderMisconfigured"),
      at("6m", "LlmHaFallbackProviderMisconfigured", fires("LlmHaFallbackProviderMisconfigured", { cluster: "c1", provider: "primary" }, "1")),
      ...silent("30m", "LlmHaFallbackProviderMisconfigured"),
    ],
  },
];

describe("the fallback's alert rules", () => {
  it("are shipped with their thresholds, read the controller's tier and the fallback's own series", () => {
    const rules = new Map(groups.flatMap((g) => g.rules).filter((r) => "alert" in r).map((r) => [(r as { alert: string }).alert, r as { expr: string; for?: string }]));
    const lag = rules.get("LlmHaFallbackQueueLag")!;
    expect(lag.for).toBe(DEFAULT_ALERT_THRESHOLDS.fallbackLagFor);
    expect(lag.expr).toContain("cluster:llmha_tier_level:leader < 4");
    expect(lag.expr).toContain("max by (cluster) (llmha_fallback_consumer_lag) > 0");
    const custom = alertRuleGroups({ fallbackLagMessages: 50, fallbackLagFor: "20m", fallbackQueueCapRatio: 0.5 }).flatMap((g) => g.rules) as Array<{ alert?: string; expr: string; for?: string }>;
    expect(custom.find((r) => r.alert === "LlmHaFallbackQueueLag")).toMatchObject({ for: "20m", expr: expect.stringContaining("> 50)") });
    expect(custom.find((r) => r.alert === "LlmHaFallbackQueueNearCap")?.expr).toMatch(/>= 0\.5$/);
    // L4 itself is LlmHaGlobalOutage, once.
    expect(rules.has("LlmHaGlobalOutage")).toBe(true);
    expect([...rules.keys()].filter((a) => /L4|Outage/.test(a))).toEqual(["LlmHaGlobalOutage"]);
  });

  it("refuses bad fallback thresholds, naming each", () => {
    expect(() => alertRuleGroups({ fallbackLagMessages: -1 })).toThrow(/fallbackLagMessages -1 must be an integer ≥ 0/);
    expect(() => alertRuleGroups({ fallbackLagFor: "soon" })).toThrow(/fallbackLagFor "soon" must be a Prometheus duration/);
    expect(() => alertRuleGroups({ fallbackQueueCapRatio: 1.5 })).toThrow(/fallbackQueueCapRatio 1.5 must be in \(0, 1\]/);
  });

  it.skipIf(!HAVE)("promtool test rules: each fires on its fault and stays silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS, "1m");
    expect(r.out).toContain("SUCCESS");
    expect(r.code, r.out).toBe(0);
  });

  it.skipIf(!HAVE)("the cases can fail: the lag alert expected at 15 m (still pending) is reported", () => {
    const wrong: TestGroup[] = [{ ...TESTS[0], alert_rule_test: [at("15m", "LlmHaFallbackQueueLag", fires("LlmHaFallbackQueueLag", { cluster: "c1" }, "5"))] }];
    const r = runPromtoolTests(groups, wrong, "1m");
    expect(r.code).not.toBe(0);
  });
});

describe("metric names against a real fallback", () => {
  let running: RunningFallback;
  let text = "";
  beforeAll(async () => {
    const cfg = loadFallbackConfig(["--host", "127.0.0.1", "--port", "0", "--metrics-addr", "127.0.0.1:0", "--models", "m"], {});
    running = await runFallback(cfg, { log: createLogger({ level: "silent" }) });
    text = await (await fetch(`http://127.0.0.1:${running.metricsPort}/metrics`)).text();
  });
  afterAll(async () => {
    await running?.close();
  });

  it("every llmha_fallback_* name a rule or a panel reads is served on the metrics listener", () => {
    const exprs = [...groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExprs(buildDashboard())];
    const names = [...new Set(exprs.flatMap((e) => metricNames(e)))].filter((n) => n.startsWith("llmha_fallback_"));
    expect(names.sort()).toEqual(expect.arrayContaining(["llmha_fallback_consumer_lag", "llmha_fallback_queue_depth", "llmha_fallback_queue_depth_cap", "llmha_fallback_replayed_total"]));
    const page = exportedFamilies(text);
    expect(names.filter((n) => !isExported(n, page))).toEqual([]);
    // The check can fail.
    expect(isExported("llmha_fallback_no_such", page)).toBe(false);
    // What an operator of L4 watches is there: outcomes by kind, depth and lag, replay latency.
    for (const f of ["llmha_fallback_requests_total", "llmha_fallback_queue_depth", "llmha_fallback_consumer_lag", "llmha_fallback_replay_seconds", "llmha_fallback_replay_attempt_seconds", "llmha_fallback_tier_l4"]) {
      expect(page.families.has(f), f).toBe(true);
    }
  });
});
