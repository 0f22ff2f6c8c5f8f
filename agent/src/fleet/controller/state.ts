/**
 * The controller's decisions as pure functions of (registry snapshot, previous memory,
 * settings, clock): AZ state with hysteresis, tier level L0–L4, the blast-radius cap, the
 * standby wake-up and the zonal shift. No I/O here; `controller.ts` reads Redis and
 * publishes the result, `actuators/reconciler.ts` drives the world toward it.
 */
import type { NodeView, RegistrySnapshot } from "../redis/registry";

export { AZ_STATES, DEFAULT_CONTROLLER_SETTINGS, TIER_LEVELS, type AzState, type ControllerSettings, type TierLevel } from "../../../../contracts/controller";
import { DEFAULT_CONTROLLER_SETTINGS, type AzState, type ControllerSettings, type TierLevel } from "../../../../contracts/controller";

export class ControllerSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ControllerSettingsError";
  }
}

export function resolveControllerSettings(s: Partial<ControllerSettings> = {}): Readonly<ControllerSettings> {
  const r = Object.freeze({ ...DEFAULT_CONTROLLER_SETTINGS, ...s });
  if (!(r.downBelow >= 0 && r.downBelow <= r.degradedBelow && r.degradedBelow <= 1)) {
    throw new ControllerSettingsError(`need 0 ≤ downBelow (${r.downBelow}) ≤ degradedBelow (${r.degradedBelow}) ≤ 1`);
  }
  if (r.hysteresis < 0 || r.recoverPeriods < 1 || r.intervalMs <= 0) {
    throw new ControllerSettingsError("hysteresis must be ≥ 0, recoverPeriods ≥ 1, intervalMs > 0");
  }
  if (r.blastFraction <= 0 || r.blastFraction >= 1) throw new ControllerSettingsError("blastFraction must be in (0, 1)");
  if (!(r.standbyCapacityRatio > 0 && r.standbyCapacityRatio <= 1)) throw new ControllerSettingsError(`standbyCapacityRatio (${r.standbyCapacityRatio}) must be in (0, 1]`);
  if (r.standbyHoldMs < 0 || r.shiftRecoverMs < 0 || r.coldStartGraceMs < 0) {
    throw new ControllerSettingsError("standbyHoldMs, shiftRecoverMs and coldStartGraceMs must be ≥ 0");
  }
  return r;
}

const RANK: Record<AzState, number> = { OK: 0, DEGRADED: 1, DOWN: 2 };

export interface AzMemory {
  state: AzState;
  /** Consecutive evaluations that qualified for a better state. */
  better: number;
  /** Epoch ms the state was entered. */
  since: number;
  /** Epoch ms the AZ was first judged (kept across leaders in its state hash). Default: the first evaluation. */
  firstSeen?: number;
  /** Whether the AZ has ever been OK: before that it is starting, not failing. */
  everOk?: boolean;
}

function stateFor(ratio: number, healthy: number, degradedBelow: number, downBelow: number): AzState {
  if (healthy <= 0 || ratio < downBelow) return "DOWN";
  if (ratio < degradedBelow) return "DEGRADED";
  return "OK";
}

/**
 * Next state of one AZ: worse at once, better only past threshold + hysteresis for
 * `recoverPeriods` periodic evaluations (an `early` one only makes it worse); `firstSeen` and
 * `everOk` carried along (cold start).
 */
export function nextAzState(
  prev: AzMemory | undefined,
  healthy: number,
  total: number,
  s: Pick<ControllerSettings, "degradedBelow" | "downBelow" | "hysteresis" | "recoverPeriods">,
  now: number,
  early = false,
): AzMemory {
  const m = ((): AzMemory => {
    const ratio = total > 0 ? healthy / total : 0;
    const raw = stateFor(ratio, healthy, s.degradedBelow, s.downBelow);
    if (!prev) return { state: raw, better: 0, since: now };
    if (RANK[raw] > RANK[prev.state]) return { state: raw, better: 0, since: now };
    // Between periods (the early look) nothing gets better and nothing is counted: `recoverPeriods` counts periods.
    if (early) return { ...prev };
    const up = stateFor(ratio, healthy, s.degradedBelow + s.hysteresis, s.downBelow + s.hysteresis);
    if (RANK[up] < RANK[prev.state]) {
      const better = prev.better + 1;
      if (better >= s.recoverPeriods) return { state: up, better: 0, since: now };
      return { ...prev, better };
    }
    return { ...prev, better: 0 };
  })();
  return { ...m, firstSeen: prev?.firstSeen ?? now, everOk: (prev?.everOk ?? false) || m.state === "OK" };
}

/** An AZ that has never been OK and was first seen less than `coldStartGraceMs` ago is still starting. */
export function isStarting(m: AzMemory | undefined, s: Pick<ControllerSettings, "coldStartGraceMs">, now: number): boolean {
  if (!m || m.everOk) return false;
  return now - (m.firstSeen ?? now) < s.coldStartGraceMs;
}

export interface Tier {
  level: TierLevel;
  reason: string;
}

/** L4 every AZ down; L3 an AZ down (DNS); L2 an AZ degraded (cross-zone); L1 some node out; L0 all well. */
export function tierLevel(azs: ReadonlyMap<string, AzState>, nodesOut: readonly string[]): Tier {
  const list = [...azs.entries()].sort(([a], [b]) => a.localeCompare(b));
  const down = list.filter(([, st]) => st === "DOWN").map(([az]) => az);
  const degraded = list.filter(([, st]) => st === "DEGRADED").map(([az]) => az);
  if (list.length > 0 && down.length === list.length) return { level: "L4", reason: `every AZ down: ${down.join(",")}` };
  if (down.length) return { level: "L3", reason: `AZ down: ${down.join(",")}` };
  if (degraded.length) return { level: "L2", reason: `AZ degraded: ${degraded.join(",")}` };
  if (nodesOut.length) {
    const shown = nodesOut.slice(0, 5).join(",") + (nodesOut.length > 5 ? `,+${nodesOut.length - 5}` : "");
    return { level: "L1", reason: `nodes out: ${shown}` };
  }
  return { level: "L0", reason: list.length ? "all AZs OK" : "no nodes registered" };
}

export interface BlastMemory {
  /** check code → node id → last epoch ms the node reported it failing. */
  seen: Map<string, Map<string, number>>;
  /** check code → epoch ms it became suspect. */
  suspect: Map<string, number>;
}

export function emptyBlastMemory(): BlastMemory {
  return { seen: new Map(), suspect: new Map() };
}

export interface BlastResult {
  memory: BlastMemory;
  /** Suspect soft check codes, sorted. */
  suspect: string[];
  /** Distinct live nodes failing each soft check within the window. */
  counts: Record<string, number>;
}

/**
 * Blast-radius cap: when more than `blastFraction` of the live nodes failed the same soft
 * check within the window, the check (the probe, or a dependency they share) is the
 * likelier fault: mark it suspect so the nodes are kept in instead of emptying the fleet.
 */
export function blastRadius(
  prev: BlastMemory,
  nodes: readonly NodeView[],
  s: Pick<ControllerSettings, "blastFraction" | "blastMinNodes" | "blastWindowMs">,
  now: number,
): BlastResult {
  const live = nodes.filter((n) => n.alive);
  const liveIds = new Set(live.map((n) => n.nodeId));
  const seen = new Map<string, Map<string, number>>();
  for (const [code, m] of prev.seen) {
    const kept = new Map([...m].filter(([id, t]) => liveIds.has(id) && now - t <= s.blastWindowMs));
    if (kept.size) seen.set(code, kept);
  }
  for (const n of live) {
    for (const code of n.soft) {
      let m = seen.get(code);
      if (!m) seen.set(code, (m = new Map()));
      m.set(n.nodeId, now);
    }
  }
  const counts: Record<string, number> = {};
  const suspect = new Map<string, number>();
  for (const [code, m] of seen) {
    counts[code] = m.size;
    if (live.length >= s.blastMinNodes && m.size / live.length > s.blastFraction) {
      suspect.set(code, prev.suspect.get(code) ?? now);
    }
  }
  return { memory: { seen, suspect }, suspect: [...suspect.keys()].sort(), counts };
}

// The standby decision lives beside it (standby.ts); re-exported for the callers of this module.
export { standbyDecision, standbyShortfall, type StandbyDecision, type StandbyMemory } from "./standby";
import { standbyDecision, standbyShortfall, type StandbyDecision, type StandbyMemory } from "./standby";

export interface ShiftMemory {
  /** The AZ traffic is shifted away from, null when none. */
  az: string | null;
  /** Epoch ms the shift was decided. */
  since: number | null;
  /** Epoch ms the shifted AZ was first seen OK again (recovery clock), null while it is not. */
  okSince: number | null;
}

export interface ShiftDecision {
  /** Shift traffic away from this AZ; null = no shift wanted. */
  az: string | null;
  reason: string;
}

/**
 * Desired zonal shift (ARC on AWS): away from an active AZ that is DOWN while another active
 * AZ is OK — one zone at a time, never when no active AZ is OK (that is L4 territory:
 * shifting would only move traffic between dead zones, so an existing shift is cancelled).
 * Cancelled once the AZ has been OK for `shiftRecoverMs` (its state already needed
 * threshold + hysteresis for `recoverPeriods` to become OK). The standby AZ is never shifted.
 */
export function shiftDecision(
  prev: ShiftMemory,
  azs: ReadonlyMap<string, AzState>,
  s: Pick<ControllerSettings, "zonalShift" | "standbyAz" | "shiftRecoverMs">,
  now: number,
): { memory: ShiftMemory; decision: ShiftDecision } {
  const none = (reason: string): { memory: ShiftMemory; decision: ShiftDecision } => ({ memory: { az: null, since: null, okSince: null }, decision: { az: null, reason } });
  if (!s.zonalShift) return none("zonal shift off");
  const active = [...azs.entries()].filter(([az]) => az !== s.standbyAz).sort(([a], [b]) => a.localeCompare(b));
  const ok = active.filter(([, st]) => st === "OK").map(([az]) => az);
  if (prev.az !== null) {
    const st = azs.get(prev.az);
    if (ok.every((az) => az === prev.az)) return none(`no other active AZ OK: shift away from ${prev.az} cancelled`);
    if (st === "OK") {
      const okSince = prev.okSince ?? now;
      if (now - okSince >= s.shiftRecoverMs) return none(`${prev.az} OK for ${Math.round((now - okSince) / 1000)} s: shift cancelled`);
      return { memory: { ...prev, okSince }, decision: { az: prev.az, reason: `${prev.az} OK again, shift held ${s.shiftRecoverMs} ms` } };
    }
    return { memory: { ...prev, okSince: null }, decision: { az: prev.az, reason: `${prev.az}=${st ?? "no capacity"}` } };
  }
  const down = active.filter(([, st]) => st === "DOWN").map(([az]) => az);
  if (down.length === 0) return none("no active AZ down");
  if (ok.length === 0) return none("no active AZ OK: no shift");
  return { memory: { az: down[0], since: now, okSince: null }, decision: { az: down[0], reason: `${down[0]}=DOWN, serving from ${ok.join(",")}` } };
}

export interface AzView {
  az: string;
  state: AzState;
  /** Kept at its previous state although nodes' heartbeats are missing: Redis trouble explains their silence. */
  held?: boolean;
  healthyCapacity: number;
  totalCapacity: number;
  nodes: number;
  nodesIn: number;
}

export interface ControllerMemory {
  az: Map<string, AzMemory>;
  blast: BlastMemory;
  standby: StandbyMemory;
  shift: ShiftMemory;
}

export function emptyControllerMemory(): ControllerMemory {
  return { az: new Map(), blast: emptyBlastMemory(), standby: { wake: false, lastTriggerAt: null }, shift: { az: null, since: null, okSince: null } };
}

export interface Evaluation {
  azs: AzView[];
  tier: Tier;
  suspect: string[];
  suspectCounts: Record<string, number>;
  standby: StandbyDecision;
  shift: ShiftDecision;
  nodesOut: string[];
  /** Healthy GPUs of the standby AZ now (0 while it is scaled to zero or when there is none). */
  standbyHealthy: number;
  /** Why missing heartbeats are not acted on now (Redis trouble), null when they are. */
  silenceExplained: string | null;
}

export interface EvaluateOptions {
  /**
   * Set while Redis trouble explains missing heartbeats (the reason, for status): expired
   * nodes are silent, not dead — they do not make their AZ worse and are not "out".
   */
  silenceExplained?: string | null;
  /** The actuator's word that the standby cannot be woken (capacity unavailable, with the reason), null when it can. */
  standbyUnavailable?: string | null;
  /** The reconciler's word that a new wake waits (`backoff until …, because …`), null when it does not. */
  standbyBackoff?: string | null;
  /** An evaluation between periods (the controller's early look): AZ states only get worse, no period is counted. */
  early?: boolean;
}

/**
 * One controller period. A node counts as healthy capacity when it takes traffic, or when
 * every reason it is out is a suspect soft check with no hard fault (blast-radius cap: keep
 * them in). Total capacity counts every member, dead ones included, until forgotten — except
 * a node joining its AZ (it never served yet) while others there have.
 *
 * The standby AZ is judged and published like any AZ, but while it is not wanted awake it
 * is scaled to zero on purpose: its state and its nodes (dead members of a group the
 * schedule just stopped) do not count toward the tier level.
 */
export function evaluate(
  snap: RegistrySnapshot,
  mem: ControllerMemory,
  s: Readonly<ControllerSettings>,
  now: number,
  o: EvaluateOptions = {},
): { evaluation: Evaluation; memory: ControllerMemory } {
  const silenceExplained = o.silenceExplained ?? null;
  const blast = blastRadius(mem.blast, snap.nodes, s, now);
  const suspect = new Set(blast.suspect);
  const byAz = new Map<string, { healthy: number; total: number; nodes: number; nodesIn: number; silent: number }>();
  const nodesOut: string[] = [];
  const standbyOut: string[] = [];
  // A node that has not served since it joined (a scale-out, a replacement still loading its
  // model) is not capacity its AZ lost — unless no node of the AZ ever served: a cold start,
  // judged as DOWN and left to the cold-start grace.
  const servedAzs = new Set(snap.nodes.filter((n) => n.served !== false).map((n) => n.az));
  for (const n of snap.nodes) {
    if (n.served === false && !n.takesTraffic && servedAzs.has(n.az)) continue;
    const a = byAz.get(n.az) ?? { healthy: 0, total: 0, nodes: 0, nodesIn: 0, silent: 0 };
    byAz.set(n.az, a);
    a.total += n.gpusExpected;
    a.nodes += 1;
    if (silenceExplained !== null && !n.alive) {
      a.silent += n.gpusExpected;
      continue;
    }
    const keptIn = n.alive && !n.takesTraffic && n.hard.length === 0 && n.soft.length > 0 && n.soft.every((c) => suspect.has(c));
    if (n.takesTraffic || keptIn) {
      a.healthy += Math.min(n.gpus, n.gpusExpected || n.gpus);
      a.nodesIn += 1;
    } else {
      (n.az === s.standbyAz ? standbyOut : nodesOut).push(n.nodeId);
    }
  }
  const azMem = new Map<string, AzMemory>();
  const states = new Map<string, AzState>();
  const azs: AzView[] = [];
  for (const [az, a] of [...byAz.entries()].sort(([x], [y]) => x.localeCompare(y))) {
    if (a.total <= 0) continue; // a standby AZ scaled to zero has no capacity to judge
    const prev = mem.az.get(az);
    let m = nextAzState(prev, a.healthy, a.total, s, now, o.early);
    // Silent nodes would only make the AZ worse than it was: hold it until they heartbeat again.
    const held = a.silent > 0 && prev !== undefined && RANK[m.state] > RANK[prev.state] && RANK[nextAzState(prev, a.healthy + a.silent, a.total, s, now, o.early).state] <= RANK[prev.state];
    if (held) m = { ...prev, better: 0 };
    azMem.set(az, m);
    states.set(az, m.state);
    azs.push({ az, state: m.state, healthyCapacity: a.healthy, totalCapacity: a.total, nodes: a.nodes, nodesIn: a.nodesIn, ...(held ? { held: true } : {}) });
  }
  const starting = new Set([...azMem].filter(([, m]) => isStarting(m, s, now)).map(([az]) => az));
  const sb = standbyDecision(mem.standby, states, s, now, starting);
  const shift = shiftDecision(mem.shift, states, s, now);
  const tierStates = new Map(states);
  if (s.standbyAz && !sb.decision.wake) tierStates.delete(s.standbyAz);
  else nodesOut.push(...standbyOut);
  // A standby woken on purpose is booting, not failing: left out of the tier until it has
  // been OK once (or its cold-start grace runs out; LlmHaStandbyNotWaking watches it).
  if (s.standbyAz && starting.has(s.standbyAz)) tierStates.delete(s.standbyAz);
  const tier = tierLevel(tierStates, nodesOut.sort());
  // The standby was the answer to this tier; when it cannot come up the tier says so (L2/L4 and alerts read it).
  if (s.standbyAz && sb.decision.wake && o.standbyUnavailable) {
    sb.decision.unavailable = o.standbyUnavailable;
    tier.reason += `; standby ${s.standbyAz} ${o.standbyUnavailable}`;
  }
  // A wake wanted and held back: the last one ended with no healthy standby node (wake-backoff.ts).
  if (s.standbyAz && sb.decision.wake && o.standbyBackoff) {
    sb.decision.backoff = o.standbyBackoff;
    tier.reason += `; standby ${s.standbyAz} ${o.standbyBackoff}`;
  }
  // Partial redundancy: a standby smaller than an active AZ cannot take the whole lost load.
  if (s.standbyAz && sb.decision.wake && s.standbyCapacityRatio < 1) {
    const shortfall = standbyShortfall(azs, s.standbyAz, s.standbyCapacityRatio);
    if (shortfall) {
      sb.decision.shortfall = shortfall;
      tier.reason += `; standby ${s.standbyAz} at ${Math.round(s.standbyCapacityRatio * 100)} % of an active AZ covers at most ${shortfall.covers} of ${shortfall.lost} lost GPUs`;
    }
  }
  const heldAzs = azs.filter((a) => a.held).map((a) => a.az);
  if (heldAzs.length) tier.reason += ` (held: ${heldAzs.join(",")} — ${silenceExplained}; waiting for heartbeats)`;
  const standbyHealthy = s.standbyAz ? (byAz.get(s.standbyAz)?.healthy ?? 0) : 0;
  return {
    evaluation: { azs, tier, suspect: blast.suspect, suspectCounts: blast.counts, standby: sb.decision, shift: shift.decision, nodesOut, standbyHealthy, silenceExplained },
    memory: { az: azMem, blast: blast.memory, standby: sb.memory, shift: shift.memory },
  };
}
