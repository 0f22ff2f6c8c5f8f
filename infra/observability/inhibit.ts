/**
 * Alertmanager inhibition rules shipped beside the alerts: while a wider alert fires, the
 * narrower ones it explains stay quiet (a global outage mutes per-node and capacity
 * alerts; a cluster-wide budget burn mutes the same burn per AZ; a fast burn mutes the
 * slow one). Merge `inhibit_rules` into `alertmanager.yml`; a test runs them in a real
 * Alertmanager.
 */
import { yamlText } from "./manifests";

export interface InhibitRule {
  source_matchers: string[];
  target_matchers: string[];
  /** Labels source and target must share (missing on both counts as equal). */
  equal: string[];
}

const names = (xs: string[]) => `alertname=~"${xs.join("|")}"`;

export const BURN_ALERTS = ["LlmHaAvailabilityBudgetBurn", "LlmHaLatencyBudgetBurn"] as const;

export function inhibitRules(): InhibitRule[] {
  const perNode = ["LlmHaNodeUnhealthy", "LlmHaNodeStatusUnknown", "LlmHaProbeLatencyHigh", "LlmHaModelLoadStuck"];
  const rules: InhibitRule[] = [
    // L4: every AZ down. What it explains is noise on the pager.
    {
      source_matchers: ['alertname="LlmHaGlobalOutage"'],
      target_matchers: [names([...perNode, "LlmHaAzCapacityLow", "LlmHaTierElevated", "LlmHaZoneFailedOver", "LlmHaL1NoUsableServers"])],
      equal: ["cluster"],
    },
    // L3: an AZ out of DNS says more than its capacity and the tier.
    { source_matchers: ['alertname="LlmHaZoneFailedOver"'], target_matchers: [names(["LlmHaAzCapacityLow", "LlmHaTierElevated"])], equal: ["cluster"] },
    // An AZ below capacity says more than each of its nodes.
    { source_matchers: ['alertname="LlmHaAzCapacityLow"'], target_matchers: [names(perNode)], equal: ["cluster", "az"] },
    // A GPU fault is the reason its node is out.
    { source_matchers: ['alertname="LlmHaGpuHardwareFault"'], target_matchers: [names(["LlmHaNodeUnhealthy", "LlmHaNodeStatusUnknown"])], equal: ["cluster", "node"] },
    // The standby cannot get capacity: that is why it is not waking.
    { source_matchers: ['alertname="LlmHaStandbyCapacityUnavailable"'], target_matchers: ['alertname="LlmHaStandbyNotWaking"'], equal: ["cluster"] },
    // No agent or no proxy scraped at all: each missing target says nothing more.
    { source_matchers: ['alertname="LlmHaAgentsMissing"'], target_matchers: ['alertname="LlmHaAgentDown"'], equal: [] },
    { source_matchers: ['alertname="LlmHaL1ProxiesMissing"'], target_matchers: ['alertname="LlmHaL1ProxyDown"'], equal: [] },
    { source_matchers: ['alertname="LlmHaRedisUnreachableFleet"'], target_matchers: ['alertname="LlmHaRedisUnreachable"'], equal: ["cluster"] },
  ];
  for (const burn of BURN_ALERTS) {
    // The cluster-wide burn (no az label) mutes the same burn per AZ.
    for (const speed of ["Fast", "Slow"]) {
      rules.push({ source_matchers: [`alertname="${burn}${speed}"`, 'az=""'], target_matchers: [`alertname="${burn}${speed}"`, 'az=~".+"'], equal: ["cluster"] });
    }
    // Paging at a fast burn makes the ticket for the slow one redundant.
    rules.push({ source_matchers: [`alertname="${burn}Fast"`], target_matchers: [`alertname="${burn}Slow"`], equal: ["cluster", "az"] });
  }
  return rules;
}

export function inhibitText(): string {
  return yamlText({ inhibit_rules: inhibitRules() });
}
