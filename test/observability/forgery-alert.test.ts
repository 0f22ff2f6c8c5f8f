/**
 * `LlmHaNodeCredentialMisused` under the real `promtool test rules`: it fires at once when the
 * leader counts forged node records (records or index entries its inventory contradicts,
 * `llmha_redis_distrusted_total{what="forged"}`), across a leader change, and stays silent on
 * implausible records of other kinds (`what="node"`) and on a counter that does not move.
 */
import { describe, expect, it } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type TestGroup } from "./promtool-cases";

const HAVE = havePromtool();
const groups = alertRuleGroups();
const cases = new Cases(groups);
const fires = cases.fires.bind(cases);
const ALERT = "LlmHaNodeCredentialMisused";
const leader = (cluster: string, node: string, what: string) => ({ cluster, node, az: "controller", what });

const TESTS: TestGroup[] = [
  {
    name: "forged records counted by the leader fire at once; other distrust and a still counter do not",
    interval: "1m",
    input_series: [
      // c1: the leader starts counting forgeries at 5 m (4 a period), then a new leader (n2) counts them on from 0.
      s("llmha_redis_distrusted_total", leader("c1", "n1", "forged"), "0x4 4+4x3 _x20"),
      s("llmha_redis_distrusted_total", leader("c1", "n2", "forged"), "_x8 0+4x5 24x15"),
      // c2: implausible records only (what=node), and a forged counter that never moves.
      s("llmha_redis_distrusted_total", leader("c2", "n1", "node"), "0+3x30"),
      s("llmha_redis_distrusted_total", leader("c2", "n1", "forged"), "0x30"),
    ],
    alert_rule_test: [
      ...silent("4m", ALERT),
      at("6m", ALERT, fires(ALERT, { cluster: "c1" }, "1")),
      at("11m", ALERT, fires(ALERT, { cluster: "c1" }, "1")),
      // Counting stopped at 13 m (the forgeries are gone): silent once the 5 m window has passed.
      ...silent("20m", ALERT),
    ],
  },
];

describe("the forged-node-record alert", () => {
  it("reads the leader's forged count, per cluster, and fires without waiting", () => {
    const rule = cases.rules.get(ALERT)!;
    expect(rule.expr).toContain('llmha_redis_distrusted_total{what="forged"}');
    expect(rule.labels.severity).toBe("critical");
    expect((rule as { for?: string }).for).toBeUndefined();
  });

  it.skipIf(!HAVE)("promtool test rules: fires on forgeries, silent otherwise", () => {
    const r = runPromtoolTests(groups, TESTS, "1m");
    expect(r.code, r.out).toBe(0);
  });

  it.skipIf(!HAVE)("the case can fail: expected silent while forgeries are counted is reported", () => {
    const wrong: TestGroup[] = [{ ...TESTS[0], alert_rule_test: [...silent("6m", ALERT)] }];
    expect(runPromtoolTests(groups, wrong, "1m").code).not.toBe(0);
  });
});
