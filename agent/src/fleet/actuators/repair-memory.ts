/**
 * An in-memory cluster for the repair ladder's tests and the drill: nodes with a cordon flag
 * and pods, instances that count reboots, one Auto Scaling group (desired, max) that surges and
 * terminates. `failNext` makes the next call of a step fail.
 */
import type { RepairActuator, RepairContext, RepairStepName, RepairStepResult } from "./repair-types";

export class MemoryRepairActuator implements RepairActuator {
  readonly kind = "memory";
  readonly cordoned = new Set<string>();
  /** Pods per node (names); a drain empties it, a restart recreates them. */
  readonly pods = new Map<string, string[]>();
  readonly reboots = new Map<string, number>();
  readonly restarts = new Map<string, number>();
  /** Every call made, in order: `step:target`. */
  readonly calls: string[] = [];
  /** The instances' group: a surge raises `desired` within `max`; `surgedFor` names the instance replaced. */
  readonly group = { desired: 0, max: 0, surgedFor: null as string | null };
  readonly terminated: string[] = [];
  /** Steps that fail on their next call (then cleared). */
  readonly failNext = new Set<RepairStepName>();

  private step(step: RepairStepName, target: string, apply: () => string | null): Promise<RepairStepResult> {
    this.calls.push(`${step}:${target}`);
    if (this.failNext.delete(step)) return Promise.resolve({ step, target, outcome: "failed", calls: 1, detail: `${step} failed (injected)` });
    const detail = apply();
    return Promise.resolve({ step, target, outcome: detail === null ? "already" : "applied", calls: 1, detail: detail ?? "no change" });
  }

  cordon(node: string, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("cordon", node, () => (this.cordoned.has(node) ? null : (this.cordoned.add(node), `${node} unschedulable`)));
  }
  uncordon(node: string, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("uncordon", node, () => (this.cordoned.delete(node) ? `${node} schedulable` : null));
  }
  drain(node: string, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("drain", node, () => {
      const n = this.pods.get(node)?.length ?? 0;
      this.pods.set(node, []);
      return n ? `${n} pods evicted` : null;
    });
  }
  restart(node: string, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("restart", node, () => {
      this.restarts.set(node, (this.restarts.get(node) ?? 0) + 1);
      return `inference pod on ${node} deleted`;
    });
  }
  async surge(instanceId: string, _ctx: RepairContext): Promise<RepairStepResult> {
    const g = this.group;
    let surged = false;
    const r = await this.step("surge", instanceId, () => {
      if (g.surgedFor === instanceId) return (surged = true), null;
      if (g.desired >= g.max) return `group at its max (${g.max}): the replacement comes after the termination`;
      g.desired += 1;
      g.surgedFor = instanceId;
      surged = true;
      return `desired ${g.desired - 1}→${g.desired} to replace ${instanceId}`;
    });
    return { ...r, surged };
  }
  terminate(instanceId: string, decrement: boolean, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("terminate", instanceId, () => {
      if (this.terminated.includes(instanceId)) return null;
      this.terminated.push(instanceId);
      if (decrement) this.group.desired -= 1;
      if (this.group.surgedFor === instanceId) this.group.surgedFor = null;
      return `${instanceId} terminated${decrement ? " (desired back by one)" : ""}`;
    });
  }
  reboot(instanceId: string, _ctx: RepairContext): Promise<RepairStepResult> {
    return this.step("reboot", instanceId, () => {
      this.reboots.set(instanceId, (this.reboots.get(instanceId) ?? 0) + 1);
      return `${instanceId} rebooting`;
    });
  }
}
