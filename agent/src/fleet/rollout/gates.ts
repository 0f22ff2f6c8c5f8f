/**
 * The rollout's gates, each its own pure function of (state, observation, settings, clock): the
 * new revision is compared with the old one in the same window, from what the agents publish
 * each period (the `perf` field of their records), their status, the canary evidence for the
 * new model key and the AZ states. `pass`, `fail` (the rollout rolls back, with the detail as
 * its reason) or `wait` (not enough evidence yet: the bake does not end on it). Each detail is
 * one line with the numbers compared.
 */
import { GATES, type GateName, type GateVerdict, type NodePerf, type RolloutSettings, type RolloutState } from "./types";
import { floorOf, freshPerf, median, serves, type RolloutNode, type RolloutObservation } from "./view";

export interface GateInput {
  state: RolloutState;
  obs: RolloutObservation;
  settings: RolloutSettings;
  now: number;
}

type Gate = (g: GateInput) => GateVerdict;

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const ids = (xs: readonly string[]): string => (xs.length > 5 ? `${xs.slice(0, 5).join(",")},+${xs.length - 5}` : xs.join(","));

/** Live nodes serving `revision`, with their fresh perf sample (null when stale or absent). */
function on(g: GateInput, revision: string): { node: RolloutNode; perf: NodePerf | null }[] {
  return g.obs.nodes.filter((n) => serves(n, revision)).map((node) => ({ node, perf: freshPerf(node, g.now, g.obs.perfMaxAgeMs) }));
}
const withPerf = (xs: { perf: NodePerf | null }[]): NodePerf[] => xs.map((x) => x.perf).filter((p): p is NodePerf => p !== null);

function byIdOf(g: GateInput): Map<string, RolloutNode> {
  return new Map(g.obs.nodes.map((n) => [n.nodeId, n]));
}

/** Every node asked to switch so far (this step and the earlier ones). */
export function askedNodes(state: RolloutState): Map<string, number> {
  const out = new Map<string, number>();
  state.steps.forEach((s, i) => {
    if (i > state.step) return;
    const asked = s.askedAt ?? (i < state.step ? Object.fromEntries(s.nodes.map((n) => [n, state.startedAt])) : Object.fromEntries(s.switched.map((n) => [n, state.since])));
    for (const [id, at] of Object.entries(asked)) out.set(id, at);
  });
  return out;
}

const v = (gate: GateName, verdict: GateVerdict["verdict"], detail: string): GateVerdict => ({ gate, verdict, detail });

/** The new revision's canary answers agree among its nodes and with the recorded ones (which take precedence). */
export const canaryGate: Gate = (g) => {
  const to = g.state.to.revision;
  const asked = askedNodes(g.state);
  const drained = g.obs.nodes.filter((n) => asked.has(n.nodeId) && n.hard.some((c) => c.startsWith("CANARY_")));
  if (drained.length) return v("canary", "fail", `${ids(drained.map((n) => n.nodeId))} on ${to} out for canary answers (${[...new Set(drained.flatMap((n) => n.hard.filter((c) => c.startsWith("CANARY_"))))].join(",")})`);
  const c = g.obs.canary;
  if (c.off) return v("canary", "pass", "canaries are off on the leader: no canary evidence for the new revision");
  if (!c.modelKey) return v("canary", "wait", `no node serving ${to} reports its model yet`);
  const serving = on(g, to).map((x) => x.node.nodeId);
  const answered = c.answered.filter((id) => serving.includes(id));
  const e = c.expectation;
  if (e) {
    const whose = e.source === "operator" ? "the operator's recorded" : "the fleet's";
    const differ = e.disagreeing.filter((id) => serving.includes(id));
    if (differ.length) return v("canary", "fail", `${ids(differ)} on ${c.modelKey}: canary answers differ from ${whose} answers (${e.agreeing} of ${e.nodes} agree)`);
    if (e.capped) return v("canary", "fail", `most nodes on ${c.modelKey} disagree with ${whose} answers (${e.agreeing} of ${e.nodes} agree)`);
    if (!answered.length) return v("canary", "wait", `no canary round on ${c.modelKey} yet (${serving.length} nodes serve it)`);
    return v("canary", "pass", `${answered.length} of ${serving.length} nodes on ${c.modelKey} answered; none differs from ${whose} answers`);
  }
  if (!answered.length) return v("canary", "wait", `no canary round on ${c.modelKey} yet (${serving.length} nodes serve it)`);
  if (serving.length === 1) return v("canary", "pass", `one node (${answered[0]}) serves ${c.modelKey} and answered; no recorded answers to compare with`);
  return v("canary", "wait", `${answered.length} of ${serving.length} nodes on ${c.modelKey} answered; the leader has no expectation for it yet`);
};

/**
 * Failed probes on the new revision beyond what the old revision's share predicts, at least this
 * many, before the errors gate may fail: one failed probe of 40 is 2.5 %, over the default
 * tolerance of one point, and rolled a good revision back in the drill (a probe timing out on the
 * loaded 2-core host). Three of one node's 20-probe window is 15 %.
 */
export const ERRORS_MIN_EXCESS = 3;

/** The new revision's probe error share may exceed the old's by at most `errorTolerance` (and by at least `ERRORS_MIN_EXCESS` probes to fail). */
export const errorsGate: Gate = (g) => {
  const { from, to } = g.state;
  const sum = (ps: NodePerf[]): { e: number; p: number } => ps.reduce((a, p) => ({ e: a.e + p.errors, p: a.p + p.probes }), { e: 0, p: 0 });
  const n = sum(withPerf(on(g, to.revision)));
  if (n.p === 0) return v("errors", "wait", `no probes on ${to.revision} in the window yet`);
  const o = sum(withPerf(on(g, from.revision)));
  const newShare = n.e / n.p;
  const oldShare = o.p ? o.e / o.p : 0;
  const detail = `probe errors ${pct(newShare)} (${n.e}/${n.p}) on ${to.revision} vs ${o.p ? `${pct(oldShare)} (${o.e}/${o.p})` : "none probed (0 %)"} on ${from.revision}; tolerance +${(g.settings.errorTolerance * 100).toFixed(1)} points`;
  const excess = n.e - oldShare * n.p;
  const over = newShare > oldShare + g.settings.errorTolerance + 1e-12;
  if (over && excess < ERRORS_MIN_EXCESS - 1e-9) return v("errors", "pass", `${detail}; ${n.e} failed, under ${ERRORS_MIN_EXCESS} beyond the old share: noise`);
  return v("errors", over ? "fail" : "pass", detail);
};

/**
 * Probes a node on the new revision must have in its window before its p50 counts: a restarted
 * server's first few answers are slow (warm-up), and a p50 of two or three of them failed a good
 * revision in the drill (34 ms against 7 ms, the floor 5 ms). Half the default window (20).
 */
export const LATENCY_MIN_PROBES = 10;

/**
 * How much longer than the old median a new load may take whatever the ratio: an agent sees a load
 * end at its next model check, so a load of a second or two (the drill's) reads a period or two
 * long on a loaded host, and 3× of 1 s is within that noise. Real loads take minutes, where the ratio rules.
 */
export const LOAD_MIN_EXCESS_MS = 5_000;

/** The median of the new nodes' probe p50 (each over at least `LATENCY_MIN_PROBES` probes) may exceed the old nodes' by `latencyTolerance` (and at least `latencyFloorMs`). */
export const latencyGate: Gate = (g) => {
  const { from, to } = g.state;
  const p50 = (ps: NodePerf[]): number[] => ps.map((p) => p.p50Ms).filter((x): x is number => typeof x === "number" && Number.isFinite(x));
  const onNew = withPerf(on(g, to.revision));
  const nm = median(p50(onNew.filter((p) => p.probes >= LATENCY_MIN_PROBES)));
  if (nm === null) return v("latency", "wait", onNew.some((p) => p.p50Ms !== null) ? `fewer than ${LATENCY_MIN_PROBES} probes on each node on ${to.revision} yet` : `no probe latency on ${to.revision} yet`);
  const om = median(p50(withPerf(on(g, from.revision))));
  if (om === null) return v("latency", "pass", `probe p50 ${nm.toFixed(0)} ms on ${to.revision}; no node on ${from.revision} to compare with`);
  const limit = Math.max(om * (1 + g.settings.latencyTolerance), om + g.settings.latencyFloorMs);
  const detail = `probe p50 median ${nm.toFixed(0)} ms on ${to.revision} vs ${om.toFixed(0)} ms on ${from.revision} (${nm >= om ? "+" : ""}${(((nm - om) / Math.max(om, 1e-9)) * 100).toFixed(0)} %); limit ${limit.toFixed(0)} ms (+${(g.settings.latencyTolerance * 100).toFixed(0)} %, at least +${g.settings.latencyFloorMs} ms)`;
  return v("latency", nm > limit ? "fail" : "pass", detail);
};

/** A new node whose last continuation check was refused or failed fails; none run yet waits. */
export const continuationGate: Gate = (g) => {
  const to = g.state.to.revision;
  const nodes = on(g, to).filter((x) => x.perf !== null);
  if (!nodes.length) return v("continuation", "wait", `no recent perf sample from a node on ${to}`);
  const bad = nodes.filter((x) => x.perf!.continuation === "refused" || x.perf!.continuation === "error");
  if (bad.length) return v("continuation", "fail", `continuation check ${bad.map((x) => `${x.node.nodeId}=${x.perf!.continuation}`).slice(0, 5).join(",")} on ${to} (${bad.length} of ${nodes.length} nodes)`);
  const pending = nodes.filter((x) => x.perf!.continuation === null).length;
  if (pending) return v("continuation", "wait", `${pending} of ${nodes.length} nodes on ${to} have not run a continuation check yet`);
  return v("continuation", "pass", `continuation check ok on ${nodes.length} nodes on ${to}`);
};

/**
 * A switched node not serving the new revision `loadTimeoutMs` after its switch fails; so does a
 * load of the new revision (on a node this rollout switched) over `loadRatio` × the old median.
 */
export const loadTimeGate: Gate = (g) => {
  const { from, to } = g.state;
  const step = g.state.steps[g.state.step];
  const asked = step?.askedAt ?? {};
  const byId = new Map(g.obs.nodes.map((n) => [n.nodeId, n]));
  // While switching, a node must also be HEALTHY on it (the next batch waits for that): one that
  // serves it but stays out would hold the step with no gate failing.
  const switching = g.state.phase === "switching" || g.state.pausedFrom === "switching";
  const loading = Object.entries(asked).filter(([id]) => {
    const n = byId.get(id);
    return !n || !serves(n, to.revision) || (switching && n.status !== "HEALTHY");
  });
  const late = loading.filter(([, at]) => g.now - at > g.settings.loadTimeoutMs);
  if (late.length) return v("load-time", "fail", `${ids(late.map(([id]) => id))} not serving ${to.revision}${switching ? " and HEALTHY" : ""} ${secs(g.now - Math.min(...late.map(([, at]) => at)))} after the switch (limit ${secs(g.settings.loadTimeoutMs)})`);
  const loads = (xs: { perf: NodePerf | null }[]): number[] => withPerf(xs).map((p) => p.loadMs).filter((x): x is number => typeof x === "number" && Number.isFinite(x));
  const om = median(loads(on(g, from.revision)));
  // The new side is the loads this rollout caused: a node already on the new revision for another
  // reason (a standby node woken, a node back from a drain or a repair) has a load time that is
  // its wake or its repair, not the new revision's load.
  const switched = askedNodes(g.state);
  const nl = loads(on(g, to.revision).filter((x) => switched.has(x.node.nodeId)));
  const nm = median(nl);
  const still = loading.length ? `; ${loading.length} node${loading.length > 1 ? "s" : ""} still loading` : "";
  if (om !== null && nl.length) {
    const worst = Math.max(...nl);
    const limit = Math.max(g.settings.loadRatio * om, om + LOAD_MIN_EXCESS_MS);
    const detail = `slowest load of ${to.revision} ${secs(worst)} vs ${from.revision} median ${secs(om)}; limit ${secs(limit)} (${g.settings.loadRatio}×, at least +${secs(LOAD_MIN_EXCESS_MS)})${still}`;
    return v("load-time", worst > limit ? "fail" : "pass", detail);
  }
  return v("load-time", "pass", `${nm === null ? "no load time known" : `median load ${secs(nm)}`} on ${to.revision}${om === null ? `, none on ${from.revision} to compare with` : ""}${still}`);
};

/** Any node on the new revision whose engine reports corrupted requests fails. */
export const corruptionGate: Gate = (g) => {
  const to = g.state.to.revision;
  const ps = on(g, to).filter((x) => x.perf !== null);
  if (!ps.length) return v("corruption", "wait", `no recent perf sample from a node on ${to}`);
  const bad = ps.filter((x) => (x.perf!.corrupted ?? 0) > 0);
  if (bad.length) return v("corruption", "fail", `engine reports corrupted requests on ${to}: ${bad.slice(0, 5).map((x) => `${x.node.nodeId}=${x.perf!.corrupted}`).join(",")}`);
  const unknown = ps.filter((x) => x.perf!.corrupted === null).length;
  return v("corruption", "pass", `0 corrupted requests on ${ps.length - unknown} nodes on ${to}${unknown ? ` (${unknown} do not export the count)` : ""}`);
};

/** The AZ in flux DOWN fails; below its floor waits. */
export const capacityGate: Gate = (g) => {
  const step = g.state.steps[g.state.step];
  if (!step) return v("capacity", "pass", "no step under way");
  const az = g.obs.azs.find((a) => a.az === step.az);
  if (!az) return v("capacity", "wait", `AZ ${step.az} not judged yet`);
  const floor = floorOf(az, g.obs.floorShare);
  const detail = `AZ ${step.az} ${az.state}: ${az.healthyCapacity} of ${az.totalCapacity} GPUs healthy, floor ${floor}`;
  // A switching batch may take a small AZ down by itself (a batch is at least one node): that is
  // the floor's known cost. DOWN with any other of its nodes out is a failure.
  if (az.state === "DOWN") {
    const inFlux = new Set(g.state.phase === "switching" || g.state.pausedFrom === "switching" ? step.switched.filter((id) => !serves(byIdOf(g).get(id) ?? null, g.state.to.revision)) : []);
    const others = g.obs.nodes.filter((n) => n.az === step.az && !n.takesTraffic && !inFlux.has(n.nodeId));
    if (inFlux.size === 0 || others.length > 0) return v("capacity", "fail", detail);
    return v("capacity", "wait", `${detail}; only the ${inFlux.size} switching node${inFlux.size > 1 ? "s are" : " is"} out`);
  }
  return v("capacity", az.healthyCapacity < floor ? "wait" : "pass", detail);
};

export const GATE_CHECKS: Readonly<Record<GateName, Gate>> = {
  canary: canaryGate,
  errors: errorsGate,
  latency: latencyGate,
  continuation: continuationGate,
  "load-time": loadTimeGate,
  corruption: corruptionGate,
  capacity: capacityGate,
};

/** Every gate of `gates` (default: all), in order. */
export function evaluateGates(g: GateInput, gates: readonly GateName[] = GATES): GateVerdict[] {
  return gates.map((name) => GATE_CHECKS[name](g));
}
