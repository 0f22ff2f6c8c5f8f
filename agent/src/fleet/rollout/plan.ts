/**
 * The rollout's order and its state machine, pure (no I/O, no clock: `now` is given).
 *
 * `planSteps`: the standby AZ first where it has serving nodes; else, where the actuator changes
 * one node at a time, one canary node of the first AZ (sorted) as its own step; then each AZ in
 * turn with its remaining nodes. An actuator that changes a whole AZ gets whole-AZ steps.
 *
 * `stepRollout`: one period. An operator's request first (requests.ts), then the gates (a failed
 * one rolls back), then the phase: `switching` moves the step's nodes in batches that keep the
 * AZ at or above its floor, the next batch once the last one serves the new revision and is
 * HEALTHY; `baking` waits `bakeMs` with no gate failing or waiting; `rolling-back` restores the
 * old revision on every node asked to switch, the current step first, then the earlier ones in
 * reverse, one AZ at a time, in batches within the floor. Never two AZs in flux: a step starts
 * only when the one before it has baked (or, rolling back, is restored).
 */
import { applyRequest } from "./requests";
import { evaluateGates } from "./gates";
import { enterRollback, isActive, pickBatch, restoreTargets, type RolloutAction, type RolloutStepResult } from "./steps";
import type { GateName, RolloutRequest, RolloutSettings, RolloutState } from "./types";
import { serves, type RolloutObservation } from "./view";

export { enterRollback, isActive, pickBatch, planSteps, restoreTargets, type PlanInput, type RolloutAction, type RolloutStepResult } from "./steps";

export function stepRollout(
  prev: RolloutState | null,
  obs: RolloutObservation,
  request: RolloutRequest | null,
  settings: RolloutSettings,
  now: number,
  o: { gates?: readonly GateName[] } = {},
): RolloutStepResult {
  const actions: RolloutAction[] = [];
  const r = request ? applyRequest(prev, request, obs, settings, now) : { state: prev, notice: null, promote: false };
  let state = r.state ? structuredClone(r.state) : null;
  if (!state || !isActive(state)) return { state, actions, notice: r.notice };
  if (state.phase !== "rolling-back") {
    state.gates = evaluateGates({ state, obs, settings, now }, o.gates);
    const failed = state.gates.filter((g) => g.verdict === "fail");
    if (failed.length) state = enterRollback(state, failed[0].gate, failed.map((g) => `${g.gate}: ${g.detail}`).join("; "), now);
  }
  if (state.phase === "baking") state = bake(state, r.promote, now);
  if (state.phase === "promoted") actions.push(...finishActions(state, obs));
  if (state.phase === "switching") state = advanceSwitching(state, obs, now, actions);
  else if (state.phase === "rolling-back") state = advanceRollback(state, obs, now, actions);
  state.updatedAt = now;
  return { state, actions, notice: r.notice };
}

/** The bake ends after `bakeMs` with every gate passing (an operator's promote ends it now): the next step, or promoted. */
function bake(state: RolloutState, promote: boolean, now: number): RolloutState {
  const waiting = state.gates.filter((g) => g.verdict === "wait");
  const baked = state.switchedAt !== null && now - state.switchedAt >= state.bakeMs;
  if (!promote && (!baked || waiting.length)) return state;
  const how = promote ? "promoted by the operator" : `baked ${Math.round(state.bakeMs / 1000)} s`;
  const step = state.steps[state.step];
  if (state.step + 1 >= state.steps.length) {
    return { ...state, phase: "promoted", since: now, reason: `the fleet serves ${state.to.revision}: every step done (the last one ${how})` };
  }
  const next = state.steps[state.step + 1];
  return { ...state, step: state.step + 1, phase: "switching", since: now, switchedAt: null, reason: `step ${step.index + 1}/${state.steps.length} (${step.az}) ${how}; step ${next.index + 1}: ${next.kind} ${next.az} (${next.nodes.length} nodes)` };
}

/**
 * The promoted rollout's last word, once: every AZ of the fleet asked for the new revision as a
 * whole, so an AZ that had no serving node (the standby scaled to zero) and a node that was out
 * when the steps were planned start on it later. Where the steps moved an AZ already, the
 * actuator answers `already` for it.
 */
function finishActions(state: RolloutState, obs: RolloutObservation): RolloutAction[] {
  // The standby AZ by name: scaled to zero it has no node record and no AZ state to list it.
  const azs = [...new Set([...obs.azs.map((a) => a.az), ...obs.nodes.map((n) => n.az), ...state.steps.map((s) => s.az), obs.standbyAz ?? ""])].filter(Boolean).sort();
  return azs.map((az) => ({ step: state.steps.length - 1, az, nodes: [], to: state.to, restore: false, finish: true, reason: `rollout ${state.id} promoted: ${az} as a whole asks for ${state.to.revision} (nodes that start later start on it)` }));
}

/** The next batch of the step once the last one serves the new revision and is HEALTHY; baking once every node of it does. */
function advanceSwitching(state: RolloutState, obs: RolloutObservation, now: number, actions: RolloutAction[]): RolloutState {
  const step = state.steps[state.step];
  const byId = new Map(obs.nodes.map((n) => [n.nodeId, n]));
  const done = (id: string): boolean => serves(byId.get(id), state.to.revision) && byId.get(id)!.status === "HEALTHY";
  if (step.switched.some((id) => !done(id))) return state;
  const remaining = step.nodes.filter((id) => !step.switched.includes(id));
  if (!remaining.length) {
    return { ...state, phase: "baking", since: now, switchedAt: now, reason: `step ${step.index + 1}/${state.steps.length}: every node of ${step.az} serves ${state.to.revision}; baking ${Math.round(state.bakeMs / 1000)} s` };
  }
  const batch = obs.granularity === "az" ? remaining : pickBatch(remaining, obs, step.az);
  step.switched = [...step.switched, ...batch];
  step.askedAt = { ...(step.askedAt ?? {}), ...Object.fromEntries(batch.map((id) => [id, now])) };
  actions.push({ step: step.index, az: step.az, nodes: batch, to: state.to, restore: false, reason: `rollout ${state.id} step ${step.index + 1}/${state.steps.length} (${step.kind} ${step.az}): ${step.switched.length} of ${step.nodes.length} nodes` });
  return state;
}

/** Restores the current step's asked nodes in batches; once they all serve the old revision, the step before it; at step 0, the end. */
/** A switch that did not happen (the call failed): its nodes are not asked, so the next period asks again. */
export function unask(state: RolloutState, a: RolloutAction): RolloutState {
  const s = structuredClone(state);
  const step = s.steps[a.step];
  if (!step) return s;
  step.switched = step.switched.filter((id) => !a.nodes.includes(id));
  if (!a.restore && step.askedAt) for (const id of a.nodes) delete step.askedAt[id];
  return s;
}

function advanceRollback(state: RolloutState, obs: RolloutObservation, now: number, actions: RolloutAction[]): RolloutState {
  const byId = new Map(obs.nodes.map((n) => [n.nodeId, n]));
  // Back: serving the old revision and HEALTHY (a node still loading may report its old revision
  // until its server restarts). A node gone is not waited for (it comes back through the repair
  // ladder or its group, on the allowed revisions).
  const back = (id: string): boolean => !byId.get(id)?.alive || (serves(byId.get(id), state.from.revision) && byId.get(id)!.status === "HEALTHY");
  for (;;) {
    const step = state.steps[state.step];
    if (step.switched.some((id) => !back(id))) return state;
    const remaining = restoreTargets(step).filter((id) => !step.switched.includes(id));
    if (remaining.length) {
      const batch = obs.granularity === "az" ? remaining : pickBatch(remaining, obs, step.az);
      step.switched = [...step.switched, ...batch];
      actions.push({ step: step.index, az: step.az, nodes: batch, to: state.from, restore: true, reason: `rollout ${state.id} rolling back step ${step.index + 1} (${step.az}): ${step.switched.length} of ${restoreTargets(step).length} nodes restored to ${state.from.revision}` });
      return state;
    }
    if (state.step === 0) {
      const end = state.cause === "abort" ? "aborted" : "rolled-back";
      return { ...state, phase: end, since: now, reason: `${state.reason} — every node serves ${state.from.revision} again` };
    }
    state = { ...state, step: state.step - 1, since: now };
  }
}
