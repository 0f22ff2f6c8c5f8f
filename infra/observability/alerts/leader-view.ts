/**
 * The leader's view, bridged over a leader change. Leader-only series (tier, AZ capacity,
 * suspect checks, standby) are read from the agent that holds the lease now; between the
 * old holder's lapse and the new one's acquisition (up to ~30 s) nobody holds it, and an
 * alert reading the join directly resolves and re-fires (its `for:` starts again).
 *
 * `<level>:<series>:leader_fresh` is the join; `<level>:<series>:leader` is that or, in a
 * gap, the last fresh value of the last `LEADER_BRIDGE` (2 m). `cluster:llmha_standby_wake_wanted:since`
 * is the time since which the standby AZ has been wanted awake (under L2+) and still at zero:
 * a timestamp, so a leader change does not restart the count as it restarts `for:`.
 */
import { fromLeader, LEADER_BRIDGE, type RecordingRule, type RuleGroupSpec } from "./common";

/** The recorded leader view of `series`, aggregated by `by`. */
export const leaderView = (series: string, level: string): string => `${level}:${series}:leader`;

function bridged(series: string, by: string[]): RecordingRule[] {
  const level = by.join("_");
  const fresh = `${level}:${series}:leader_fresh`;
  return [
    { record: fresh, expr: `max by (${by.join(", ")}) ${fromLeader(series)}` },
    { record: leaderView(series, level), expr: `${fresh} or max by (${by.join(", ")}) (last_over_time(${fresh}[${LEADER_BRIDGE}]))` },
  ];
}

export const TIER = leaderView("llmha_tier_level", "cluster");
export const AZ_HEALTHY = leaderView("llmha_az_healthy_capacity", "cluster_az");
export const AZ_TOTAL = leaderView("llmha_az_total_capacity", "cluster_az");
export const SUSPECT = leaderView("llmha_blast_radius_suspect", "cluster_check");
export const STANDBY_WAKE = leaderView("llmha_standby_wake", "cluster");
export const STANDBY_HEALTHY = leaderView("llmha_standby_healthy_capacity", "cluster");
export const STANDBY_WANTED_SINCE = "cluster:llmha_standby_wake_wanted:since";

export function leaderViewRules(): RuleGroupSpec {
  // The standby is wanted awake, the fleet is at L2 or worse, and it has no healthy GPU.
  const wanted = `(${STANDBY_WAKE} == 1) and on (cluster) (${TIER} >= 2) and on (cluster) (${STANDBY_HEALTHY} == 0)`;
  return {
    name: "llm-ha.leader-view",
    rules: [
      ...bridged("llmha_tier_level", ["cluster"]),
      ...bridged("llmha_az_healthy_capacity", ["cluster", "az"]),
      ...bridged("llmha_az_total_capacity", ["cluster", "az"]),
      ...bridged("llmha_blast_radius_suspect", ["cluster", "check"]),
      ...bridged("llmha_standby_wake", ["cluster"]),
      ...bridged("llmha_standby_healthy_capacity", ["cluster"]),
      {
        record: STANDBY_WANTED_SINCE,
        // Keeps its first timestamp while the condition holds (its last sample is found within
        // 2 m at any evaluation interval up to 1 m); starts again once the condition fails.
        expr: `(min by (cluster) (last_over_time(${STANDBY_WANTED_SINCE}[2m])) and on (cluster) (${wanted})) or (max by (cluster) (${wanted}) * 0 + time())`,
      },
    ],
  };
}
