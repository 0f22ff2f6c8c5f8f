/**
 * The continuation relay's alerts: `LlmHaQueryOfDeath` and `LlmHaContinuationMismatch`
 * under the real `promtool test rules` — each fires on its outcome within 15 minutes and stays
 * silent on continuations that worked — and every `llmha_continue_*` name a rule or a panel
 * reads is one a REAL relay serves on its metrics listener.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runContinuation, type RunningContinuation } from "../../agent/src/edge/continuation/command";
import { loadContinueConfig } from "../../agent/src/edge/continuation/config";
import { createLogger } from "../../agent/src/util/log";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { buildDashboard, dashboardExprs } from "../../infra/observability/dashboard";
import { exportedFamilies, havePromtool, isExported, metricNames } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type TestGroup } from "./promtool-cases";

const HAVE = havePromtool();
const groups = alertRuleGroups();
const cases = new Cases(groups);
const fires = cases.fires.bind(cases);

/** The relay of one L1 pod of `cluster`, one outcome's counter. */
const outcome = (cluster: string, o: string) => ({ cluster, job: "llm-ha-continue", instance: "p1:9421", az: "a", outcome: o, kind: "vllm" });

const TESTS: TestGroup[] = [
  {
    name: "a request that took two servers fires for 15 m; continued, restarted and retried answers stay silent",
    interval: "1m",
    input_series: [
      // c1: one query of death at 5 m, many continuations all along.
      s("llmha_continue_outcomes_total", outcome("c1", "failed_twice"), "0x4 1x30"),
      s("llmha_continue_outcomes_total", outcome("c1", "continued"), "0+3x35"),
      // c2: only continuations and retries that worked.
      s("llmha_continue_outcomes_total", outcome("c2", "continued"), "0+5x35"),
      s("llmha_continue_outcomes_total", outcome("c2", "retried"), "0+1x35"),
      s("llmha_continue_outcomes_total", outcome("c2", "failed_twice"), "0x35"),
    ],
    alert_rule_test: [
      ...silent("4m", "LlmHaQueryOfDeath"),
      at("6m", "LlmHaQueryOfDeath", fires("LlmHaQueryOfDeath", { cluster: "c1" }, "1")),
      at("18m", "LlmHaQueryOfDeath", fires("LlmHaQueryOfDeath", { cluster: "c1" }, "1")),
      // 15 m after the last one it has left the window.
      ...silent("25m", "LlmHaQueryOfDeath"),
    ],
  },
  {
    name: "a restarted greedy answer that differed fires; restarts that matched do not",
    interval: "1m",
    input_series: [
      s("llmha_continue_outcomes_total", outcome("c1", "mismatch"), "0x9 2x20"),
      s("llmha_continue_outcomes_total", outcome("c1", "restarted"), "0+2x30"),
      s("llmha_continue_outcomes_total", outcome("c2", "restarted"), "0+2x30"),
      s("llmha_continue_outcomes_total", outcome("c2", "mismatch"), "0x30"),
    ],
    alert_rule_test: [
      ...silent("9m", "LlmHaContinuationMismatch"),
      at("11m", "LlmHaContinuationMismatch", fires("LlmHaContinuationMismatch", { cluster: "c1" }, "2")),
    ],
  },
];

describe("the continuation relay's alert rules", () => {
  it.skipIf(!HAVE)("promtool test rules: each fires on its outcome and stays silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS, "1m");
    expect(r.out).toContain("SUCCESS");
    expect(r.code, r.out).toBe(0);
  });

  it.skipIf(!HAVE)("the cases can fail: a query of death expected for c2 is reported", () => {
    const wrong: TestGroup[] = [{ ...TESTS[0], alert_rule_test: [at("6m", "LlmHaQueryOfDeath", fires("LlmHaQueryOfDeath", { cluster: "c2" }, "1"))] }];
    expect(runPromtoolTests(groups, wrong, "1m").code).not.toBe(0);
  });
});

describe("metric names against a real relay", () => {
  let running: RunningContinuation;
  let text = "";
  beforeAll(async () => {
    const cfg = loadContinueConfig(["--host", "127.0.0.1", "--port", "0", "--metrics-addr", "127.0.0.1:0"], {});
    running = await runContinuation(cfg, { log: createLogger({ level: "silent" }) });
    text = await (await fetch(`http://127.0.0.1:${running.metricsPort}/metrics`)).text();
  });
  afterAll(async () => {
    await running?.close();
  });

  it("every llmha_continue_* name a rule or a panel reads is served on the metrics listener", () => {
    const exprs = [...groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExprs(buildDashboard())];
    const names = [...new Set(exprs.flatMap((e) => metricNames(e)))].filter((n) => n.startsWith("llmha_continue_"));
    expect(names.sort()).toEqual(["llmha_continue_added_seconds_bucket", "llmha_continue_delivered_bytes", "llmha_continue_open_streams", "llmha_continue_outcomes_total"]);
    const page = exportedFamilies(text);
    expect(names.filter((n) => !isExported(n, page))).toEqual([]);
    expect(isExported("llmha_continue_no_such", page)).toBe(false);
  });
});
