/**
 * The canary decision, a pure function of (previous state, one round's outcome, clock):
 * - rounds alternate the two sets (so the fleet learns both); a round that differs from the
 *   expectation makes the node SUSPECT, and the next round (at once) runs the other set;
 * - that set differing too makes it MISMATCH: drained with the hard reason `CANARY_MISMATCH`;
 *   it matching clears the suspicion (a one-off);
 * - MISMATCH holds until the inference server has restarted and then both sets match again;
 * - when most of the fleet disagrees with the expectation (the blast-radius cap: a model or
 *   config change, not one bad GPU), nothing is drained: the node is CAPPED, which alerts.
 * A round with nothing to compare against (no expectation yet, the server not answering) changes nothing.
 */
import type { CanarySet } from "./answers";

export const CANARY_PHASES = ["unknown", "ok", "suspect", "mismatch", "capped"] as const;
export type CanaryPhase = (typeof CANARY_PHASES)[number];

export interface CanaryState {
  readonly phase: CanaryPhase;
  /** Epoch ms of the last phase change. */
  readonly since: number;
  /** The set the next round runs. */
  readonly next: CanarySet;
  /** What differed last (for status and the reason's detail); "" when nothing. */
  readonly detail: string;
  /** MISMATCH only: the inference server's start count when it was drained (a restart raises it). */
  readonly startsAtDrain: number;
  /** MISMATCH after a restart: the sets matched since. */
  readonly cleanSince: readonly CanarySet[];
}

export interface CanaryRound {
  set: CanarySet;
  /** `match`: every answer within tolerance; `mismatch`: one is not; `none`: nothing to judge. */
  outcome: "match" | "mismatch" | "none";
  detail: string;
  /** The expectation is capped: most of the fleet disagrees with it. */
  capped: boolean;
  /** How many times the inference server has started (ready after not ready) so far. */
  serverStarts: number;
}

export function initialCanaryState(now: number): CanaryState {
  return { phase: "unknown", since: now, next: "first", detail: "", startsAtDrain: 0, cleanSince: [] };
}

/** Whether the phase takes the node out of rotation. */
export function canaryDrains(s: CanaryState): boolean {
  return s.phase === "mismatch";
}

export function canaryStep(prev: CanaryState, r: CanaryRound, now: number): CanaryState {
  const to = (phase: CanaryPhase, next: CanarySet, detail: string, extra: Partial<CanaryState> = {}): CanaryState => ({
    ...prev,
    phase,
    since: phase === prev.phase ? prev.since : now,
    next,
    detail,
    ...extra,
  });
  const other = r.set === "first" ? "second" : "first";
  // Nothing to judge: keep the phase; a suspect node tries the other set next.
  if (r.outcome === "none") return prev.phase === "suspect" ? { ...prev, next: other } : prev;
  if (prev.phase === "mismatch") {
    if (r.serverStarts <= prev.startsAtDrain) return to("mismatch", other, r.outcome === "mismatch" ? r.detail : prev.detail);
    // After a restart: back only once both sets match; a mismatch starts the count again.
    if (r.outcome === "mismatch") return to("mismatch", "first", r.detail, { cleanSince: [] });
    const clean = [...new Set([...prev.cleanSince, r.set])];
    if (clean.length === 2) return to("ok", other, "", { cleanSince: [], startsAtDrain: 0 });
    return to("mismatch", other, prev.detail, { cleanSince: clean });
  }
  if (r.outcome === "match") return to("ok", other, "");
  if (r.capped) return to("capped", other, r.detail);
  if (prev.phase === "suspect") return to("mismatch", other, r.detail, { startsAtDrain: r.serverStarts, cleanSince: [] });
  return to("suspect", other, r.detail);
}
