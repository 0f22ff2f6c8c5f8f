/**
 * The game day's AWS FIS vocabulary, shared by the stack (infra/gameday/) and the policy pack
 * (policies/gameday.ts): the scenarios that have a cloud form, the FIS actions and target
 * resource types the templates use, and nothing else. A leaf: it imports nothing.
 */

/**
 * The drill scenarios (docs/drill.md) with a cloud form, each one FIS experiment template.
 * `gpu-lost`: one GPU instance stopped. `az-gpu-loss`: every GPU instance of one AZ stopped and
 * new launches there refused. `az-power-interruption`: FIS's "AZ Availability: Power
 * Interruption" on what the stack owns in one AZ (GPU instances, launches, the Redis node there,
 * the private subnet's connectivity). `redis-failover`: the Redis primary's AZ loses power, so
 * ElastiCache promotes a replica. `leader-kill`: a controller pod deleted. `redis-latency`: the
 * agents' traffic to the Redis endpoint delayed.
 */
export const GAMEDAY_SCENARIOS = Object.freeze(["gpu-lost", "az-gpu-loss", "az-power-interruption", "redis-failover", "leader-kill", "redis-latency"] as const);
export type GamedayScenario = (typeof GAMEDAY_SCENARIOS)[number];

/** FIS action ids the templates use (AWS FIS actions reference; the ElastiCache one under its current name). */
export const FIS_ACTIONS = Object.freeze({
  stopInstances: "aws:ec2:stop-instances",
  insufficientCapacity: "aws:ec2:asg-insufficient-instance-capacity-error",
  redisAzPower: "aws:elasticache:replicationgroup-interrupt-az-power",
  disruptConnectivity: "aws:network:disrupt-connectivity",
  podDelete: "aws:eks:pod-delete",
  podNetworkLatency: "aws:eks:pod-network-latency",
});

/** FIS target resource types the templates use. */
export const FIS_RESOURCE_TYPES = Object.freeze({
  instance: "aws:ec2:instance",
  autoScalingGroup: "aws:ec2:autoscaling-group",
  replicationGroup: "aws:elasticache:replicationgroup",
  subnet: "aws:ec2:subnet",
  pod: "aws:eks:pod",
});

/** The policy pack's default allow lists: exactly what the templates use. */
export const ALLOWED_FIS_ACTIONS: readonly string[] = Object.freeze(Object.values(FIS_ACTIONS));
export const ALLOWED_FIS_RESOURCE_TYPES: readonly string[] = Object.freeze(Object.values(FIS_RESOURCE_TYPES));

/**
 * The target parameters that scope an `aws:eks:pod` target. FIS refuses ARNs and tags for pods
 * (they are found through the Kubernetes API), so a pod target is held to one cluster, one
 * namespace and a selector instead.
 */
export const POD_TARGET_PARAMETERS = Object.freeze(["clusterIdentifier", "namespace", "selectorType", "selectorValue"] as const);

/** The stop condition source of a CloudWatch alarm; `none` is the other one FIS knows. */
export const ALARM_STOP_SOURCE = "aws:cloudwatch:alarm";
