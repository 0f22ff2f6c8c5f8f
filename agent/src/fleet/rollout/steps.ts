/**
 * The building blocks of the rollout's plan (plan.ts), pure: the order of the steps, a batch
 * within an AZ's floor, what a rollback restores, and the move into `rolling-back`.
 */
import { TERMINAL_PHASES, type GateName, type Revision, type RolloutState, type RolloutStep } from "./types";
import { floorOf, type RolloutNode, type RolloutObservation } from "./view";

export interface PlanInput {
  /** Live nodes; only those serving take part. */
  nodes: readonly Pick<RolloutNode, "nodeId" | "az" | "alive" | "takesTraffic">[];
  standbyAz: string | null;
  granularity: "node" | "az";
}

/** A switch the runner carries out through the fenced actuator. */
export interface RolloutAction {
  /** Index of the step the nodes belong to. */
  step: number;
  az: string;
  nodes: string[];
  to: Revision;
  /** A rollback's restore of the old revision. */
  restore: boolean;
  /**
   * At promotion: the AZ as a whole (`nodes` empty), for what did not serve through the steps (a
   * standby AZ scaled to zero, a node out when the rollout was planned), so that it starts on the
   * new revision, not the old one the fleet no longer allows. No gate watches it; a failure is
   * logged, not retried.
   */
  finish?: boolean;
  /** One line: which step, which batch. */
  reason: string;
}

export interface RolloutStepResult {
  state: RolloutState | null;
  actions: RolloutAction[];
  /** A request that was refused or ignored, and why (recorded in the hash, logged as a warning). */
  notice: string | null;
}

export function isActive(s: RolloutState | null | undefined): boolean {
  return !!s && !TERMINAL_PHASES.includes(s.phase);
}

export function planSteps(p: PlanInput): RolloutStep[] {
  const serving = p.nodes.filter((n) => n.alive && n.takesTraffic);
  const byAz = new Map<string, string[]>();
  for (const n of [...serving].sort((a, b) => a.nodeId.localeCompare(b.nodeId))) byAz.set(n.az, [...(byAz.get(n.az) ?? []), n.nodeId]);
  const azs = [...byAz.keys()].sort();
  const steps: Omit<RolloutStep, "index">[] = [];
  const standby = p.standbyAz && byAz.has(p.standbyAz) ? p.standbyAz : null;
  if (standby) steps.push({ az: standby, kind: "standby", nodes: byAz.get(standby)!, switched: [] });
  const active = azs.filter((az) => az !== standby);
  for (const [i, az] of active.entries()) {
    const nodes = byAz.get(az)!;
    if (i === 0 && !standby && p.granularity === "node" && nodes.length > 1) {
      steps.push({ az, kind: "canary", nodes: [nodes[0]], switched: [] });
      steps.push({ az, kind: "az", nodes: nodes.slice(1), switched: [] });
    } else steps.push({ az, kind: "az", nodes, switched: [] });
  }
  return steps.map((s, index) => ({ index, ...s }));
}

/** The nodes of one batch: in order, as many as keep the AZ's healthy GPUs at or above its floor; at least one. */
export function pickBatch(candidates: readonly string[], obs: RolloutObservation, az: string): string[] {
  const byId = new Map(obs.nodes.map((n) => [n.nodeId, n]));
  const view = obs.azs.find((a) => a.az === az);
  const spare = (view?.healthyCapacity ?? 0) - floorOf(view, obs.floorShare);
  const batch: string[] = [];
  let cost = 0;
  for (const id of candidates) {
    const n = byId.get(id);
    // A node out of traffic costs its AZ nothing to switch.
    const c = n?.alive && n.takesTraffic ? n.gpus : 0;
    if (batch.length === 0 || cost + c <= spare) {
      batch.push(id);
      cost += c;
    }
  }
  return batch;
}

/** The nodes a rollback restores in a step: every node asked to switch (all of a step's nodes in states without `askedAt`). */
export function restoreTargets(step: RolloutStep): string[] {
  return step.askedAt ? Object.keys(step.askedAt).sort() : [...step.nodes];
}

/** Into `rolling-back`: each step under way or done counts its restores from zero. */
export function enterRollback(state: RolloutState, cause: GateName | "abort", reason: string, now: number): RolloutState {
  const steps = state.steps.map((s, i) => (i <= state.step ? { ...s, askedAt: s.askedAt ?? Object.fromEntries((i < state.step ? s.nodes : s.switched).map((n) => [n, state.startedAt])), switched: [] } : s));
  const { pausedFrom: _p, ...rest } = state;
  return { ...rest, steps, phase: "rolling-back", cause, reason, since: now };
}
