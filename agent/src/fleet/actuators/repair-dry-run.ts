/** `act` mode with `LLMHA_ACTUATOR=dry-run`: every repair step is logged and reported `dry-run`; nothing is called. */
import type { Logger } from "../../util/log";
import type { RepairActuator, RepairContext, RepairStepName, RepairStepResult } from "./repair-types";

export class DryRunRepairActuator implements RepairActuator {
  readonly kind = "dry-run";
  constructor(private readonly log: Logger) {}
  cordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("cordon", node, ctx, `would mark node ${node} unschedulable`);
  }
  uncordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("uncordon", node, ctx, `would mark node ${node} schedulable again`);
  }
  drain(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("drain", node, ctx, `would evict the inference pods on ${node} (PodDisruptionBudgets honoured)`);
  }
  restart(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("restart", node, ctx, `would delete the inference pods on ${node} so their controller recreates them`);
  }
  reboot(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("reboot", instanceId, ctx, `would reboot instance ${instanceId} (EC2 RebootInstances)`);
  }
  surge(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("surge", instanceId, ctx, `would ask the Auto Scaling group of ${instanceId} for one more instance (desired + 1, within its max)`);
  }
  terminate(instanceId: string, decrement: boolean, ctx: RepairContext): Promise<RepairStepResult> {
    return this.would("terminate", instanceId, ctx, `would terminate ${instanceId} through its Auto Scaling group (${decrement ? "taking the surge back" : "the group launches its replacement"})`);
  }
  private async would(step: RepairStepName, target: string, ctx: RepairContext, detail: string): Promise<RepairStepResult> {
    this.log.info({ step, target, token: ctx.token, reason: ctx.reason, detail }, "dry-run: no call made");
    return { step, target, outcome: "dry-run", calls: 0, detail };
  }
}
