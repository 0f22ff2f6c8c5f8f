/**
 * Who holds the cloud: the controller alone acts on AWS, and reports what it did
 * not do — a zonal shift without its comment, a standby or fallback group resized or held off
 * its schedule with no llm-ha wake (`llmha_foreign_actions_active{kind}`, from the leader's
 * audit; `llmha_foreign_actions_total{kind}`, one per change). llm-ha never undoes them: a
 * person decides.
 */
import { fromLeader, type RuleGroupSpec } from "./common";

export function cloudRules(): RuleGroupSpec {
  return {
    name: "llm-ha.cloud",
    rules: [
      {
        alert: "LlmHaForeignCloudAction",
        // Standing now, in the leader's last audit; or counted in the last 15 m by whichever
        // controller led (a shift started and cancelled between two scrapes still pages).
        expr: `(max by (cluster, kind) ${fromLeader("llmha_foreign_actions_active")} > 0) or (max by (cluster, kind) (increase(llmha_foreign_actions_total[15m])) > 0)`,
        labels: { severity: "critical" },
        annotations: {
          summary: "A {{ $labels.kind }} change llm-ha's controller did not make in {{ $labels.cluster }}",
          description:
            "kind=shift: an ARC zonal shift on one of the stack's load balancers without llm-ha's comment (it can keep an AZ's traffic away for up to 72 h, and llm-ha will not cancel it); kind=standby: a standby or fallback GPU group resized or held off its schedule with no llm-ha wake (paid GPUs, or a standby that cannot wake). The event type=foreign-action in llm-ha status says what and where.",
          runbook:
            "llm-ha status (events: type=foreign-action); aws arc-zonal-shift list-zonal-shifts / aws autoscaling describe-auto-scaling-groups and CloudTrail for who made it; if no one planned it, cancel the shift or hand the group back to its schedule, and rotate whatever credential made it.",
        },
      },
    ],
  };
}
