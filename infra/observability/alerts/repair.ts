/**
 * The repair ladder (advise mode): the leader publishes `llmha_repair_held`, the broken GPU
 * nodes whose repair a capacity bound holds (one node per AZ, the fleet share, an AZ's floor,
 * no replacement in sight). Leader-only, so read from the lease holder and bridged over a
 * leader change like `leader-view.ts`'s series.
 */
import { fromLeader, LEADER_BRIDGE, type RuleGroupSpec } from "./common";

const FRESH = "cluster:llmha_repair_held:leader_fresh";
/** Held repairs as the current leader sees them, carried over a hand-over gap. */
export const REPAIR_HELD = "cluster:llmha_repair_held:leader";

/**
 * A hold is the ladder working (one node at a time per AZ: the next waits for the first);
 * held 30 minutes is capacity that is not coming: a node out of rotation nobody can repair.
 */
export const REPAIR_HELD_FOR = "30m";

export function repairRules(): RuleGroupSpec {
  return {
    name: "llm-ha.repair",
    rules: [
      { record: FRESH, expr: `max by (cluster) ${fromLeader("llmha_repair_held")}` },
      { record: REPAIR_HELD, expr: `${FRESH} or max by (cluster) (last_over_time(${FRESH}[${LEADER_BRIDGE}]))` },
      {
        alert: "LlmHaRepairHeld",
        expr: `${REPAIR_HELD} > 0`,
        for: REPAIR_HELD_FOR,
        labels: { severity: "warning" },
        annotations: {
          summary: "{{ $value }} broken GPU nodes held from repair for capacity in {{ $labels.cluster }}",
          description:
            "The leader's repair ladder holds a broken GPU node's repair: another node of its AZ is in repair, the fleet share in repair is reached, the AZ would drop below its floor, a replace/quarantine has no replacement in sight, or (act mode) a restart or reboot it carried out failed at a step. The node stays drained (after a failed step: cordoned) meanwhile.",
          runbook:
            "llm-ha status (repairs section) names each held node, the action it needs and the reason; free a replacement (a reservation slot, a standby node; LLMHA_REPAIR_SPARE tells the leader it is there) or repair the node by hand. After a failed step (bound failed): repair the node, uncordon it, and remove its field from repair:active.",
        },
      },
    ],
  };
}
