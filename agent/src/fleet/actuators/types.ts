/**
 * What the leader may do to the world beyond Redis: wake the standby AZ's GPU groups,
 * hand them back to their schedule, and shift a zone's load-balancer traffic away (ARC
 * zonal shift) and back. One interface, three implementations:
 *
 * - `aws.ts`     — AWS SDK v3 (Auto Scaling, ARC zonal shift), for the real cluster;
 * - `local.ts`   — the drill's simulated standby nodes and HAProxy servers;
 * - `dry-run.ts` — logs and records the decision, calls nothing.
 *
 * Every action is desired state and idempotent: asking twice for what already holds makes
 * no change (`outcome: "already"`). Every call is stamped with the caller's fencing token;
 * `FencedActuator` (gate.ts) refuses a stale token before the implementation is reached,
 * and writes each call and its result to the `events` stream and to metrics.
 */

import type { WakeHealth } from "./wake-follow";

/** `capacity.size`: a GPU group created at zero on a capacity reservation, sized once the reservation is active (aws/reserved.ts). */
export const ACTIONS = ["standby.wake", "standby.release", "shift.start", "shift.cancel", "capacity.size"] as const;
export type ActionName = (typeof ACTIONS)[number];
/** The actions the reconciler drives toward the controller's desired state (one slot each: standby, shift). */
export type StateActionName = Exclude<ActionName, "capacity.size">;

export const OUTCOMES = ["applied", "already", "dry-run", "refused-stale", "failed"] as const;
export type ActionOutcome = (typeof OUTCOMES)[number];

export interface ActionContext {
  /** Fencing token of the leader term asking. */
  token: number;
  /** Why (the controller's reason: "capacity lost: us-east-1a=DOWN"). */
  reason: string;
  /** `standby.wake` only: the leader's word on the woken capacity's health (wake-follow.ts `WakeHealth`). */
  wakeHealth?: WakeHealth;
}

export interface ShiftContext extends ActionContext {
  /** The shift ends by itself after this long unless renewed (ARC needs an expiry). */
  expiresInMs: number;
}

export interface ActionResult {
  action: ActionName;
  /** The AZ acted on. */
  az: string;
  outcome: ActionOutcome;
  /** Provider API calls made, reads included (0 for dry-run and refused-stale). */
  calls: number;
  /** Human detail: what changed ("asg-a min 0→2 max 0→4 desired 0→2"), or the error. */
  detail: string;
  /** Wall time of the action. */
  durationMs: number;
  /** `standby.wake` only, from actuators that follow the wake (wake-follow.ts): where it stands. */
  wake?: WakeReport;
  /** `capacity.size` only: the group sized. */
  group?: string;
}

/** Why a launch failed, from the provider's own status message (wake-follow.ts `classifyLaunchFailure`). */
/** `unhealthy`: instances in service whose nodes never became HEALTHY within the bound (booted onto bad GPUs). */
export const WAKE_FAILURE_CLASSES = ["capacity", "quota", "launch-config", "timeout", "unhealthy", "unknown"] as const;
export type WakeFailureClass = (typeof WAKE_FAILURE_CLASSES)[number];

export interface WakeFailure {
  class: WakeFailureClass;
  /** The group (node group, instance type) whose launch failed. */
  group: string;
  /** The provider's status message, as given. */
  message: string;
  /** Epoch ms of the failed launch (the scaling activity's start). */
  at: number;
}

/**
 * A followed wake: `waiting` (launched, nothing in service yet), `serving` (a standby
 * instance in service), `fallback` (this call woke the next step of the fallback order),
 * `unavailable` (every step failed: capacity unavailable, `failure` says why).
 */
export interface WakeReport {
  phase: "waiting" | "serving" | "fallback" | "unavailable";
  /** The step in charge now (0 = the standby groups, then the fallback order). */
  step: number;
  steps: number;
  /** Its groups. */
  groups: string[];
  /** The first failed launch of this wake, if any. */
  failure?: WakeFailure;
  /** Epoch ms the step in charge was woken. */
  stepWokenAt?: number;
  /** Steps this call judged `unhealthy` (in service, no healthy node within the bound; `group` names the step's groups): the reconciler keeps them failed for the incident. */
  unhealthy?: WakeFailure[];
}

/**
 * A change to the cloud the controller did not make: a zonal shift without llm-ha's
 * comment, a standby or fallback group resized or held off its schedule by someone else.
 * Reported (metric, event, alert), never undone by llm-ha: it may be an operator's.
 */
export const FOREIGN_KINDS = ["shift", "standby"] as const;
export type ForeignKind = (typeof FOREIGN_KINDS)[number];

export interface ForeignAction {
  kind: ForeignKind;
  /** Stable while the change stands (a shift's id; a group with its sizes): reported once per sighting. */
  id: string;
  /** The AZ it concerns, when known. */
  az: string | null;
  detail: string;
}

/**
 * What gives the standby AZ its capacity (`LLMHA_CAPACITY_ENGINE`): `asg`, the actuator itself
 * (Auto Scaling group sizes, or the drill's node groups), or `karpenter` (NodePool limits and a
 * placeholder workload, karpenter/standby.ts). Both follow the wake with wake-follow.ts's
 * decision, so the leader's decisions are the same whichever engine acts.
 */
export interface CapacityEngine {
  /** Raise the standby AZ's capacity to its wake size now, whatever the schedule says (also when it set it to 0). */
  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult>;
  /** Incident over: give the capacity back to the scale-to-zero schedule. */
  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult>;
  /** Reads the world for changes the controller did not make (reads only). Absent: the engine cannot tell. */
  audit?(): Promise<ForeignAction[]>;
}

export interface Actuator extends CapacityEngine {
  /** `aws`, `local`, `dry-run` (shown in events, metrics and `llm-ha status`). */
  readonly kind: string;
  /** Shift traffic away from `az` on the zone's load balancers, with an expiry (renewing an active shift is `already` or extends it). */
  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult>;
  /** Cancel our shift away from `az`. */
  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult>;
  /**
   * Size the GPU groups created at zero on a reservation once it is active, and bring a group
   * whose reservation ended to zero: one result per configured group. Absent: none configured.
   */
  sizeReserved?(ctx: ActionContext): Promise<ActionResult[]>;
  /** Reads the world for changes the controller did not make (reads only). Absent: the actuator cannot tell. */
  audit?(): Promise<ForeignAction[]>;
  /** Release clients and timers. */
  close?(): Promise<void>;
}
