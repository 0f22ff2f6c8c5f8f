/**
 * The rollout as the status views read it: the leader's fenced `rollout` hash (`state` JSON,
 * `current`, `allow`, `at`) and the `rollout:request` key, turned into a `RolloutView`. Pure:
 * the hash and the request in, the view out; `llm-ha status` and `llm-ha rollout` both use it.
 */
import { GATES, ROLLOUT_PHASES, TERMINAL_PHASES, type GateVerdict, type RolloutPhase, type RolloutRequest, type RolloutState, type RolloutStep } from "../../fleet/rollout/types";
import type { RolloutStateView, RolloutStepState, RolloutView } from "./types";

/** A rollout that ended longer ago than this is no longer shown by `llm-ha status` (the JSON still carries it). */
export const ROLLOUT_SHOWN_AFTER_END_MS = 3_600_000;
/** A request older than this that the leader has not acted on is no longer called pending. */
export const ROLLOUT_REQUEST_PENDING_MS = 3_600_000;
/**
 * The leader acts on a request within a period or two (seconds): one not taken within this was
 * refused by it, or no leader runs. A newer request may replace it (status says it is overdue).
 */
export const ROLLOUT_REQUEST_OVERDUE_MS = 60_000;

export function isTerminal(phase: RolloutPhase): boolean {
  return TERMINAL_PHASES.includes(phase);
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
/** A number from a Redis field; null when missing or not a number. */
const num = (v: string | undefined): number | null => (v === undefined || v === "" || !Number.isFinite(Number(v)) ? null : Number(v));
const n = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** The leader's `state` JSON, checked field by field; a string says what is wrong with it. */
export function parseRolloutState(json: string): RolloutState | string {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    return `the rollout state is not JSON (${(e as Error).message})`;
  }
  if (!isObj(v)) return "the rollout state is not a JSON object";
  const phase = str(v.phase) as RolloutPhase;
  if (!ROLLOUT_PHASES.includes(phase)) return `the rollout state has an unknown phase ${JSON.stringify(v.phase)}`;
  if (!str(v.id)) return "the rollout state has no id";
  const rev = (r: unknown): { revision: string; image?: string } => (isObj(r) ? { revision: str(r.revision), ...(str(r.image) ? { image: str(r.image) } : {}) } : { revision: "" });
  const steps: RolloutStep[] = (Array.isArray(v.steps) ? v.steps : []).filter(isObj).map((s, i) => ({
    index: n(s.index) ?? i,
    az: str(s.az),
    kind: s.kind === "standby" || s.kind === "canary" ? s.kind : "az",
    nodes: strs(s.nodes),
    switched: strs(s.switched),
  }));
  const gates: GateVerdict[] = (Array.isArray(v.gates) ? v.gates : [])
    .filter(isObj)
    .filter((g) => (GATES as readonly string[]).includes(str(g.gate)))
    .map((g) => ({ gate: str(g.gate) as GateVerdict["gate"], verdict: g.verdict === "pass" || g.verdict === "fail" ? g.verdict : "wait", detail: str(g.detail) }));
  const pausedFrom = str(v.pausedFrom) as RolloutPhase;
  return {
    id: str(v.id),
    from: rev(v.from),
    to: rev(v.to),
    steps,
    step: n(v.step) ?? 0,
    phase,
    ...(ROLLOUT_PHASES.includes(pausedFrom) ? { pausedFrom } : {}),
    startedAt: n(v.startedAt) ?? 0,
    since: n(v.since) ?? n(v.startedAt) ?? 0,
    switchedAt: n(v.switchedAt),
    bakeMs: n(v.bakeMs) ?? 0,
    gates,
    reason: str(v.reason),
    by: str(v.by),
    updatedAt: n(v.updatedAt) ?? 0,
  };
}

/** An operator's or the Pulumi program's request, as written; null when absent or not one. */
export function parseRolloutRequest(json: string | null): RolloutRequest | null {
  if (!json) return null;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isObj(v) || !["start", "pause", "resume", "abort", "promote"].includes(str(v.op)) || !str(v.id)) return null;
  return v as unknown as RolloutRequest;
}

/**
 * How each step stands. Going forward, the steps before the one under way have baked and those
 * after it wait. Rolling back restores this step first, then the earlier ones, one AZ at a time:
 * a step's `switched` then lists what was restored of it, so a later step with nodes in it was
 * restored and one without was never touched.
 */
export function stepStates(s: RolloutState): RolloutStepState[] {
  return s.steps.map((step, i): RolloutStepState => {
    switch (s.phase) {
      case "promoted":
        return "baked";
      case "rolled-back":
      case "aborted":
        return step.switched.length ? "restored" : "untouched";
      case "rolling-back":
        if (i === s.step) return "restoring";
        if (i < s.step) return "to restore";
        return step.switched.length ? "restored" : "untouched";
      default:
        return i < s.step ? "baked" : i > s.step ? "pending" : s.phase;
    }
  });
}

/**
 * The view of the `rollout` hash and the request key at Redis time `now`. Null when neither
 * holds anything. A request is pending while the leader has not acted on it: a `start` whose
 * id is not the state's, or another op newer than the leader's last write of the state.
 */
export function rolloutView(h: Record<string, string>, request: string | null, now: number): RolloutView | null {
  const req = parseRolloutRequest(request);
  if (Object.keys(h ?? {}).length === 0 && !req) return null;
  let last: RolloutStateView | null = null;
  let error: string | undefined;
  if (h.state) {
    const s = parseRolloutState(h.state);
    if (typeof s === "string") error = s;
    else {
      const active = !isTerminal(s.phase);
      const bakeLeftMs = s.phase === "baking" && s.switchedAt !== null ? Math.max(0, s.switchedAt + s.bakeMs - now) : null;
      last = { ...s, active, phaseAgeMs: Math.max(0, now - s.since), bakeLeftMs, stepStates: stepStates(s) };
    }
  }
  const writtenAt = num(h.at) ?? num(h.updatedAt);
  const acted = req !== null && (req.op === "start" ? last?.id === req.id : req.at <= Math.max(last?.updatedAt ?? 0, writtenAt ?? 0));
  const pending = req && !acted && now - req.at <= ROLLOUT_REQUEST_PENDING_MS ? req : null;
  const recent = last !== null && (last.active || now - last.since <= ROLLOUT_SHOWN_AFTER_END_MS);
  return {
    current: h.current || null,
    allow: (h.allow ?? "").split(",").filter(Boolean),
    last,
    ...(error ? { error } : {}),
    writtenAt,
    ageMs: writtenAt === null ? null : Math.max(0, now - writtenAt),
    pending,
    shown: recent || pending !== null || error !== undefined,
  };
}

/** The revision of the `models` hash's majority (`id@revision dtype:… ctx:…`); null when it names none. */
export function majorityRevision(majority: string | null | undefined): string | null {
  const m = /@(\S+)/.exec(majority ?? "");
  return m ? m[1] : null;
}
