/**
 * Helpers for `promtool test rules` cases written in TypeScript: input series, expected
 * alerts with their annotations rendered as Prometheus would, and a runner that writes the
 * shipped rules and the cases to a temporary folder and runs the real promtool.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alertRules, type AlertRule, type RuleGroup } from "../../infra/observability/alerts";
import { RULES_FILE, rulesFileText } from "../../infra/observability/manifests";
import { promtool } from "./promql";

export type Labels = Record<string, string>;
export interface Series {
  series: string;
  values: string;
}
export interface Expected {
  exp_labels: Labels;
  exp_annotations: Labels;
}
export interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: Expected[];
}
export interface ExprTest {
  expr: string;
  eval_time: string;
  exp_samples: { labels: string; value: number }[];
}
export interface TestGroup {
  name: string;
  interval: string;
  input_series: Series[];
  alert_rule_test?: AlertTest[];
  promql_expr_test?: ExprTest[];
}

export const sel = (name: string, l: Labels): string => `${name}{${Object.entries(l).map(([k, v]) => `${k}="${v}"`).join(", ")}}`;
export const s = (name: string, l: Labels, values: string): Series => ({ series: sel(name, l), values });

export class Cases {
  readonly rules: Map<string, AlertRule>;
  constructor(readonly groups: RuleGroup[]) {
    this.rules = new Map(alertRules(groups).map((r) => [r.alert, r] as const));
  }

  /** The rule's annotations as Prometheus renders them: `$labels.x`, `{{ if $labels.x }}…{{ end }}`, and `$value` (through any function) as `value`. */
  annotations(alert: string, labels: Labels, value?: string): Labels {
    const rule = this.rules.get(alert);
    if (!rule) throw new Error(`no rule ${alert}`);
    const out: Labels = {};
    for (const [k, tpl] of Object.entries(rule.annotations)) {
      const text = tpl
        .replace(/\{\{ if \$labels\.(\w+) \}\}(.*?)\{\{ end \}\}/g, (_, l: string, body: string) => (labels[l] ? body : ""))
        .replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, l: string) => labels[l] ?? "")
        .replace(/\{\{ \$value( \| \w+)? \}\}/g, () => {
          if (value === undefined) throw new Error(`${alert}.${k} shows $value: give the expected text`);
          return value;
        });
      if (text.includes("{{")) throw new Error(`${alert}.${k}: template left over: ${text}`);
      out[k] = text;
    }
    return out;
  }

  /** An alert expected with these labels (severity and the rule's own labels added). */
  fires(alert: string, labels: Labels, value?: string): Expected {
    const all = { ...labels, ...this.rules.get(alert)!.labels };
    return { exp_labels: all, exp_annotations: this.annotations(alert, labels, value) };
  }
}

export const at = (eval_time: string, alertname: string, ...exp_alerts: Expected[]): AlertTest => ({ eval_time, alertname, exp_alerts });
export const silent = (eval_time: string, ...names: string[]): AlertTest[] => names.map((n) => at(eval_time, n));

/** Runs `promtool test rules` on the groups and the cases; `{code, out}`. */
export function runPromtoolTests(groups: RuleGroup[], tests: TestGroup[], evaluationInterval = "15s"): { code: number; out: string } {
  const dir = mkdtempSync(join(tmpdir(), "llmha-rules-"));
  try {
    writeFileSync(join(dir, RULES_FILE), rulesFileText(groups));
    // Recording groups first: promtool otherwise evaluates groups in a random order, and an
    // alert may read the recordings of the previous evaluation (as in Prometheus, where
    // groups run on their own timers: at most one interval later).
    const order = groups.map((g) => g.name).sort((a, b) => Number(b.includes("leader-view") || b.includes("recording")) - Number(a.includes("leader-view") || a.includes("recording")));
    const text = JSON.stringify({ rule_files: [RULES_FILE], evaluation_interval: evaluationInterval, group_eval_order: order, tests }, null, 2);
    writeFileSync(join(dir, "alerts.test.yml"), text);
    // LLMHA_PROMTOOL_DUMP=DIR keeps the cases (to replay them against other rules, e.g. an older commit's).
    const dump = process.env.LLMHA_PROMTOOL_DUMP;
    if (dump) writeFileSync(join(dump, `${tests[0]?.name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 40) ?? "empty"}.test.yml`), text);
    return promtool(["test", "rules", "alerts.test.yml"], dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
