/**
 * What the rollout scenarios (rollout.ts) read beyond the observer: the leader's `rollout` hash
 * (phase, step, the state with its gates) and what each running node serves according to the
 * local cloud (the revision and whether a switch of it is under way), sampled every 250 ms; and
 * the pure figures a run is judged by: the AZs in flux at each sample and the most at once, the
 * AZs that ever served the new revision, the first failed gate and when.
 */
import { parseState } from "../../../agent/src/fleet/rollout/read";
import { TERMINAL_PHASES, type RolloutPhase, type RolloutState } from "../../../agent/src/fleet/rollout/types";
import type { LocalCloud } from "../local-cloud";
import { KeySampler } from "./key-sampler";
import type { ScenarioContext } from "./runner";

/** One running node as the local cloud has it: the revision it serves (or is being switched to), and whether that switch is under way. */
export interface NodeRevision {
  id: string;
  az: string;
  revision: string;
  switching: boolean;
  /** Up with weight in its AZ's proxy at the observer's latest sample (absent: not read). */
  inRotation?: boolean;
}

export interface RolloutSample {
  t: number;
  /** The hash's fields (null: no hash yet, or Redis did not answer). */
  id: string | null;
  phase: string | null;
  current: string | null;
  state: RolloutState | null;
  nodes: NodeRevision[];
}

/**
 * AZs in flux at one sample: an AZ whose running nodes do not all serve one revision, or with a
 * node whose switch is under way. A rollout keeps this at one at most (a step's nodes are all in
 * one AZ, and the next step starts once this one has baked or, rolling back, is restored).
 */
export function azsInFlux(nodes: readonly NodeRevision[]): string[] {
  const byAz = new Map<string, NodeRevision[]>();
  for (const n of nodes) byAz.set(n.az, [...(byAz.get(n.az) ?? []), n]);
  return [...byAz.entries()].filter(([, ns]) => ns.some((n) => n.switching) || new Set(ns.map((n) => n.revision)).size > 1).map(([az]) => az).sort();
}

/** The most AZs in flux at any one sample between `from` and `until`. */
export function maxAzsInFlux(samples: readonly Pick<RolloutSample, "t" | "nodes">[], from = -Infinity, until = Infinity): number {
  return Math.max(0, ...samples.filter((s) => s.t >= from && s.t <= until).map((s) => azsInFlux(s.nodes).length));
}

/** AZs with a node that served `revision` (switched to it, its switch done) at any sample between `from` and `until`. */
export function azsThatServed(samples: readonly Pick<RolloutSample, "t" | "nodes">[], revision: string, from = -Infinity, until = Infinity): string[] {
  const azs = new Set<string>();
  for (const s of samples) if (s.t >= from && s.t <= until) for (const n of s.nodes) if (n.revision === revision && !n.switching) azs.add(n.az);
  return [...azs].sort();
}

/** Nodes that served `revision` at any sample between `from` and `until`. */
export function nodesThatServed(samples: readonly Pick<RolloutSample, "t" | "nodes">[], revision: string, from = -Infinity, until = Infinity): string[] {
  const ids = new Set<string>();
  for (const s of samples) if (s.t >= from && s.t <= until) for (const n of s.nodes) if (n.revision === revision && !n.switching) ids.add(n.id);
  return [...ids].sort();
}

/**
 * How long a node serving `revision` was in rotation: from the first sample with one (switch
 * done, up with weight in its AZ proxy) to the last such sample, plus one sample period; 0 when
 * none was. What clients could get from it.
 */
export function exposureMs(samples: readonly Pick<RolloutSample, "t" | "nodes">[], revision: string, periodMs: number, from = -Infinity, until = Infinity): number {
  const ts = samples.filter((s) => s.t >= from && s.t <= until && s.nodes.some((n) => n.revision === revision && !n.switching && n.inRotation)).map((s) => s.t);
  return ts.length ? ts[ts.length - 1] - ts[0] + periodMs : 0;
}

/** The first sample of rollout `id` in a terminal phase, null while none. */
export function terminalSample<S extends Pick<RolloutSample, "id" | "phase">>(samples: readonly S[], id: string): S | null {
  return samples.find((s) => s.id === id && s.phase !== null && TERMINAL_PHASES.includes(s.phase as RolloutPhase)) ?? null;
}

/** What started the rollback of rollout `id` (the failed gate, or `abort`), when it was first seen and the reason; null when it never rolled back. */
export function firstRollback(samples: readonly Pick<RolloutSample, "t" | "id" | "state">[], id: string): { t: number; cause: string; reason: string; step: number } | null {
  const s = samples.find((x) => x.id === id && x.state?.cause !== undefined);
  return s?.state ? { t: s.t, cause: s.state.cause!, reason: s.state.reason, step: s.state.step } : null;
}

/** The period of the samples (ms). */
export const ROLLOUT_SAMPLE_MS = 250;

/** The rollout keys and the nodes' revisions, sampled until `stop`. */
export class RolloutWatch extends KeySampler<RolloutSample> {
  constructor(
    ctx: ScenarioContext,
    private readonly cloud: LocalCloud,
    private readonly inRotation: (nodeId: string) => boolean = () => false,
  ) {
    super(ctx, ROLLOUT_SAMPLE_MS);
  }

  /** The hash and the revisions now (on the drill's clock). */
  async read(): Promise<RolloutSample> {
    const t = this.ctx.now();
    const nodes = this.ctx.stack.running().map((n) => ({ id: n.id, az: n.az, revision: this.cloud.rollout.revisionOf(n.id), switching: this.cloud.rollout.switching(n.id), inRotation: this.inRotation(n.id) }));
    const h = await this.redis.hgetall(this.keys.rollout);
    return { t, id: h.id ?? null, phase: h.phase ?? null, current: h.current ?? null, state: parseState(h.state), nodes };
  }

  latest(): RolloutSample | null {
    return this.samples.at(-1) ?? null;
  }

  /** Writes a request as `llm-ha rollout` does (`rollout:request`, JSON); the leader acts on it in its next period. */
  async request(req: { op: "start" | "abort"; id: string; to?: string; bakeMs?: number }): Promise<void> {
    const body = { op: req.op, id: req.id, at: Date.now(), by: "operator", ...(req.to ? { to: { revision: req.to } } : {}), ...(req.bakeMs !== undefined ? { bakeMs: req.bakeMs } : {}) };
    await this.redis.set(this.keys.rolloutRequest, JSON.stringify(body));
  }

}
