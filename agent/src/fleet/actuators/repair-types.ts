/**
 * What the leader may do to one GPU node in the repair ladder's `act` mode (fleet/repair/act.ts):
 * take it out of scheduling, move its pods off, restart its inference pod, reboot its instance,
 * put it back, or replace it (one more instance asked of its group first, then the old one
 * terminated). One interface, four implementations:
 *
 * - `repair-kube.ts`    — the Kubernetes API (cordon, drain through the Eviction API, pod delete),
 *                          EC2 `RebootInstances` and EC2 Auto Scaling (repair-asg.ts), for the real cluster;
 * - `repair-local.ts`   — the drill's local cloud (simulated instances with a boot time);
 * - `repair-dry-run.ts` — logs what it would do, calls nothing;
 * - `repair-memory.ts`  — an in-memory cluster for tests.
 *
 * Every call is stamped with the caller's fencing token; `FencedRepairActuator`
 * (repair-gate.ts) refuses a stale token before the implementation is reached.
 */

export const REPAIR_STEPS = ["cordon", "drain", "restart", "reboot", "uncordon", "surge", "terminate"] as const;
export type RepairStepName = (typeof REPAIR_STEPS)[number];

/** `pending`: accepted but not finished (a drain a PodDisruptionBudget holds): ask again next period. */
export const REPAIR_OUTCOMES = ["applied", "already", "pending", "dry-run", "refused-stale", "failed"] as const;
export type RepairOutcome = (typeof REPAIR_OUTCOMES)[number];

export interface RepairStepResult {
  step: RepairStepName;
  /** The node (or, for `reboot`, the instance) acted on. */
  target: string;
  outcome: RepairOutcome;
  /** Provider API calls made (0 for dry-run and refused-stale). */
  calls: number;
  detail: string;
  /** `surge` only: whether the group was given one more instance (false: at its max, the replacement comes after the termination). */
  surged?: boolean;
}

export interface RepairContext {
  /** Fencing token of the leader term asking. */
  token: number;
  reason: string;
}

export interface RepairActuator {
  /** `kubernetes`, `local`, `dry-run`, `memory` (events, metrics). */
  readonly kind: string;
  /** Mark the node unschedulable (Kubernetes `spec.unschedulable: true`). */
  cordon(node: string, ctx: RepairContext): Promise<RepairStepResult>;
  /** Mark it schedulable again. */
  uncordon(node: string, ctx: RepairContext): Promise<RepairStepResult>;
  /** Evict its pods (DaemonSet pods stay), honouring PodDisruptionBudgets: `pending` while some remain. */
  drain(node: string, ctx: RepairContext): Promise<RepairStepResult>;
  /** Delete the node's inference pods: their DaemonSet or Deployment recreates them. */
  restart(node: string, ctx: RepairContext): Promise<RepairStepResult>;
  /** Reboot the node's cloud instance. */
  reboot(instanceId: string, ctx: RepairContext): Promise<RepairStepResult>;
  /**
   * Ask the instance's Auto Scaling group for one more instance (desired + 1, within its max) to
   * replace it, marking the group with the instance replaced, so a repeat is `already`. At its
   * max: `applied` with `surged: false` (nothing asked).
   */
  surge(instanceId: string, ctx: RepairContext): Promise<RepairStepResult>;
  /** Terminate the instance through its group: `decrement` takes the surge back; without it the group launches a replacement. */
  terminate(instanceId: string, decrement: boolean, ctx: RepairContext): Promise<RepairStepResult>;
}
