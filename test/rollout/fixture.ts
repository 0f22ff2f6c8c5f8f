/**
 * A simulated fleet for the rollout's pure tests: nodes with the revision they serve, a switch
 * that loads the asked revision after `loadPeriods` periods (the node out of traffic meanwhile),
 * perf samples per node, and a driver that steps `stepRollout` period by period, checking on each
 * that never two AZs are in flux and that no AZ goes below its floor by more than one batch node.
 */
import { stepRollout, type RolloutAction } from "../../agent/src/fleet/rollout/plan";
import { DEFAULT_ROLLOUT_SETTINGS, type GateName, type NodePerf, type RolloutRequest, type RolloutSettings, type RolloutState } from "../../agent/src/fleet/rollout/types";
import { floorOf, type CanaryEvidence, type RolloutAz, type RolloutNode, type RolloutObservation } from "../../agent/src/fleet/rollout/view";

export interface SimNode {
  nodeId: string;
  az: string;
  revision: string;
  /** The revision last asked for, and the periods left until it serves it. */
  wanted: string;
  loading: number;
  /** Out for another reason (a broken node). */
  broken?: boolean;
  gpus: number;
}

export interface SimFleet {
  nodes: SimNode[];
  floorShare: number;
  standbyAz: string | null;
  granularity: "node" | "az";
  /** Periods a node takes to load (Infinity: never). */
  loadPeriods: number;
  /** The perf a node on `revision` publishes (merged over the defaults). */
  perf?: (n: SimNode, now: number) => Partial<NodePerf>;
  canary?: (f: SimFleet) => CanaryEvidence;
  /** Nodes serving this revision stay out (UNHEALTHY): a revision that loads but does not serve well. */
  unhealthyOn?: string;
  /** The fleet's tier as the leader sees it (absent: not given). */
  tier?: { level: string; reason: string };
}

export function fleet(perAz: Record<string, number>, o: Partial<Omit<SimFleet, "nodes">> = {}): SimFleet {
  const nodes: SimNode[] = [];
  for (const [az, n] of Object.entries(perAz)) for (let i = 1; i <= n; i++) nodes.push({ nodeId: `${az}${i}`, az, revision: "v1", wanted: "v1", loading: 0, gpus: 1 });
  return { nodes, floorShare: 0.5, standbyAz: null, granularity: "node", loadPeriods: 1, ...o };
}

let unhealthyOn: string | undefined;
const serving = (n: SimNode): boolean => !n.broken && n.loading === 0 && n.revision !== unhealthyOn;

export function azViews(f: SimFleet): RolloutAz[] {
  unhealthyOn = f.unhealthyOn;
  const azs = [...new Set(f.nodes.map((n) => n.az))].sort();
  return azs.map((az) => {
    const ns = f.nodes.filter((n) => n.az === az);
    const total = ns.reduce((a, n) => a + n.gpus, 0);
    const healthy = ns.filter(serving).reduce((a, n) => a + n.gpus, 0);
    const ratio = total ? healthy / total : 0;
    return { az, state: healthy === 0 || ratio < 0.25 ? "DOWN" : ratio < 0.75 ? "DEGRADED" : "OK", healthyCapacity: healthy, totalCapacity: total };
  });
}

export function observe(f: SimFleet, now: number): RolloutObservation {
  unhealthyOn = f.unhealthyOn;
  const nodes: RolloutNode[] = f.nodes.map((n) => ({
    nodeId: n.nodeId, az: n.az, alive: true, status: serving(n) ? "HEALTHY" : "UNHEALTHY", takesTraffic: serving(n), gpus: n.gpus, revision: n.revision, hard: [],
    perf: { at: now, revision: n.revision, p50Ms: 100, probes: 20, errors: 0, loadMs: 10_000, corrupted: 0, continuation: "ok", ...(f.perf?.(n, now) ?? {}) },
  }));
  const counts = new Map<string, number>();
  for (const n of f.nodes) if (!n.broken) counts.set(n.revision, (counts.get(n.revision) ?? 0) + 1);
  const current = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  return {
    nodes, azs: azViews(f), floorShare: f.floorShare, standbyAz: f.standbyAz, granularity: f.granularity,
    canary: f.canary?.(f) ?? { off: true, modelKey: null, expectation: null, answered: [] }, perfMaxAgeMs: 5000, current: current ? { revision: current } : null,
    ...(f.tier ? { tier: f.tier } : {}),
  };
}

/** Carries out a switch: the nodes load the asked revision. */
export function apply(f: SimFleet, a: RolloutAction): void {
  if (a.finish) {
    // The AZ as a whole: a node out of traffic (asleep, broken) starts on it later; one serving the old revision restarts on it.
    for (const n of f.nodes.filter((x) => x.az === a.az && x.wanted !== a.to.revision)) {
      n.wanted = a.to.revision;
      if (n.broken) n.revision = a.to.revision;
      else n.loading = f.loadPeriods;
    }
    return;
  }
  for (const id of a.nodes) {
    const n = f.nodes.find((x) => x.nodeId === id)!;
    if (n.wanted === a.to.revision && (n.revision === a.to.revision || n.loading > 0)) continue;
    n.wanted = a.to.revision;
    // The old revision loads as usual (a node that never loads the new one still goes back).
    n.loading = a.restore ? 1 : f.loadPeriods;
  }
}

function tickLoads(f: SimFleet): void {
  for (const n of f.nodes) {
    if (n.loading > 0 && Number.isFinite(n.loading)) n.loading -= 1;
    if (n.loading === 0) n.revision = n.wanted;
  }
}

export interface Run {
  state: RolloutState | null;
  states: RolloutState[];
  actions: RolloutAction[];
  notices: string[];
  now: number;
}

export const PERIOD = 1000;
export const SETTINGS: RolloutSettings = { ...DEFAULT_ROLLOUT_SETTINGS, bakeMs: 3000 };

/** Steps the rollout for up to `periods` periods (or until it ends); `requests` by period index. */
export function drive(f: SimFleet, requests: Record<number, RolloutRequest>, o: { periods?: number; gates?: readonly GateName[]; settings?: RolloutSettings; from?: Run; until?: (s: RolloutState) => boolean } = {}): Run {
  const run: Run = o.from ?? { state: null, states: [], actions: [], notices: [], now: 0 };
  for (let i = 0; i < (o.periods ?? 200); i++) {
    const res = stepRollout(run.state, observe(f, run.now), requests[i] ?? null, o.settings ?? SETTINGS, run.now, { gates: o.gates });
    if (res.notice) run.notices.push(res.notice);
    for (const a of res.actions) apply(f, a);
    run.actions.push(...res.actions);
    run.state = res.state;
    if (res.state) run.states.push(res.state);
    checkInvariants(f);
    tickLoads(f);
    run.now += PERIOD;
    if (res.state && o.until?.(res.state)) break;
    if (res.state && ["promoted", "rolled-back", "aborted"].includes(res.state.phase) && !Object.keys(requests).some((k) => Number(k) > i)) break;
  }
  return run;
}

/** Never two AZs in flux; no AZ more than one node below its floor (a batch is at least one node). */
export function checkInvariants(f: SimFleet): void {
  const flux = new Set(f.nodes.filter((n) => n.loading > 0).map((n) => n.az));
  if (flux.size > 1) throw new Error(`two AZs in flux: ${[...flux].join(",")}`);
  // A whole-AZ actuator moves its pods with its own rolling update (not the leader's batches).
  if (f.granularity === "az") return;
  for (const az of azViews(f)) {
    const out = f.nodes.filter((n) => n.az === az.az && n.loading > 0).length;
    if (out > 1 && az.healthyCapacity < floorOf(az, f.floorShare)) throw new Error(`AZ ${az.az} below its floor with ${out} nodes switching`);
  }
}

export const start = (to = "v2", bakeMs?: number): RolloutRequest => ({ op: "start", id: "r1", at: 1, to: { revision: to }, ...(bakeMs !== undefined ? { bakeMs } : {}) });
export const op = (o: RolloutRequest["op"], id = "r1"): RolloutRequest => ({ op: o, id, at: 2 + Math.random() });
