/**
 * The repair ladder's predictive rung (pure, called by `repairLadder`): a node that still serves
 * but whose warning facts (`gpuFault.warn`, `gpu-warn.ts`; a pending row remap) foretell a hard
 * GPU fault is drained at a low-load moment and rebooted (a reboot applies pending row remaps and
 * resets every GPU), before the fault takes it out at a moment nobody chose.
 *
 * Thresholds (NVIDIA publishes no number for correctable errors; NVML counts row remaps due to
 * correctable errors apart, so a sustained rise is memory wearing toward a remap failure):
 * - corrected ECC errors rising by `eccRise` (default 100) or more over 24 h: a healthy HBM GPU
 *   shows a handful at most; hundreds a day is a part wearing out (and 100 is a step of the coarse
 *   scale the agent publishes in, so the threshold is crossed exactly);
 * - `slowdowns` (default 3) thermal or hardware slowdown episodes of one GPU within an hour: one
 *   is a hot moment, three in an hour is cooling or power that is failing;
 * - a pending row remap: NVML says it "won't affect future work" until the next reset applies it,
 *   so it waits for a quiet moment instead of taking a serving node out now.
 *
 * Bounds, beyond the ladder's (one node per AZ, the fleet share, the AZ floor, which matters here:
 * the node serves, so draining it costs its AZ its GPUs): at most `budget` predictive drains per
 * 24 h fleet-wide (default 2: a prediction is a guess, and two wrong guesses a day cost two node
 * reboots, not an AZ), counted from the history; one per host per 24 h (warnings back after a
 * repair are left to the hard fault, which then escalates as after a reboot); and only at a
 * low-load moment: the AZ's serving nodes other than it can carry the AZ's load (the sum of their
 * `loadScore`s with its own, spread over the others) at `maxLoad` (default 8) or less each.
 * `loadScore` is the engine's running + 2 × waiting requests + 10 × KV-cache use: 8 is a handful
 * of running requests with no queue. An unknown load is not a low one.
 *
 * A held predictive drain (any bound) is information, not a failure: the node serves on. advise.ts
 * counts such holds apart (`llmha_repair_predictive_held`), so `LlmHaRepairHeld` never fires for them.
 */
import type { AzRepairCapacity, Bound, FaultClass, RepairDecision, RepairNode, RepairRecord, RepairSettings } from "./ladder";

export interface PredictiveSettings {
  /** Predictive drains on (`LLMHA_REPAIR_PREDICTIVE`). Default true (in advise mode they are only shown). */
  predictive: boolean;
  /** Predictive drains per 24 h, fleet-wide (`LLMHA_REPAIR_PREDICTIVE_BUDGET`). Default 2. */
  predictiveBudget: number;
  /** Corrected ECC errors risen over 24 h that warrant a drain. Default 100. */
  eccRise: number;
  /** Slowdown episodes of one GPU within an hour that warrant a drain. Default 3. */
  slowdowns: number;
  /** Highest `loadScore` per remaining serving node of the AZ that is a low-load moment. Default 8. */
  maxLoad: number;
}

export const DEFAULT_PREDICTIVE_SETTINGS: Readonly<PredictiveSettings> = Object.freeze({ predictive: true, predictiveBudget: 2, eccRise: 100, slowdowns: 3, maxLoad: 8 });

const DAY_MS = 86_400_000;

/** The warning a serving node's facts pass, or null. */
export function predict(n: Pick<RepairNode, "soft" | "fault">, s: PredictiveSettings): { fault: FaultClass; why: string } | null {
  const w = n.fault?.warn;
  if (n.fault?.remap === "pending" || n.soft.includes("GPU_ROW_REMAP_PENDING")) return { fault: "remap-pending", why: "row remap pending on a serving node: a reboot at a low-load moment applies it" };
  if (w && w.eccRise >= s.eccRise) return { fault: "ecc-rising", why: `corrected ECC errors rose by ${w.eccRise}+ in 24 h (threshold ${s.eccRise}; ${w.ecc}+ since the driver loaded)` };
  if (w && w.slow >= s.slowdowns) return { fault: "slowdowns-repeated", why: `${w.slow} thermal/hardware slowdown episodes of one GPU within an hour (threshold ${s.slowdowns})` };
  return null;
}

export interface PredictiveInput {
  candidates: readonly { n: RepairNode; p: { fault: FaultClass; why: string } }[];
  nodes: readonly RepairNode[];
  history: readonly RepairRecord[];
  running: readonly RepairRecord[];
  quarantined: ReadonlySet<string>;
  lastDone: ReadonlyMap<string, RepairRecord>;
  capacity: ReadonlyMap<string, AzRepairCapacity>;
  s: RepairSettings;
  now: number;
  /** The ladder's running bounds after the hard faults (updated here as drains are decided). */
  state: { busyAz: Map<string, string>; inRepair: number; limit: number; healthy: Map<string, number> };
}

const hours = (ms: number): string => `${Math.round((ms / 3_600_000) * 10) / 10} h`;

/** Decisions for the predictive candidates, after the hard faults took their share of the bounds. */
export function predictiveDecisions(i: PredictiveInput): RepairDecision[] {
  const { s, now, state } = i;
  const out: RepairDecision[] = [];
  // Hosts drained predictively in the last 24 h, those under way included (each host counted once).
  const spent = new Set(i.history.filter((r) => r.action === "drain" && now - r.at <= DAY_MS).map((r) => r.host));
  for (const { n, p } of i.candidates) {
    const base = { nodeId: n.nodeId, az: n.az, host: n.host, fault: p.fault, wanted: "drain" as const };
    const run = i.running.find((r) => r.nodeId === n.nodeId || r.host === n.host);
    if (run) {
      out.push({ ...base, action: run.action, wanted: run.action, reason: `${run.action} under way since ${new Date(run.at).toISOString()}`, bound: "in-progress" });
      continue;
    }
    if (i.quarantined.has(n.host)) continue; // a quarantined host is being replaced: nothing to predict
    const held = (bound: Bound, because: string): void => {
      out.push({ ...base, action: "held", reason: `drain held: ${because} (${p.why}); the node serves on`, bound });
    };
    const past = i.lastDone.get(n.host);
    const loss = n.gpus;
    const left = (state.healthy.get(n.az) ?? 0) - loss;
    const floor = i.capacity.get(n.az)?.floor ?? 0;
    const load = azLoad(i.nodes, n);
    if (past && past.doneAt !== null && past.action !== "restart" && now - past.doneAt <= s.quarantineWindowMs) {
      held("budget", `warnings back ${hours(now - past.doneAt)} after its ${past.action}: one predictive drain per host per ${hours(s.quarantineWindowMs)} (a hard fault now escalates)`);
    } else if (state.busyAz.has(n.az)) held("az", `${state.busyAz.get(n.az)} is already in repair in ${n.az} (one node per AZ at a time)`);
    else if (state.inRepair >= state.limit) held("share", `${state.inRepair} nodes in repair, the most at once is ${state.limit}`);
    else if (loss > 0 && left < floor) held("floor", `${n.az} would keep ${left} healthy GPUs, below its floor of ${floor}`);
    else if (spent.size >= s.predictiveBudget) held("budget", `${spent.size} predictive drains in the last 24 h, the budget is ${s.predictiveBudget}`);
    else if (load.perNode === null) held("load", load.why);
    else if (load.perNode > s.maxLoad) held("load", `not a low-load moment: ${n.az}'s load would be ${round(load.perNode)} per serving node without it, above ${s.maxLoad}`);
    else {
      spent.add(n.host);
      state.healthy.set(n.az, left);
      state.busyAz.set(n.az, n.nodeId);
      state.inRepair += 1;
      out.push({ ...base, action: "drain", reason: `predictive drain at a low-load moment (${round(load.perNode)} per serving node without it): ${p.why}` });
    }
  }
  return out;
}

const round = (x: number): number => Math.round(x * 100) / 100;

/** The AZ's load spread over its serving nodes other than `n` (null with why: unknown, or no other node serves). */
function azLoad(nodes: readonly RepairNode[], n: RepairNode): { perNode: number | null; why: string } {
  const serving = nodes.filter((x) => x.alive && x.takesTraffic && x.az === n.az);
  if (serving.some((x) => x.load === undefined || !Number.isFinite(x.load))) return { perNode: null, why: `the load of ${n.az}'s serving nodes is not known this period` };
  const others = serving.filter((x) => x.nodeId !== n.nodeId).length;
  if (others === 0) return { perNode: null, why: `no other node serves in ${n.az}` };
  return { perNode: serving.reduce((a, x) => a + (x.load ?? 0), 0) / others, why: "" };
}
