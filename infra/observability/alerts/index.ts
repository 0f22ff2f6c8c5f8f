/**
 * The alert rules llm-ha ships, as typed data built from the agent's real series. One
 * function renders them; the infrastructure puts them in a `PrometheusRule` and a
 * ConfigMap, `npm run observability` writes them for `promtool`.
 *
 * Labels the rules expect on every `llmha_*` series: `node` and `az` (the agent sets them
 * on its own registry; scrape with `honor_labels`, as the PodMonitor does) and `cluster`
 * (added by the scrape; rules still work without it). HAProxy's series need `az` and
 * `cluster` from the scrape.
 *
 * Leader-only series (AZ state and capacity, tier, suspect checks, standby) are read only
 * from the agent that holds the lease now (`llmha_leader == 1`): a former leader keeps its
 * last values, and `max` over every pod would let a stale one win.
 */
import { AlertThresholdError, DEFAULT_ALERT_THRESHOLDS, thresholdProblems, type AlertThresholds } from "../thresholds";
import { agentRules } from "./agent";
import type { RuleGroup } from "./common";
import { fleetRules } from "./fleet";
import { gpuRules } from "./gpu";
import { l1Rules } from "./l1";
import { nodeRules } from "./node";

export { fromLeader, GPU_HARDWARE_CODES, GPU_RESET_CODES, type AlertRule, type RuleGroup, type Severity } from "./common";

/** The rule groups, thresholds over the defaults. Throws `AlertThresholdError` on a bad threshold. */
export function alertRuleGroups(overrides: Partial<AlertThresholds> = {}): RuleGroup[] {
  const t: AlertThresholds = { ...DEFAULT_ALERT_THRESHOLDS, ...overrides };
  const bad = thresholdProblems(t);
  if (bad.length) throw new AlertThresholdError(bad.map(([k, why]) => `${k} ${JSON.stringify(t[k])} ${why}`).join("; "));
  return [nodeRules(t), gpuRules(t), fleetRules(t), agentRules(t), l1Rules(t)];
}

/** Every alert name of the groups. */
export function alertNames(groups: RuleGroup[]): string[] {
  return groups.flatMap((g) => g.rules.map((r) => r.alert));
}
