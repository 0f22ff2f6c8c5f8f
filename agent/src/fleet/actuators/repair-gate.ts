/**
 * The one door every repair action goes through: the caller's token must still be this
 * process's term and not below the highest token Redis accepted (the rule of gate.ts) — else
 * `refused-stale` and the implementation is not reached; a thrown error becomes `failed`;
 * every call is counted in `llmha_repair_steps_total`.
 */
import type { Redis } from "ioredis";
import { Counter, type Registry } from "prom-client";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import { fencedStaleReason, type TokenCheck } from "./gate";
import { REPAIR_OUTCOMES, REPAIR_STEPS, type RepairActuator, type RepairContext, type RepairStepName, type RepairStepResult } from "./repair-types";

export class RepairStepMetrics {
  readonly steps: Counter<"step" | "outcome" | "kind">;
  constructor(registry: Registry, kind: string) {
    this.steps = new Counter({ name: "llmha_repair_steps_total", help: "Repair steps the leader took on GPU nodes (act mode) by outcome", labelNames: ["step", "outcome", "kind"], registers: [registry] });
    for (const step of REPAIR_STEPS) for (const outcome of REPAIR_OUTCOMES) this.steps.inc({ step, outcome, kind }, 0);
  }
}

export interface FencedRepairOptions {
  redis: Redis;
  keys: RedisKeys;
  lease: TokenCheck;
  log: Logger;
  holder?: string;
  metrics?: RepairStepMetrics;
}

export class FencedRepairActuator implements RepairActuator {
  readonly kind: string;
  private readonly log: Logger;

  constructor(private readonly inner: RepairActuator, private readonly o: FencedRepairOptions) {
    this.kind = inner.kind;
    this.log = o.log.child({ component: "repair-actuator", actuator: inner.kind });
  }

  cordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("cordon", node, ctx, () => this.inner.cordon(node, ctx));
  }
  uncordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("uncordon", node, ctx, () => this.inner.uncordon(node, ctx));
  }
  drain(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("drain", node, ctx, () => this.inner.drain(node, ctx));
  }
  restart(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("restart", node, ctx, () => this.inner.restart(node, ctx));
  }
  reboot(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("reboot", instanceId, ctx, () => this.inner.reboot(instanceId, ctx));
  }

  surge(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("surge", instanceId, ctx, () => this.inner.surge(instanceId, ctx));
  }
  terminate(instanceId: string, decrement: boolean, ctx: RepairContext): Promise<RepairStepResult> {
    return this.run("terminate", instanceId, ctx, () => this.inner.terminate(instanceId, decrement, ctx));
  }

  /** Null when `token` may act; else why not. */
  async staleReason(token: number): Promise<string | null> {
    return fencedStaleReason(this.o, token);
  }

  private async run(step: RepairStepName, target: string, ctx: RepairContext, call: () => Promise<RepairStepResult>): Promise<RepairStepResult> {
    const stale = await this.staleReason(ctx.token);
    let r: RepairStepResult;
    if (stale) r = { step, target, outcome: "refused-stale", calls: 0, detail: stale };
    else {
      try {
        r = await call();
      } catch (err) {
        r = { step, target, outcome: "failed", calls: 0, detail: (err as Error).message };
      }
    }
    this.o.metrics?.steps.inc({ step, outcome: r.outcome, kind: this.kind });
    const level = r.outcome === "failed" || r.outcome === "refused-stale" ? "warn" : "info";
    this.log[level]({ step, target, token: ctx.token, outcome: r.outcome, calls: r.calls, detail: r.detail, reason: ctx.reason }, "repair step");
    return r;
  }
}
