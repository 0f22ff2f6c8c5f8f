/**
 * What the repair scenarios (repair.ts) read beyond the observer: the leader's repair keys in
 * Redis (`repair:active`, `repair:plan`, sampled every 250 ms), the local cloud's log of repair
 * steps (the order they reached the instances), the leader's `llmha_repair_held` gauge (what
 * `LlmHaRepairHeld` watches), and the drill's own resets between runs: the repair history
 * cleared (each run starts from hosts never repaired), an operator's repair of a node left held.
 */
import { writeFile } from "node:fs/promises";
import { parseActive, type ActiveRepair } from "../../../agent/src/fleet/repair/act";
import { PLAN_META, planEntries, type PlanEntry } from "../../../agent/src/fleet/repair/plan";
import { sleep } from "../../../agent/src/util/net";
import type { SimNode } from "../../sim/sim-node";
import type { LocalCloud } from "../local-cloud";
import { KeySampler } from "./key-sampler";
import type { InstanceAction } from "../local-instances";
import type { ScenarioContext } from "./runner";

export interface RepairSample {
  t: number;
  active: Map<string, ActiveRepair>;
  plan: Map<string, PlanEntry>;
  mode: string;
  quarantined: string[];
}

/** The leader's repair keys, sampled until `stop`. */
export class RepairWatch extends KeySampler<RepairSample> {
  constructor(ctx: ScenarioContext) {
    super(ctx, 250);
  }

  /** The keys now (on the drill's clock). */
  async read(): Promise<RepairSample> {
    const t = this.ctx.now();
    const [active, plan] = await Promise.all([this.redis.hgetall(this.keys.repairActive), this.redis.hgetall(this.keys.repairPlan)]);
    return { t, active: parseActive(active), plan: planEntries(plan), mode: plan[PLAN_META.mode] ?? "", quarantined: (plan[PLAN_META.quarantined] ?? "").split(",").filter(Boolean) };
  }

  latest(): RepairSample | null {
    return this.samples.at(-1) ?? null;
  }

  /**
   * Each run starts from hosts never repaired: the history the ladder escalates from (a reboot
   * within 24 h makes the next fault a quarantine) is cleared; nothing may be under way.
   */
  async resetHistory(): Promise<number> {
    await this.redis.del(this.keys.repairHistory);
    return Object.keys(await this.redis.hgetall(this.keys.repairActive)).filter((k) => !["token", "leader", "at"].includes(k)).length;
  }

  /**
   * An operator's repair of a node the ladder left held (a failed step): its GPUs healed by hand,
   * uncordoned and its inference pod back through the cloud, then its field removed from
   * `repair:active` (what the plan's reason tells the operator to do).
   */
  async operatorRepair(cloud: LocalCloud, n: SimNode, restartAgent: boolean): Promise<void> {
    await n.gpuFault(null);
    await cloud.settled(n.az);
    if (!n.running) await n.boot();
    else if (restartAgent) {
      // A fatal XID keeps the node out until its agent restarts (as after a reboot).
      await writeFile(n.xidLogPath, "");
      await n.stopAgent();
      await n.startAgent();
    }
    // The node's record shows the fault gone before the ladder reads it without the failed entry.
    await sleep(3000);
    await this.redis.hdel(this.keys.repairActive, n.id);
    if (cloud.instances.isCordoned(n.id)) cloud.instances.answer("uncordon", { node: n.id, reason: "operator" });
    if (!n.serving) cloud.instances.answer("restart", { node: n.id, reason: "operator" });
  }

  /** The leader's `llmha_repair_held` (its `/metrics`; the agent whose `llmha_leader` is 1), null when no leader answered. */
  async heldGauge(): Promise<number | null> {
    for (const n of this.ctx.stack.running()) {
      const text = await fetch(`${n.agentUrl}/metrics`, { signal: AbortSignal.timeout(1500) }).then((r) => r.text(), () => "");
      if (!/^llmha_leader(\{[^}]*\})? 1$/m.test(text)) continue;
      const m = /^llmha_repair_held(?:\{[^}]*\})? (\d+)$/m.exec(text);
      return m ? Number(m[1]) : null;
    }
    return null;
  }

}

/** The repair calls that reached a node's instance between two times, in order. */
export function stepsOf(cloud: LocalCloud, node: string, from: number, until = Infinity): InstanceAction[] {
  return cloud.instances.actions.filter((a) => a.node === node && a.t >= from && a.t <= until);
}

/** `cordon, drain (pending ×3), reboot, uncordon`: the calls in order, repeats of a pending step folded. */
export function stepsText(actions: readonly InstanceAction[]): string {
  const out: string[] = [];
  let pending = 0;
  for (const a of actions) {
    if (a.outcome === "pending") {
      pending += 1;
      continue;
    }
    const extra = a.step === "drain" && pending ? ` (pending ×${pending})` : "";
    if (a.step === "drain") pending = 0;
    out.push(`${a.step}${extra}${a.outcome === "error" ? " ERROR" : a.outcome === "already" ? " (already)" : ""}`);
  }
  if (pending) out.push(`drain (pending ×${pending})`);
  return out.join(", ");
}

/** The steps that took effect (applied or already), each once, in order of first effect. */
export function effectiveSteps(actions: readonly InstanceAction[]): string[] {
  const out: string[] = [];
  for (const a of actions) if ((a.outcome === "applied" || a.outcome === "already") && !out.includes(a.step)) out.push(a.step);
  return out;
}

/** 1 when the effective steps are not exactly `expected` in that order, else 0. */
export function outOfOrder(actions: readonly InstanceAction[], expected: readonly string[]): number {
  const got = effectiveSteps(actions);
  return got.length === expected.length && got.every((s, i) => s === expected[i]) ? 0 : 1;
}

/** Most nodes of `az` in repair at once, from the cloud's log: a node is in repair from its cordon to its uncordon or termination. */
export function maxInRepair(cloud: LocalCloud, nodes: readonly string[], from: number, until: number): number {
  const edges: { t: number; d: number }[] = [];
  for (const id of nodes) {
    const acts = stepsOf(cloud, id, from, until).filter((a) => a.outcome === "applied" || a.outcome === "already");
    let open: number | null = null;
    for (const a of acts) {
      if (a.step === "cordon" && open === null) open = a.t;
      if ((a.step === "uncordon" || a.step === "terminate") && open !== null) {
        edges.push({ t: open, d: 1 }, { t: a.t, d: -1 });
        open = null;
      }
    }
    if (open !== null) edges.push({ t: open, d: 1 }, { t: until, d: -1 });
  }
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let cur = 0;
  let max = 0;
  for (const e of edges) max = Math.max(max, (cur += e.d));
  return max;
}
