/**
 * `LlmHaRolloutRolledBack` under the real `promtool test rules`: it fires, naming the cause,
 * for 15 minutes after a leader rolled a rollout back (a failed gate) or an operator aborted
 * one, across a leader change (the new leader's counter starts at 0), and stays silent on a
 * fleet whose rollouts promoted (every cause created at zero).
 */
import { describe, expect, it } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type TestGroup } from "./promtool-cases";

const HAVE = havePromtool();
const groups = alertRuleGroups();
const cases = new Cases(groups);
const fires = cases.fires.bind(cases);
const ALERT = "LlmHaRolloutRolledBack";
const rb = (cluster: string, node: string, cause: string) => ({ cluster, node, az: "controller", job: "llm-ha-agent", cause });

const TESTS: TestGroup[] = [
  {
    name: "a rollback fires with its cause for 15 m, across a leader change; promoted rollouts stay silent",
    interval: "1m",
    input_series: [
      // c1: n1 leads and rolls back on the latency gate at 5 m; n2 leads from 20 m and an operator aborts at 25 m.
      s("llmha_rollout_rollbacks_total", rb("c1", "n1", "latency"), "0x4 1x25"),
      s("llmha_rollout_rollbacks_total", rb("c1", "n1", "abort"), "0x30"),
      s("llmha_rollout_rollbacks_total", rb("c1", "n2", "latency"), "0x50"),
      s("llmha_rollout_rollbacks_total", rb("c1", "n2", "abort"), "0x24 1x26"),
      // c2: every cause at zero all along (rollouts promoted), on two controllers.
      s("llmha_rollout_rollbacks_total", rb("c2", "n3", "latency"), "0x50"),
      s("llmha_rollout_rollbacks_total", rb("c2", "n3", "corruption"), "0x50"),
      s("llmha_rollout_rollbacks_total", rb("c2", "n4", "abort"), "0x50"),
    ],
    alert_rule_test: [
      ...silent("4m", ALERT),
      at("6m", ALERT, fires(ALERT, { cluster: "c1", cause: "latency" }, "1")),
      at("18m", ALERT, fires(ALERT, { cluster: "c1", cause: "latency" }, "1")),
      at("27m", ALERT, fires(ALERT, { cluster: "c1", cause: "abort" }, "1")),
      // Both have left the 15 m window.
      ...silent("45m", ALERT),
    ],
  },
];

describe("the rollout's alert rule", () => {
  it.skipIf(!HAVE)("promtool test rules: fires on a rollback or abort, naming the cause, and stays silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS, "1m");
    expect(r.out).toContain("SUCCESS");
    expect(r.code, r.out).toBe(0);
  });

  it.skipIf(!HAVE)("the cases can fail: a rollback expected in c2 is reported", () => {
    const wrong: TestGroup[] = [{ ...TESTS[0], alert_rule_test: [at("6m", ALERT, fires(ALERT, { cluster: "c2", cause: "latency" }, "1"))] }];
    expect(runPromtoolTests(groups, wrong, "1m").code).not.toBe(0);
  });
});
