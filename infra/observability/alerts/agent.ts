import type { AlertThresholds } from "../thresholds";
import { type RuleGroupSpec } from "./common";

export function agentRules(t: AlertThresholds): RuleGroupSpec {
  return {
    name: "llm-ha.agent",
    rules: [
      {
        alert: "LlmHaAgentDown",
        expr: `up{job="${t.agentJob}"} == 0`,
        for: "2m",
        labels: { severity: "warning" },
        annotations: {
          summary: "The llm-ha agent on {{ $labels.node }} is not answering scrapes",
          description: "Without its agent a node keeps only HAProxy's plain check: GPU faults and a wedged engine go unseen there.",
          runbook: "kubectl -n llm-ha get pods -o wide on the node; describe and read the logs of the agent pod.",
        },
      },
      {
        alert: "LlmHaAgentStalled",
        expr: "max by (cluster, az, node) (llmha_evaluation_age_seconds) > 30",
        for: "2m",
        labels: { severity: "warning" },
        annotations: {
          summary: "The llm-ha agent on {{ $labels.node }} answers scrapes but has not evaluated its node for over 30 s",
          description: "Its status, agent-check reply and heartbeat are frozen at the last decision: a fault on the node now goes unseen.",
          runbook: "kubectl logs the agent pod (event loop blocked? nvidia-smi hung in D state?); restart the pod if it does not recover.",
        },
      },
      {
        alert: "LlmHaAgentsMissing",
        expr: `absent(up{job="${t.agentJob}"})`,
        for: "10m",
        labels: { severity: "critical" },
        annotations: {
          summary: "Prometheus scrapes no llm-ha agent",
          description: "No agent target exists: every other llm-ha alert is blind.",
          runbook: "Check the PodMonitor (kubectl -n llm-ha get podmonitor), Prometheus' targets page and the agent DaemonSets.",
        },
      },
      {
        alert: "LlmHaRedisUnreachable",
        expr: "max by (cluster, az, node) (llmha_redis_connected) == 0",
        for: "1m",
        labels: { severity: "warning" },
        annotations: {
          summary: "The agent on {{ $labels.node }} cannot reach Redis",
          description: "Its node drops out of the registry when its heartbeat expires, and it cannot lead.",
          runbook: "From the node: DNS of the Redis endpoint, security group, TLS; kubectl logs the agent for the Redis error.",
        },
      },
      {
        alert: "LlmHaRedisUnreachableFleet",
        expr: "avg by (cluster) (llmha_redis_connected) < 0.5",
        for: "1m",
        labels: { severity: "critical" },
        annotations: {
          summary: "Most llm-ha agents cannot reach Redis in {{ $labels.cluster }}",
          description: "The registry and the leader lease live in Redis; L1 keeps working on each node, L2 and L3 stop.",
          runbook: "Check the ElastiCache replication group (events, failover, CPU, connections) and the auth token Secret.",
        },
      },
    ],
  };
}
