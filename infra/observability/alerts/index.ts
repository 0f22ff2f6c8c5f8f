/**
 * The rules llm-ha ships, as typed data built from the agent's real series. One function
 * renders them; the infrastructure puts them in a ConfigMap (and, with prometheus-operator,
 * a `PrometheusRule`), `npm run observability` writes them for `promtool`.
 *
 * Labels the rules expect on every `llmha_*` series: `node` and `az` (the agent sets them
 * on its own registry; scrape with `honor_labels`, as the scrape configs do) and `cluster`
 * (added by the scrape; rules still work without it). HAProxy's and vLLM's series need
 * `az` and `cluster` from the scrape.
 *
 * Leader-only series (AZ state and capacity, tier, suspect checks, standby, model outliers) are read only
 * from the agent that holds the lease now (`llmha_leader == 1`), bridged over a leader
 * change by recording rules (`leader-view.ts`).
 */
import { AlertThresholdError, DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "../thresholds";
import { agentRules } from "./agent";
import { finishAlert, isAlert, type AlertRule, type RuleGroup, type RuleGroupSpec } from "./common";
import { fallbackRules } from "./fallback";
import { fleetRules } from "./fleet";
import { gpuRules } from "./gpu";
import { l1Rules } from "./l1";
import { leaderViewRules } from "./leader-view";
import { modelRules } from "./model";
import { nodeRules } from "./node";
import { sloRules } from "./slo";
import { standbyRules } from "./standby";
import { cloudRules } from "./cloud";
import { continuationRules } from "./continuation";
import { repairRules } from "./repair";
import { rolloutRules } from "./rollout";

export { fromLeader, GPU_HARDWARE_CODES, GPU_RESET_CODES, isAlert, runbookAnchor, type AlertRule, type RecordingRule, type Rule, type RuleGroup, type Severity } from "./common";

/** The full thresholds over the defaults. Throws `AlertThresholdError` on a bad one. */
export function alertThresholds(overrides: Partial<AlertThresholds> = {}): AlertThresholds {
  const t: AlertThresholds = { ...DEFAULT_ALERT_THRESHOLDS, ...overrides };
  const bad = thresholdProblems(t);
  if (bad.length) throw new AlertThresholdError(bad.map(([k, why]) => `${k} ${JSON.stringify(t[k])} ${why}`).join("; "));
  return t;
}

/** The rule groups (recording rules first), thresholds over the defaults. Throws `AlertThresholdError` on a bad threshold. */
export function alertRuleGroups(overrides: Partial<AlertThresholds> = {}): RuleGroup[] {
  const t = alertThresholds(overrides);
  const specs: RuleGroupSpec[] = [leaderViewRules(), ...sloRules(t), nodeRules(t), gpuRules(t), fleetRules(t), modelRules(), agentRules(t), l1Rules(t), fallbackRules(t), continuationRules(), standbyRules(t), cloudRules(), repairRules(), rolloutRules()];
  return specs.map((g) => ({ ...g, rules: g.rules.map((r) => (isAlert(r) ? finishAlert(r, t.runbookBaseUrl) : r)) }));
}

/** Every alert rule of the groups. */
export function alertRules(groups: RuleGroup[]): AlertRule[] {
  return groups.flatMap((g) => g.rules.filter((r): r is AlertRule => "alert" in r));
}

/** Every alert name of the groups (once each). */
export function alertNames(groups: RuleGroup[]): string[] {
  return [...new Set(alertRules(groups).map((r) => r.alert))];
}
