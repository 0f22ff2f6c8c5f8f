/**
 * `LLMHA_ACTUATOR=dry-run`: decides as the real actuator would be asked to, calls nothing
 * and reads nothing. Each decision is logged here and, through the gate (gate.ts), lands
 * in the `events` stream and in `llmha_actuator_actions_total{outcome="dry-run"}`, so a
 * new environment can watch what the leader would do before it is allowed to.
 */
import type { Logger } from "../../util/log";
import { expiresIn, type StandbyGroup } from "./aws";
import type { ActionContext, ActionName, ActionResult, Actuator, ShiftContext } from "./types";

export interface DryRunActuatorOptions {
  log: Logger;
  /** Named in the details when given (`LLMHA_STANDBY_ASGS`). Default none. */
  standbyGroups?: StandbyGroup[];
  /** Named in the details when given (`LLMHA_SHIFT_RESOURCES`). Default none. */
  shiftResources?: string[];
  /** AZ name → id, named in the details when given (`LLMHA_AZ_IDS`). Default none. */
  azIds?: Record<string, string>;
}

export class DryRunActuator implements Actuator {
  readonly kind = "dry-run";
  private readonly log: Logger;

  constructor(private readonly o: DryRunActuatorOptions) {
    this.log = o.log.child({ component: "actuator-dry-run" });
  }

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    const groups = this.o.standbyGroups?.length
      ? this.o.standbyGroups.map((g) => `${g.name} to min=desired=${g.wakeSize}`).join(", ")
      : `${az}'s standby groups to their wake size`;
    return this.decide("standby.wake", az, ctx, `would raise ${groups} and suspend their scheduled actions`);
  }

  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    const groups = this.o.standbyGroups?.length ? this.o.standbyGroups.map((g) => g.name).join(", ") : `${az}'s standby groups`;
    return this.decide("standby.release", az, ctx, `would restore ${groups} to their pre-wake sizes and resume their scheduled actions`);
  }

  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.decide("shift.start", az, ctx, `would shift ${this.resources()} away from ${this.zone(az)} for ${expiresIn(ctx.expiresInMs)}`);
  }

  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.decide("shift.cancel", az, ctx, `would cancel llm-ha's shifts of ${this.resources()} away from ${this.zone(az)}`);
  }

  private resources(): string {
    const n = this.o.shiftResources?.length ?? 0;
    return n ? `${n} load balancer${n > 1 ? "s" : ""}` : "the zone's load balancers";
  }

  private zone(az: string): string {
    const id = this.o.azIds?.[az];
    return id ? `${az} (${id})` : az;
  }

  private async decide(action: ActionName, az: string, ctx: ActionContext, detail: string): Promise<ActionResult> {
    this.log.info({ action, az, token: ctx.token, reason: ctx.reason, detail }, "dry-run: no call made");
    return { action, az, outcome: "dry-run", calls: 0, detail, durationMs: 0 };
  }
}
