/**
 * `llm-ha rollout … --wait`: reads the leader's `rollout` events and hash until the rollout named
 * by `id` reaches a terminal phase, printing each step or phase change as it comes; the exit code
 * says how it ended. A Redis hiccup meanwhile is waited out (said once).
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../fleet/redis/keys";
import type { RolloutPhase, RolloutState } from "../../fleet/rollout/types";
import { isTerminal, parseRolloutState, ROLLOUT_REQUEST_OVERDUE_MS, stepStates } from "../status/rollout";
import { formatSpan, revisionText, stepText } from "../status/rollout-render";

/** Exit codes of `--wait`, by the phase the rollout ended in; `ROLLOUT_WAIT_TIMED_OUT` when it did not end in time. */
export const ROLLOUT_EXIT: Readonly<Partial<Record<RolloutPhase, number>>> = { promoted: 0, "rolled-back": 5, aborted: 6 };
export const ROLLOUT_WAIT_TIMED_OUT = 7;
/** How often `--wait` reads the events and the hash. */
export const WAIT_POLL_MS = 250;

/** One line for a step or phase change: `18:35:02Z  step 2 of 3: az-a (AZ, 2 nodes)  baking (bake 5m 00s)`. */
export function changeLine(s: RolloutState): string {
  const at = new Date(s.since).toISOString().slice(11, 19) + "Z";
  const view = { ...s, active: !isTerminal(s.phase), phaseAgeMs: 0, bakeLeftMs: null, stepStates: stepStates(s) };
  switch (s.phase) {
    case "promoted":
      return `${at}  promoted: every step baked, the fleet serves ${revisionText(s.to)}`;
    case "rolled-back":
      return `${at}  rolled back: ${revisionText(s.from)} restored${s.reason ? `: ${s.reason}` : ""}`;
    case "aborted":
      return `${at}  aborted: ${revisionText(s.from)} restored${s.reason ? `: ${s.reason}` : ""}`;
    case "rolling-back":
      return `${at}  ${stepText(view)}  rolling back to ${revisionText(s.from)}${s.reason ? `: ${s.reason}` : ""}`;
    case "baking":
      return `${at}  ${stepText(view)}  baking (${formatSpan(s.bakeMs)}; gates compare the new revision with the old)`;
    case "paused":
      return `${at}  ${stepText(view)}  paused${s.reason ? `: ${s.reason}` : ""}`;
    default:
      return `${at}  ${stepText(view)}  switching to ${revisionText(s.to)}`;
  }
}

export interface FollowOutput {
  out: (line: string) => void;
  err: (line: string) => void;
}

/** The `rollout` events newer than `after` (a stream id; exclusive), oldest first, with the state each wrote. */
async function eventsAfter(redis: Redis, keys: RedisKeys, after: string): Promise<{ last: string; states: RolloutState[] }> {
  // XREVRANGE (newest first) is what the reader role may run; a poll sees a few events at most.
  const rows = (await redis.xrevrange(keys.events, "+", `(${after}`, "COUNT", 500)).reverse();
  const states: RolloutState[] = [];
  for (const [, flat] of rows) {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
    const st = f.type === "rollout" && f.state ? parseRolloutState(f.state) : null;
    if (st && typeof st !== "string") states.push(st);
  }
  return { last: rows.length ? rows[rows.length - 1][0] : after, states };
}

/**
 * Follows rollout `id` from Redis time `sinceMs` until it ends. Each poll reads the `rollout`
 * events written since the last one (every step or phase change the leader made, even several
 * between two polls of a slow client) and then the hash (the state now, also when the leader's
 * writes carry no event); a change is printed once, in order.
 */
export async function followRollout(redis: Redis, keys: RedisKeys, id: string, sinceMs: number, timeoutMs: number, o: FollowOutput): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let seen = "";
  let unreachable = false;
  let started = false;
  let overdueSaid = false;
  let after = `${Math.max(0, sinceMs - 1)}-${Number.MAX_SAFE_INTEGER}`;
  const overdueAt = Date.now() + ROLLOUT_REQUEST_OVERDUE_MS;
  /** Prints a change of step or phase once; the exit code when the rollout has ended. */
  const take = (s: RolloutState): number | null => {
    if (s.id !== id) return null;
    started = true;
    const key = `${s.step}|${s.phase}`;
    if (key !== seen) {
      seen = key;
      const line = changeLine(s);
      if (s.phase === "rolled-back" || s.phase === "aborted") o.err(`rollout ${id} ${line.replace(/^\S+\s+/, "")}`);
      else o.out(line);
    }
    return isTerminal(s.phase) ? (ROLLOUT_EXIT[s.phase] ?? 1) : null;
  };
  o.out(`following rollout ${id} until it ends (up to ${Math.round(timeoutMs / 1000)} s)...`);
  while (Date.now() < deadline) {
    try {
      const ev = await eventsAfter(redis, keys, after);
      after = ev.last;
      for (const st of ev.states) {
        const code = take(st);
        if (code !== null) return code;
      }
      const raw = await redis.hget(keys.rollout, "state");
      const st = raw ? parseRolloutState(raw) : null;
      const code = st && typeof st !== "string" ? take(st) : null;
      if (code !== null) return code;
      unreachable = false;
    } catch (e) {
      if (!unreachable) o.err(`cannot read the rollout (${(e as Error).message}); still waiting`);
      unreachable = true;
    }
    if (!started && !overdueSaid && Date.now() > overdueAt) {
      overdueSaid = true;
      o.err(`no leader has taken rollout ${id} after ${ROLLOUT_REQUEST_OVERDUE_MS / 1000} s (refused by the leader, or none runs: see its log); still waiting`);
    }
    await new Promise((r) => setTimeout(r, Math.min(WAIT_POLL_MS, Math.max(1, deadline - Date.now()))));
  }
  o.err(`rollout ${id} did not end within ${Math.round(timeoutMs / 1000)} s (${started ? "it is still under way" : "no leader acted on the request: is a controller running?"}); follow it with llm-ha rollout status`);
  return ROLLOUT_WAIT_TIMED_OUT;
}
