import type { AlertThresholds } from "../thresholds";
import { pct, type RuleGroupSpec } from "./common";
import { AZ_HEALTHY, AZ_TOTAL, STANDBY_WANTED_SINCE, SUSPECT, TIER } from "./leader-view";

/** A Prometheus duration in seconds (`15m` → 900). */
export function durationSeconds(d: string): number {
  const unit: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
  let total = 0;
  for (const [, n, u] of d.matchAll(/([0-9]+)(ms|s|m|h|d|w|y)/g)) total += Number(n) * unit[u];
  return total;
}

/** Leader-view alerts read the bridged recordings of `leader-view.ts`, so a leader change does not reset them. */
export function fleetRules(t: AlertThresholds): RuleGroupSpec {
  const tier = TIER;
  const notStandby = t.standbyAz ? `{az!="${t.standbyAz}"}` : "";
  return {
    name: "llm-ha.fleet",
    rules: [
      {
        alert: "LlmHaAzCapacityLow",
        expr: `${AZ_HEALTHY}${notStandby} / (${AZ_TOTAL}${notStandby} > 0) < ${t.azCapacityRatio}`,
        for: "2m",
        labels: { severity: "warning" },
        annotations: {
          summary: "AZ {{ $labels.az }} has {{ $value | humanizePercentage }} of its GPU capacity healthy",
          description: `Below ${pct(t.azCapacityRatio)} the controller marks the AZ DEGRADED and its traffic crosses zones (L2).`,
          runbook: "See which nodes are out (LlmHaNodeUnhealthy, the dashboard's reasons table); check the node group and capacity reservation for the AZ.",
        },
      },
      {
        alert: "LlmHaTierElevated",
        expr: `${tier} >= 2`,
        for: "1m",
        labels: { severity: "warning" },
        annotations: {
          summary: "llm-ha is at failure tier L{{ $value }} in {{ $labels.cluster }}",
          description: "L2: an AZ is degraded and traffic crosses zones; L3: an AZ is out of DNS; L4: every AZ is down.",
          runbook: "Open the dashboard's AZ state panel; find the AZ and its failing nodes; confirm the standby AZ is waking.",
        },
      },
      {
        alert: "LlmHaZoneFailedOver",
        // L4 is worse, not better: the alert holds (LlmHaGlobalOutage inhibits it in Alertmanager).
        expr: `${tier} >= 3`,
        for: "30s",
        labels: { severity: "critical" },
        annotations: {
          summary: "An AZ is out of DNS in {{ $labels.cluster }} (tier L{{ $value }})",
          description: "Route53 health checks on /az/health fail for an AZ; its clients go to the other AZs.",
          runbook: "Find the DOWN AZ on the dashboard; check its NLB, HAProxy pods and GPU nodes; capacity left in the other AZs must carry the load.",
        },
      },
      {
        alert: "LlmHaGlobalOutage",
        expr: `${tier} == 4`,
        labels: { severity: "critical" },
        annotations: {
          summary: "Every AZ is down in {{ $labels.cluster }} (tier L4)",
          description: "No AZ has healthy GPU capacity; consumers serve from cache or queue to Kafka.",
          runbook: "Incident: check for a shared cause first (model image, driver roll-out, Redis, the probe itself); wake the standby AZ by hand.",
        },
      },
      {
        alert: "LlmHaNoLeader",
        // Lease TTL 20 s + contend 5 s: a minute without a leader is no hand-over.
        expr: "max by (cluster) (llmha_leader) == 0",
        for: "1m",
        labels: { severity: "critical" },
        annotations: {
          summary: "No llm-ha leader in {{ $labels.cluster }}",
          description: "No agent holds the lease: AZ states, tiers and the standby wake-up are not updated (/az/health fails open).",
          runbook: "Check Redis (LlmHaRedisUnreachable) and the agents' logs for lease errors.",
        },
      },
      {
        alert: "LlmHaLeaderChurn",
        expr: `sum by (cluster) (increase(llmha_lease_acquisitions_total[10m])) > ${t.leaderChurnPer10m}`,
        labels: { severity: "warning" },
        annotations: {
          summary: `The llm-ha leader changed more than ${t.leaderChurnPer10m} times in 10 minutes in {{ $labels.cluster }}`,
          description: "Leaders keep losing the lease: pauses past the TTL (CPU starvation, GC), Redis failovers or a network partition.",
          runbook: "Compare llmha_lease_losses_total by reason; self-fence means the holder stalls (check node CPU), fenced-out means Redis lost the key.",
        },
      },
      {
        alert: "LlmHaNodeCredentialMisused",
        // The leader counts, every period, node records and index entries that contradict its
        // inventory (nodes it does not list, another AZ than the Node's): only a credential used
        // against other nodes writes those. Any at all is an incident, at once.
        expr: `sum by (cluster) (increase(llmha_redis_distrusted_total{what="forged"}[5m])) > 0`,
        labels: { severity: "critical" },
        annotations: {
          summary: "Redis holds node records the inventory contradicts in {{ $labels.cluster }}",
          description: "Records or index entries for nodes the inventory (the Kubernetes Node objects) does not list, or claiming another AZ than their Node's: a GPU node's Redis credential is being used against other nodes. The leader ignores them; the AZ states are not affected.",
          runbook: "Find the writer: the leader's log line \"node records in Redis for nodes the inventory does not list\" names the ids; `ACL LOG` on Redis and the `events` stream show the client. Cordon and drain the node whose credential it is, rotate the agent role's password (docs/redis-roles.md), then reimage the node.",
        },
      },
      {
        alert: "LlmHaBlastRadiusCapTripped",
        expr: `${SUSPECT} == 1`,
        for: "1m",
        labels: { severity: "critical" },
        annotations: {
          summary: "More than half the nodes fail {{ $labels.check }} at once",
          description: "The controller suspects the check or a shared dependency rather than the nodes, and keeps them in service.",
          runbook: "Test the check by hand against two nodes; look for a shared cause (model endpoint, DNS, network); take nodes out by hand only if they really fail.",
        },
      },
      {
        alert: "LlmHaStandbyNotWaking",
        // A timestamp rather than `for:`: a leader change (or several) does not restart the count.
        expr: `time() - ${STANDBY_WANTED_SINCE} >= ${durationSeconds(t.standbyWakeFor)}`,
        labels: { severity: "critical" },
        annotations: {
          summary: "The standby AZ is still at zero healthy GPUs under L2 in {{ $labels.cluster }}",
          description: `The controller wants the standby AZ awake and the fleet is at L2 or worse, but no standby GPU has been healthy for ${t.standbyWakeFor}.`,
          runbook: "Check the standby node group's ASG activity (capacity, quota, reservation) and llmha_actuator_actions_total; scale it up by hand.",
        },
      },
    ],
  };
}
