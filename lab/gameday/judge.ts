/**
 * A game day's figures in the drill's own terms (a `RunResult`), from what the runner saw from
 * outside: the AZs the public name served, the fleet as Redis had it, its own clients' requests.
 * The targets are the drill scenario's, kept where the game day can measure them; the others
 * (proxy rows, a node's `/readyz`, the L4 queue) exist only in the lab, and the report names them.
 * Pure: the tests build the samples by hand.
 */
import { countContinued, countCuts, type Death } from "../drill/cuts";
import { blank, MAIN_CLIENT, type RunResult } from "../drill/scenarios/runner";
import { azWorsenings, staleWrites } from "../drill/scenarios/fleet";
import { tokenRegressions } from "../drill/scenarios/redis";
import type { Targets } from "../drill/scenario-spec";
import { SDK_CLIENT } from "../drill/sdk-traffic";
import { failuresBetween, firstAfter, type FleetSample, type Timeline } from "../drill/timeline";

/** The AZs the public name served at `t` (null: not read). */
export interface ServingSample {
  t: number;
  azs: string[] | null;
}

export interface JudgeInput {
  scenario: string;
  az: string | null;
  activeAzs: string[];
  tl: Timeline;
  serving: readonly ServingSample[];
  injectAt: number;
  healAt: number;
  endAt: number;
  /**
   * What died with the fault, for telling the streams that had to be cut: the lab knows its AZ
   * proxy's address; the cloud does not, and passes none (a cut stream is then one that did
   * not have to be, which the report states as measured).
   */
  deaths?: readonly Death[];
}

/** Counts of a scenario's own the game day measures from the fleet's keys. */
const MEASURED_COUNTS = new Set(["tokenRegressions", "healthyWorsened", "l4Entered"]);
/** Time targets (ms) it measures. */
const MEASURED_TIMES = ["dnsMs", "leaderMs", "recoveryMs", "wakeDecisionMs"] as const;
/** Totals it measures (its own clients, the fleet's keys). */
const MEASURED_TOTALS = ["failed", "sdkFailed", "falseFailovers", "staleWrites", "avoidableCuts", "sdkAvoidable"] as const;

/** The drill's targets the game day can judge, and the names of those only the lab can. */
export function gamedayTargets(t: Targets): { targets: Targets; labOnly: string[] } {
  const targets: Targets = {};
  const labOnly: string[] = [];
  for (const [k, v] of Object.entries(t) as [keyof Targets, unknown][]) {
    if (v === undefined) continue;
    if (k === "extraCounts" || k === "extraTimes") continue;
    if ((MEASURED_TIMES as readonly string[]).includes(k) || (MEASURED_TOTALS as readonly string[]).includes(k) || MEASURED_COUNTS.has(k)) {
      (targets as Record<string, unknown>)[k] = v;
    } else labOnly.push(k);
  }
  const counts = Object.entries(t.extraCounts ?? {});
  const kept = counts.filter(([k]) => MEASURED_COUNTS.has(k));
  if (kept.length) targets.extraCounts = Object.fromEntries(kept);
  labOnly.push(...counts.filter(([k]) => !MEASURED_COUNTS.has(k)).map(([k]) => k), ...Object.keys(t.extraTimes ?? {}));
  return { targets, labOnly };
}

/** The leader before `t`: the last holder Redis named. */
function leaderBefore(fleet: readonly FleetSample[], t: number): string | null {
  for (let i = fleet.length - 1; i >= 0; i--) if (fleet[i].t < t && typeof fleet[i].leader === "string") return fleet[i].leader as string;
  return null;
}

function serverBefore(fleet: readonly FleetSample[], t: number): string | undefined {
  for (let i = fleet.length - 1; i >= 0; i--) if (fleet[i].t < t && fleet[i].server) return fleet[i].server;
  return undefined;
}

const stateMsOf = (r: RunResult): number | null => (typeof r.extra.azStateMs === "number" ? r.extra.azStateMs : null);

export function judgeRun(i: JudgeInput): RunResult {
  const { tl, serving, injectAt, healAt, endAt, az } = i;
  const r = blank(i.scenario, 1);
  r.injectAt = injectAt;
  r.healAt = healAt;
  r.endAt = endAt;
  r.victims = az ? [az] : [];
  if (az) {
    const stateMs = firstAfter(tl.fleet, injectAt, (f) => f.azState[az] !== undefined && f.azState[az] !== "OK", endAt);
    r.dnsMs = firstAfter(serving, injectAt, (s) => s.azs !== null && !s.azs.includes(az), endAt);
    r.extra.azStateMs = stateMs;
    // Detected: the first sign from outside that the system saw the AZ go (out of the public answer, or its state worse).
    const seen = [stateMs, r.dnsMs].filter((x): x is number => x !== null);
    r.detectMs = seen.length ? Math.min(...seen) : null;
    r.recoveryMs = firstAfter(serving, healAt, (s) => s.azs !== null && s.azs.includes(az));
    const okAgain = firstAfter(tl.fleet, healAt, (f) => f.azState[az] === "OK");
    if (r.recoveryMs !== null && okAgain !== null) r.recoveryMs = Math.max(r.recoveryMs, okAgain);
    else r.recoveryMs = null;
  }
  // A new leader, counted from Redis answering again from another server when the fault moved the primary.
  const oldLeader = leaderBefore(tl.fleet, injectAt);
  const oldServer = serverBefore(tl.fleet, injectAt);
  const movedAt = oldServer ? firstAfter(tl.fleet, injectAt, (f) => f.server !== undefined && f.server !== oldServer, endAt) : null;
  const base = movedAt === null ? injectAt : injectAt + movedAt;
  if (movedAt !== null) r.extra.redisWritableMs = movedAt;
  const led = firstAfter(tl.fleet, base, (f) => typeof f.leader === "string" && f.leader !== oldLeader, endAt);
  r.leaderMs = led;
  if (i.scenario === "leader-kill" && led === null) r.notes.push("the leader did not change: FIS deleted a controller pod that was not the leader; run it again");
  r.extra.wakeDecisionMs = firstAfter(tl.fleet, injectAt, (f) => f.standbyWake, endAt);
  r.failed = failuresBetween(tl, MAIN_CLIENT, injectAt, endAt);
  r.failedSdk = failuresBetween(tl, SDK_CLIENT, injectAt, endAt);
  const deaths = i.deaths ?? [];
  r.cuts = { all: countCuts(tl.failures, null, injectAt, endAt, deaths), sdk: countCuts(tl.failures, SDK_CLIENT, injectAt, endAt, deaths) };
  r.continued = countContinued(tl.continued, injectAt, endAt);
  // A healthy AZ the public name stopped serving while the fault held.
  const healthy = i.activeAzs.filter((a) => a !== az);
  const dropped = new Set<string>();
  for (const s of serving) if (s.t >= injectAt && s.t <= healAt && s.azs !== null) for (const a of healthy) if (!s.azs.includes(a)) dropped.add(a);
  r.falseFailovers = dropped.size;
  r.staleWrites = staleWrites(tl.fleet, injectAt);
  r.extra.tokenRegressions = tokenRegressions(tl.fleet, injectAt);
  const worse = azWorsenings(tl.fleet, injectAt, healAt);
  r.extra.healthyWorsened = worse.seen.filter((w) => healthy.includes(w.split(" ")[0])).length;
  r.extra.l4Entered = tl.fleet.some((f) => f.t >= injectAt && f.t <= healAt && f.tier === "L4") ? 1 : 0;
  const fmt = (v: number | null | undefined): string => (v === null || v === undefined ? "never" : `${(v / 1000).toFixed(2)}s`);
  r.extra.figures =
    `${az ? `${az} state worse ${fmt(stateMsOf(r))}, out of the public answer ${fmt(r.dnsMs)}, back ${fmt(r.recoveryMs)} after the heal; ` : ""}` +
    `${movedAt !== null ? `Redis answering from another server ${fmt(movedAt)}, ` : ""}new leader ${fmt(led)}${movedAt !== null ? " after that" : ""}; ` +
    `AZ states worsened: ${worse.seen.join(", ") || "none"}; healthy AZs dropped from the answer: ${[...dropped].join(", ") || "none"}; ` +
    `client failures ${r.failed} (sdk ${r.failedSdk}), streams cut ${r.cuts.all.cut} (${r.cuts.all.hadTo} had to)`;
  return r;
}
