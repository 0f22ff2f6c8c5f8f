/**
 * Same model everywhere, relaxed while a rollout is active: a node whose only difference from
 * the fleet's majority is its revision, and whose revision is one the rollout allows (`from` or
 * `to`), is no outlier then. Once the rollout ends, the normal check applies again. Pure.
 */
import type { ModelSameness } from "../../node/evaluator/model-sameness";
import { TERMINAL_PHASES, type RolloutPhase } from "./types";

/** The revisions a rollout allows now from the hash's `phase` and `allow`; null when none is active. */
export function allowedRevisions(phase: string | null | undefined, allow: string | null | undefined): string[] | null {
  if (!phase || TERMINAL_PHASES.includes(phase as RolloutPhase) || !allow) return null;
  const revs = allow.split(",").map((x) => x.trim()).filter(Boolean);
  return revs.length ? revs : null;
}

/** `same` with the outliers a rollout allows taken out (counted as agreeing), and the outlier AZs judged again. */
export function relaxForRollout(same: ModelSameness, allowed: readonly string[] | null, nodes: readonly { nodeId: string; az: string; model: string; revision?: string | null }[]): ModelSameness {
  if (!allowed || !same.majorityIdentity) return same;
  const rev = new Map(nodes.map((n) => [n.nodeId, n.revision ?? null]));
  const ok = (o: ModelSameness["outliers"][number]): boolean => o.differs.length === 1 && o.differs[0] === "revision" && allowed.includes(rev.get(o.nodeId) ?? "");
  const outliers = same.outliers.filter((o) => !ok(o));
  if (outliers.length === same.outliers.length) return same;
  const out = new Set(outliers.map((o) => o.nodeId));
  const serving = nodes.filter((n) => n.model !== "");
  const azs = [...new Set(serving.map((n) => n.az))].sort();
  const outlierAzs = azs.filter((az) => !serving.some((n) => n.az === az && !out.has(n.nodeId)));
  return { ...same, outliers, agreeing: same.agreeing + (same.outliers.length - outliers.length), outlierAzs };
}
