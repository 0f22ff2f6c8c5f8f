/**
 * One actuator from two parts: the standby's capacity engine (`wakeStandby`, `releaseStandby`)
 * and the actuator that does the rest (zonal shifts, reserved groups, the audit). With
 * `LLMHA_CAPACITY_ENGINE=asg` the actuator is its own engine and this is not used; with
 * `karpenter` the NodePool engine (karpenter/standby.ts) takes the standby actions, and shifts
 * stay with `aws` (ARC) or `local` (the drill's proxies). Fencing wraps the whole (gate.ts).
 */
import type { ActionContext, ActionResult, Actuator, CapacityEngine, ForeignAction, ShiftContext } from "./types";

class EngineActuator implements Actuator {
  readonly kind: string;
  sizeReserved?: (ctx: ActionContext) => Promise<ActionResult[]>;

  constructor(
    private readonly rest: Actuator,
    private readonly engine: CapacityEngine,
  ) {
    this.kind = rest.kind;
    if (rest.sizeReserved) this.sizeReserved = (ctx) => rest.sizeReserved!(ctx);
  }

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.engine.wakeStandby(az, ctx);
  }
  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.engine.releaseStandby(az, ctx);
  }
  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.rest.startZonalShift(az, ctx);
  }
  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.rest.cancelZonalShift(az, ctx);
  }
  /** The actuator's findings (shifts) and the engine's (standby capacity). */
  async audit(): Promise<ForeignAction[]> {
    const rest = this.rest.audit ? await this.rest.audit() : [];
    return [...rest, ...(this.engine.audit ? await this.engine.audit() : [])];
  }
  async close(): Promise<void> {
    await this.rest.close?.();
  }
}

/** `actuator` with its standby actions taken by `engine`. */
export function withCapacityEngine(actuator: Actuator, engine: CapacityEngine): Actuator {
  return new EngineActuator(actuator, engine);
}
