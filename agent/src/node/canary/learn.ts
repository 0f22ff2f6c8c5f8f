/**
 * Expected canary answers per model, learned from the fleet the way "same model
 * everywhere" learns the model (`evaluator/model-sameness.ts`): per model key (`id@revision …`,
 * so the two revisions of a rollout are two expectations), per prompt, the answer most nodes give
 * within tolerance — a strict majority of at least two nodes, ties to the answer seen in more AZs.
 * An operator's recorded answers (`llm-ha canary record`) take precedence over the fleet's. Once
 * an expectation exists it stays (a corrupted node cannot vote it away); when most of the nodes
 * serving the model disagree with it, it is capped: a model or config change, not bad GPUs — no
 * node is drained for it, and it alerts. Pure: the leader's Redis I/O is in `store.ts`.
 */
import { compareAnswers, selfCheck, signatureOf, type CanaryAnswer, type CanaryTolerance } from "./answers";

/** What one node answered lately, per prompt id. */
export interface NodeAnswers {
  nodeId: string;
  az: string;
  /** Model key (`modelKey` of what its server says it serves). */
  model: string;
  at: number;
  answers: Record<string, CanaryAnswer>;
}

export interface Expectation {
  source: "fleet" | "operator";
  /** Epoch ms it was learned or recorded. */
  at: number;
  answers: Record<string, CanaryAnswer>;
  /** Nodes serving the model at the last judgment, and of those the ones whose answers match. */
  nodes: number;
  agreeing: number;
  /** Nodes whose answers differ (the first 50). */
  disagreeing: string[];
  /** Most of the fleet disagrees: no drain, an alert. */
  capped: boolean;
}

const LISTED = 50;

/** Per prompt, the answer of a strict majority (≥ 2 nodes) of those that answered it; answers wrong on their own (NaN) have no vote. */
export function fleetMajority(nodes: readonly NodeAnswers[], tol: CanaryTolerance): Record<string, CanaryAnswer> {
  const byPrompt = new Map<string, { az: string; a: CanaryAnswer }[]>();
  for (const n of nodes) {
    for (const [id, a] of Object.entries(n.answers)) {
      if (selfCheck(a) !== null) continue;
      const list = byPrompt.get(id) ?? [];
      list.push({ az: n.az, a });
      byPrompt.set(id, list);
    }
  }
  const out: Record<string, CanaryAnswer> = {};
  for (const [id, list] of byPrompt) {
    const groups = new Map<string, { count: number; azs: Set<string>; a: CanaryAnswer }>();
    for (const x of list) {
      const sig = signatureOf(x.a, tol);
      const g = groups.get(sig) ?? { count: 0, azs: new Set<string>(), a: x.a };
      g.count += 1;
      g.azs.add(x.az);
      groups.set(sig, g);
    }
    const best = [...groups.entries()].sort((p, q) => q[1].count - p[1].count || q[1].azs.size - p[1].azs.size || p[0].localeCompare(q[0]))[0];
    if (best && best[1].count >= 2 && best[1].count * 2 > list.length) out[id] = best[1].a;
  }
  return out;
}

/** Whether a node's answers differ from the expectation (only prompts both have are compared). */
export function nodeDiffers(n: NodeAnswers, expected: Record<string, CanaryAnswer>, tol: CanaryTolerance): boolean {
  return Object.entries(n.answers).some(([id, a]) => expected[id] !== undefined && compareAnswers(a, expected[id], tol) !== null);
}

/**
 * The expectations to publish, model key → expectation: the operator's where recorded, else the
 * previous one kept, else the fleet's majority; each judged against the nodes serving its model now.
 */
export function learnExpectations(
  nodes: readonly NodeAnswers[],
  previous: Readonly<Record<string, Expectation>>,
  recorded: Readonly<Record<string, Expectation>>,
  tol: CanaryTolerance,
  now: number,
): Record<string, Expectation> {
  const out: Record<string, Expectation> = { ...previous };
  const models = new Set([...nodes.map((n) => n.model), ...Object.keys(recorded)]);
  for (const model of models) {
    const serving = nodes.filter((n) => n.model === model);
    const majority = fleetMajority(serving, tol);
    const base = recorded[model] ?? previous[model];
    // Prompts the fleet agrees on that the expectation lacks (a new prompt, a first learning) are added; known ones never change.
    const answers = base?.source === "operator" ? base.answers : { ...majority, ...(base?.answers ?? {}) };
    if (Object.keys(answers).length === 0) continue;
    const differing = serving.filter((n) => nodeDiffers(n, answers, tol)).map((n) => n.nodeId).sort();
    out[model] = {
      source: base?.source ?? "fleet",
      at: base?.at ?? now,
      answers,
      nodes: serving.length,
      agreeing: serving.length - differing.length,
      disagreeing: differing.slice(0, LISTED),
      capped: differing.length * 2 > serving.length && differing.length >= 2,
    };
  }
  return out;
}
