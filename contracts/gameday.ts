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

/** The tag on each game-day template (and its role) naming its scenario: `llm-ha gameday` finds the template by it and the stack's `Environment` tag. */
export const GAMEDAY_TAG = "llm-ha.io/gameday";

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

/** Days of the week as a game-day window names them. */
export const WEEKDAYS = Object.freeze(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"] as const);
export type Weekday = (typeof WEEKDAYS)[number];

/**
 * When a game day may start (`llm-ha:gameday.window`): on these days, from `from` to `to`
 * (`HH:MM`, 24 h, `from` before `to`) in `timeZone`. `llm-ha gameday` refuses outside it.
 */
export interface GamedayWindow {
  days: Weekday[];
  from: string;
  to: string;
  timeZone: string;
}

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;

/** What is wrong with a window, or null. */
export function windowProblem(w: GamedayWindow): string | null {
  if (!Array.isArray(w.days) || w.days.length === 0 || w.days.some((d) => !(WEEKDAYS as readonly string[]).includes(d))) return `days must be a non-empty list of ${WEEKDAYS.join(", ")}`;
  if (!HHMM.test(w.from) || !HHMM.test(w.to)) return "from and to must be HH:MM (24 h)";
  if (w.from >= w.to) return `from ${w.from} must be before to ${w.to} (a window does not cross midnight)`;
  try {
    new Intl.DateTimeFormat("en-GB", { timeZone: w.timeZone });
  } catch {
    return `timeZone ${JSON.stringify(w.timeZone)} is not an IANA time zone`;
  }
  return null;
}

/** Whether `at` falls in the window (its day and time read in the window's time zone). */
export function inWindow(w: GamedayWindow, at: Date): boolean {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-GB", { timeZone: w.timeZone, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).formatToParts(at).map((p) => [p.type, p.value]),
  );
  const hhmm = `${parts.hour}:${parts.minute}`;
  return (w.days as string[]).includes(parts.weekday) && hhmm >= w.from && hhmm < w.to;
}
