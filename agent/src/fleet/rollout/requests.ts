/**
 * An operator's (or the Pulumi program's) request applied to the rollout state, pure. A start
 * while another rollout is active is refused (the active one goes on), and so is one at tier L2
 * or above (an AZ lost or failing over: every AZ is needed at its floor); `pause`, `resume`,
 * `abort` and `promote` must name the rollout under way. A refused or ignored request leaves
 * the state as it was and says why (`notice`).
 */
import { enterRollback, isActive, planSteps } from "./steps";
import type { RolloutRequest, RolloutSettings, RolloutState } from "./types";
import { tierForbidsStart, type RolloutObservation } from "./view";

export interface RequestOutcome {
  state: RolloutState | null;
  notice: string | null;
  /** An accepted `promote`: the current bake ends now unless a gate fails. */
  promote: boolean;
}

export function applyRequest(prev: RolloutState | null, req: RolloutRequest, obs: RolloutObservation, s: RolloutSettings, now: number): RequestOutcome {
  const no = (why: string): RequestOutcome => ({ state: prev, notice: `${req.op} ${req.id} refused: ${why}`, promote: false });
  const by = req.by ?? "operator";
  if (req.op === "start") {
    if (prev && isActive(prev)) return no(`rollout ${prev.id} is ${prev.phase}; it goes on (abort it first)`);
    if (prev && prev.id === req.id) return { state: prev, notice: `start ${req.id} ignored: that rollout already ran (${prev.phase})`, promote: false };
    if (!obs.granularity) return no("no rollout actuator is configured (LLMHA_ACTUATOR): nothing can change what a node serves");
    const tier = tierForbidsStart(obs.tier);
    if (tier) return no(tier);
    const to = req.to;
    if (!to || typeof to.revision !== "string" || to.revision === "") return no("the request names no revision to roll out (`to.revision`)");
    const from = prev?.phase === "promoted" && prev.to.revision === obs.current?.revision ? prev.to : prev && prev.from.revision === obs.current?.revision ? prev.from : obs.current;
    if (!from) return no("no node serves a revision yet: nothing to roll out from");
    if (from.revision === to.revision && (to.image ?? from.image) === from.image) return no(`the fleet already serves ${to.revision}`);
    const steps = planSteps({ nodes: obs.nodes, standbyAz: obs.standbyAz, granularity: obs.granularity });
    if (!steps.length) return no("no node takes traffic: nothing to switch");
    const bakeMs = typeof req.bakeMs === "number" && Number.isFinite(req.bakeMs) && req.bakeMs >= 0 ? req.bakeMs : s.bakeMs;
    const first = steps[0];
    return {
      state: {
        id: req.id, from, to, steps, step: 0, phase: "switching", startedAt: now, since: now, switchedAt: null, bakeMs, gates: [],
        reason: `started by ${by}: ${from.revision} → ${to.revision} in ${steps.length} steps; step 1: ${first.kind} ${first.az} (${first.nodes.length} nodes)`, by, updatedAt: now,
      },
      notice: null,
      promote: false,
    };
  }
  if (!prev || !isActive(prev)) return no(prev ? `rollout ${prev.id} has ended (${prev.phase})` : "no rollout under way");
  if (req.id !== prev.id) return no(`it names rollout ${req.id}; the one under way is ${prev.id}`);
  switch (req.op) {
    case "pause":
      if (prev.phase === "rolling-back") return no("a rollback is not paused (abort is already under way or a gate failed)");
      if (prev.phase === "paused") return { state: prev, notice: `pause ${req.id} ignored: already paused`, promote: false };
      return { state: { ...prev, phase: "paused", pausedFrom: prev.phase, since: now, reason: `paused by ${by} while ${prev.phase}` }, notice: null, promote: false };
    case "resume": {
      if (prev.phase !== "paused") return { state: prev, notice: `resume ${req.id} ignored: not paused (${prev.phase})`, promote: false };
      const { pausedFrom, ...rest } = prev;
      return { state: { ...rest, phase: pausedFrom ?? "switching", since: now, reason: `resumed by ${by}` }, notice: null, promote: false };
    }
    case "abort":
      if (prev.phase === "rolling-back") {
        // Already restoring: it ends as an abort.
        return { state: { ...prev, cause: "abort", reason: `aborted by ${by} while rolling back (${prev.reason})` }, notice: null, promote: false };
      }
      return { state: enterRollback(prev, "abort", `aborted by ${by}`, now), notice: null, promote: false };
    case "promote":
      if (prev.phase !== "baking") return no(`promote ends a bake; the rollout is ${prev.phase}`);
      return { state: prev, notice: null, promote: true };
    default:
      return no(`unknown op ${JSON.stringify((req as { op: unknown }).op)}`);
  }
}
