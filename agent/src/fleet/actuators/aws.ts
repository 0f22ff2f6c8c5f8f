/**
 * The real cluster's actuator: EC2 Auto Scaling for the standby AZ's GPU groups, ARC zonal
 * shift for the zones' load balancers (AWS SDK v3 clients; see docs/actuators.md).
 *
 * Every action reads first and writes only what differs from the desired state, so the
 * controller can re-assert it every period: a second wake is `already` with one read and
 * no write. State that a later leader needs lives in AWS, not in this process: the sizes a
 * group had before it was woken are an ASG tag (`llm-ha:pre-wake`), and a shift llm-ha
 * started carries a comment that starts with `llm-ha `. Tokens are checked by the gate
 * (gate.ts) before anything here runs; the token and reason go into the shift comment.
 *
 * This file holds `AwsActuator`, which builds the clients and composes the parts, and is the
 * one import path for every name: aws/settings.ts (what `LLMHA_ACTUATOR=aws` reads),
 * aws/calls.ts (retries, call counting, errors), aws/standby.ts (wake, its follow and fallback, release) and
 * aws/zonal-shift.ts (ARC start, extend, cancel).
 */
import { AutoScalingClient } from "@aws-sdk/client-auto-scaling";
import type { Registry } from "prom-client";
import type { Logger } from "../../util/log";
// To use the official client once the registry carries it, change this line (and the
// command import in aws/zonal-shift.ts) to `from "@aws-sdk/client-arc-zonal-shift"`.
import { ARCZonalShiftClient } from "./arc-zonal-shift";
import { AwsCalls, CallTrace } from "./aws/calls";
import { checkShiftResources, type ReservedGroup, type StandbyGroup } from "./aws/settings";
import { ReservedActions } from "./aws/reserved";
import type { EC2Client } from "@aws-sdk/client-ec2";
import { StandbyActions } from "./aws/standby";
import { ZonalShiftActions } from "./aws/zonal-shift";
import type { RetrySettings } from "./retry";
import type { ActionContext, ActionResult, Actuator, ForeignAction, ShiftContext } from "./types";

export { AWS_CALLS_METRIC, AWS_OPERATIONS, AwsCallError, MissingIdentifierError, type AwsOperation } from "./aws/calls";
export { ActuatorSettingError, checkShiftResources, parseAzIds, parseReservedGroups, parseStandbyGroups, type ReservedGroup, type StandbyGroup } from "./aws/settings";
export { planReserved, RESERVED_SIZED_TAG } from "./aws/reserved";
export { PRE_WAKE_TAG, SCHEDULED_ACTIONS } from "./aws/standby";
export { classifyLaunchFailure, planWake, unavailableReason } from "./wake-follow";
export { expiresIn, MAX_SHIFT_EXPIRY_MS, SHIFT_COMMENT_PREFIX, shiftComment } from "./aws/zonal-shift";

export interface AwsActuatorOptions {
  /** Region of the groups and load balancers. Required. */
  region: string;
  /** The standby AZ's groups (`LLMHA_STANDBY_ASGS`). Empty: wake/release fail with a clear detail. */
  standbyGroups: StandbyGroup[];
  /** Load balancer ARNs to shift (`LLMHA_SHIFT_RESOURCES`). Empty: shifts fail with a clear detail. */
  shiftResources: string[];
  /** AZ name → AZ id (`LLMHA_AZ_IDS`). */
  azIds: Record<string, string>;
  log: Logger;
  /** The AZ the standby groups are in (`LLMHA_STANDBY_AZ`); waking another AZ then fails. Default: not checked. */
  standbyAz?: string;
  /** The fallback order when the standby groups cannot launch (`LLMHA_STANDBY_FALLBACK`), one group per step. Default none. */
  standbyFallback?: StandbyGroup[];
  /** A woken step with nothing in service this long has failed (`LLMHA_STANDBY_WAKE_BOUND_MS`). Default 900000. */
  wakeBoundMs?: number;
  /** A woken step in service with no healthy standby node this long has failed (`LLMHA_STANDBY_HEALTHY_BOUND_MS`). Default 600000. */
  healthyBoundMs?: number;
  /** GPU groups created at zero on a reservation, sized once it is active (`LLMHA_RESERVED_GROUPS`). Default none. */
  reservedGroups?: ReservedGroup[];
  /** Default: a client for `region` with `maxAttempts: 1` (retries happen here, counted). */
  autoScaling?: AutoScalingClient;
  /** Default: a client for `region` with `maxAttempts: 1`, built when a reserved group is first sized. */
  ec2?: EC2Client;
  /** Default: a client for `region` with `maxAttempts: 1`. */
  arc?: ARCZonalShiftClient;
  /** Default `DEFAULT_RETRY` (4 attempts, 200 ms base, 5 s cap). */
  retry?: Partial<RetrySettings>;
  /** Registry for `llmha_actuator_aws_calls_total`. Default none. */
  registry?: Registry;
  /** Wall clock, for shift expiries. Default `Date.now`. */
  now?: () => number;
}

export class AwsActuator implements Actuator {
  readonly kind = "aws";
  private readonly asg: AutoScalingClient;
  private readonly arc: ARCZonalShiftClient;
  private readonly calls: AwsCalls;
  private readonly standby: StandbyActions;
  private readonly shifts: ZonalShiftActions;
  private readonly reserved: ReservedActions;
  private ec2: EC2Client | null = null;

  constructor(private readonly o: AwsActuatorOptions) {
    checkShiftResources(o.shiftResources);
    this.asg = o.autoScaling ?? new AutoScalingClient({ region: o.region, maxAttempts: 1 });
    this.arc = o.arc ?? new ARCZonalShiftClient({ region: o.region, maxAttempts: 1 });
    const log = o.log.child({ component: "actuator-aws" });
    const now = o.now ?? Date.now;
    // The parts get `o` itself, not copies: they read the settings at call time, as given.
    this.calls = new AwsCalls(o, log);
    this.standby = new StandbyActions(o, { asg: this.asg, calls: this.calls, log, now });
    this.shifts = new ZonalShiftActions(o, { arc: this.arc, calls: this.calls, now });
    this.reserved = new ReservedActions(o.reservedGroups ?? [], { asg: this.asg, calls: this.calls, ec2: () => this.ec2Client() });
    if (!o.reservedGroups?.length) this.sizeReserved = undefined;
  }

  private async ec2Client(): Promise<EC2Client> {
    if (this.o.ec2) return this.o.ec2;
    const { EC2Client } = await import("@aws-sdk/client-ec2");
    return (this.ec2 ??= new EC2Client({ region: this.o.region, maxAttempts: 1 }));
  }

  /** Absent (undefined) when no reserved group is configured. */
  sizeReserved?: (ctx: ActionContext) => Promise<ActionResult[]> = () => this.reserved.size();

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.calls.act("standby.wake", az, (trace) => this.standby.wake(az, trace, ctx.wakeHealth));
  }

  releaseStandby(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.calls.act("standby.release", az, (trace) => this.standby.release(az, trace));
  }

  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.calls.act("shift.start", az, (trace) => this.shifts.start(az, ctx, trace));
  }

  cancelZonalShift(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.calls.act("shift.cancel", az, (trace) => this.shifts.cancel(az, trace));
  }

  /** Shifts and standby states the controller did not make (reads only); a part with nothing configured is skipped. */
  async audit(): Promise<ForeignAction[]> {
    const trace = new CallTrace();
    const shifts = this.o.shiftResources.length ? await this.shifts.foreign(trace) : [];
    const standby = this.o.standbyGroups.length ? await this.standby.foreign(trace) : [];
    return [...shifts, ...standby];
  }

  async close(): Promise<void> {
    if (!this.o.autoScaling) this.asg.destroy();
    if (!this.o.arc) this.arc.destroy();
    this.ec2?.destroy();
  }
}
