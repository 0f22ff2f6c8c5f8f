/**
 * The repair ladder, as a pure decision: for each broken GPU node the cheapest action that
 * fixes it, or why none may run now. No I/O here; `advise.ts` reads Redis, calls it each
 * leader period and publishes the plan (fenced); in `act` mode act.ts carries it out.
 *
 * Rungs, cheapest first: `restart` (the engine or pod: application XIDs 13, 31, 43, 45),
 * `reset` (a GPU reset: the driver asks for one, XID 48, a pending row remap), `reboot` (the
 * node: the driver asks for one, XID 79 / a GPU off the bus, other hard GPU faults), `replace`
 * (what does not heal: a row-remap failure, a GPU off the bus again after its reboot) and
 * `quarantine` (a host that fails again within the window after a reset or reboot: kept out
 * for good, its capacity replaced). A restart that did not hold within the window is
 * escalated to a reboot.
 *
 * Capacity comes first: at most one node per AZ in repair, at most `maxShare` of the fleet
 * (at least one node), never an AZ below its floor of healthy GPUs by taking out a node that
 * still serves (a repair of a node already out costs its AZ nothing), and never a `replace` or
 * `quarantine` without a replacement in sight in its AZ. A node that may not be repaired now
 * gets `held`, with the action it waits for and the reason (what an alert shows).
 *
 * Predictive (`drain`, predictive.ts): a node that still serves but whose warning facts foretell
 * a hard fault (corrected ECC errors rising, repeated slowdowns, a pending row remap) is drained
 * and rebooted at a low-load moment, within a budget of predictive drains per 24 h. Hard faults
 * are served first, and a node with a hard fault gets its hard rung, never a predictive drain.
 */
import type { GpuFault } from "../../node/sources/gpu-fault";
import { DEFAULT_PREDICTIVE_SETTINGS, predictiveDecisions, predict, type PredictiveSettings } from "./predictive";

/** `drain`: predictive (a serving node with warning facts): cordon, drain, reboot, wait, uncordon. */
export const REPAIR_ACTIONS = ["restart", "reset", "reboot", "replace", "quarantine", "drain"] as const;
export type RepairAction = (typeof REPAIR_ACTIONS)[number];
const COST: Record<RepairAction, number> = { restart: 0, reset: 1, drain: 2, reboot: 2, replace: 3, quarantine: 4 };

/** Which kind of fault a node has, as the ladder sorts them (shown, and kept in the history). The last three are warnings (predictive). */
export type FaultClass = "app-xid" | "reset-needed" | "reboot-needed" | "off-bus" | "remap-failure" | "gpu-fault" | "ecc-rising" | "slowdowns-repeated" | "remap-pending";

/** Application XIDs: a bad kernel or an out-of-bounds access, healed by restarting the engine. */
export const APP_XIDS: ReadonlySet<number> = new Set([13, 31, 43, 45]);
/** Hard codes that mean a GPU left the node (XID 79's kin: off the PCI bus, unseen by nvidia-smi). */
const OFF_BUS_CODES = new Set(["GPU_OFF_BUS", "GPU_MISSING", "GPU_LOST"]);

/** One node as the ladder sees it: what its record says (codes, the agent's `gpuFault` facts) and where it is. */
export interface RepairNode {
  nodeId: string;
  az: string;
  /** The host it runs on (the cloud instance id where the inventory knows it, else the node id). */
  host: string;
  alive: boolean;
  takesTraffic: boolean;
  /** Healthy GPUs it brings its AZ now. */
  gpus: number;
  hard: readonly string[];
  soft: readonly string[];
  fault: GpuFault | null;
  /** Epoch ms its current decision was first made (the broken longest are served first); absent: now. */
  since?: number;
  /** Its `loadScore` now (lower is idler), where the leader read it; absent: unknown (a predictive drain waits). */
  load?: number;
}

/** A repair started on a host: what, when, and when it ended (null: still running). */
export interface RepairRecord {
  nodeId: string;
  host: string;
  action: RepairAction;
  fault: FaultClass;
  at: number;
  doneAt: number | null;
  /** The host was terminated (a `replace` or `quarantine` carried out): its node gets no decision while its record lasts. */
  terminated?: boolean;
}

/** Per AZ: healthy GPUs now, the floor repair may not take it below, replacements in sight. */
export interface AzRepairCapacity {
  healthy: number;
  /** Healthy GPUs the AZ keeps whatever repair wants. */
  floor: number;
  /** Replacements in sight: free reservation slots, standby nodes, a fallback path (count). */
  spare: number;
}

export interface RepairSettings extends PredictiveSettings {
  /** Share of the fleet's nodes in repair at once (at least one node). Default 0.1. */
  maxShare: number;
  /** A host failing again this long after a reset or reboot is quarantined. Default 24 h. */
  quarantineWindowMs: number;
}

export const DEFAULT_REPAIR_SETTINGS: Readonly<RepairSettings> = Object.freeze({ maxShare: 0.1, quarantineWindowMs: 86_400_000, ...DEFAULT_PREDICTIVE_SETTINGS });

export interface RepairInput {
  nodes: readonly RepairNode[];
  history: readonly RepairRecord[];
  capacity: ReadonlyMap<string, AzRepairCapacity>;
  settings?: Partial<RepairSettings>;
  now: number;
}

/**
 * `failed`: a repair acted on in `act` mode failed; the node stays cordoned (advise.ts). `budget`
 * and `load`: a predictive drain waits for the 24 h budget or a low-load moment (the node serves on).
 */
export type Bound = "in-progress" | "az" | "share" | "floor" | "replacement" | "failed" | "budget" | "load";

export interface RepairDecision {
  nodeId: string;
  az: string;
  host: string;
  /** What to do now; `held` when a bound stops it. */
  action: RepairAction | "held";
  /** The action it needs (equal to `action` unless held). */
  wanted: RepairAction;
  fault: FaultClass;
  reason: string;
  /** The bound that holds it, when held. */
  bound?: Bound;
}

export interface RepairPlan {
  decisions: RepairDecision[];
  /** Hosts quarantined (before, or decided now). */
  quarantined: string[];
}

export interface Diagnosis {
  fault: FaultClass;
  action: RepairAction;
  why: string;
  /** Only a pending row remap: on a node that still serves, a predictive drain (at a low-load moment) rather than a reset now. */
  remapOnly?: true;
}

/** The fault's class and the cheapest rung for it, or null when the node has no GPU fault the ladder repairs. */
export function diagnose(n: Pick<RepairNode, "hard" | "soft" | "fault">): Diagnosis | null {
  const f = n.fault;
  const xids = f?.xids ?? [];
  const hard = new Set(n.hard);
  const recovery = f?.recovery ?? null;
  if (f?.remap === "failure" || hard.has("GPU_ROW_REMAP_FAILURE")) return { fault: "remap-failure", action: "replace", why: "row remapping failed: no spare rows left" };
  const offBus = [...hard].filter((c) => OFF_BUS_CODES.has(c));
  if (xids.includes(79) || offBus.length) return { fault: "off-bus", action: "reboot", why: xids.includes(79) ? "XID 79: a GPU fell off the bus" : `a GPU is gone (${offBus.join(",")})` };
  if (recovery && /reboot/i.test(recovery)) return { fault: "reboot-needed", action: "reboot", why: `the driver asks for ${recovery}` };
  const other = xids.filter((x) => !APP_XIDS.has(x) && x !== 48);
  const gpuHard = [...hard].filter((c) => c.startsWith("GPU_") && c !== "GPU_XID_FATAL" && c !== "GPU_XID_REPEATED" && c !== "GPU_RECOVERY_ACTION" && !/^GPU_QUERY_/.test(c));
  if (other.length || gpuHard.length) {
    const what = [...other.map((x) => `XID ${x}`), ...gpuHard].join(", ");
    return { fault: "gpu-fault", action: "reboot", why: `hard GPU fault: ${what}` };
  }
  if (xids.includes(48)) return { fault: "reset-needed", action: "reset", why: "XID 48: double-bit ECC error" };
  if (recovery) return { fault: "reset-needed", action: "reset", why: `the driver asks for ${recovery}` };
  if (f?.remap === "pending" || n.soft.includes("GPU_ROW_REMAP_PENDING")) return { fault: "reset-needed", action: "reset", why: "row remap pending: a GPU reset applies it", remapOnly: true };
  if (xids.length) return { fault: "app-xid", action: "restart", why: `application XID ${xids.join(",")}` };
  // Fatal codes whose facts the record does not carry (an agent older than `gpuFault`): a reboot covers them.
  if (hard.has("GPU_XID_FATAL") || hard.has("GPU_RECOVERY_ACTION")) return { fault: "gpu-fault", action: "reboot", why: `hard GPU fault: ${[...hard].filter((c) => c.startsWith("GPU_")).join(", ")}` };
  return null;
}

const hours = (ms: number): string => `${Math.round((ms / 3_600_000) * 10) / 10} h`;

/** The rung after the host's history: a restart that did not hold, a fault back after a reset or reboot. */
export function escalate(base: { fault: FaultClass; action: RepairAction; why: string }, past: RepairRecord | undefined, s: RepairSettings, now: number): { action: RepairAction; why: string } {
  if (!past || past.doneAt === null || now - past.doneAt > s.quarantineWindowMs) return base;
  const ago = `${hours(now - past.doneAt)} after its ${past.action}`;
  let action = base.action;
  let why = base.why;
  if (past.action === "restart" && COST[base.action] <= COST.restart) {
    action = "reboot";
    why = `${base.why}; back ${ago}: the restart did not hold`;
  } else if (past.action !== "restart" && base.fault === "off-bus") {
    action = "replace";
    why = `${base.why}; off the bus again ${ago}: it does not heal`;
  } else if (past.action !== "restart") {
    action = "quarantine";
    why = `${base.why}; failed again ${ago} (window ${hours(s.quarantineWindowMs)})`;
  }
  return COST[action] >= COST[base.action] ? { action, why } : base;
}

/** One leader period's repair plan. */
export function repairLadder(input: RepairInput): RepairPlan {
  const s: RepairSettings = { ...DEFAULT_REPAIR_SETTINGS, ...input.settings };
  const { now } = input;
  const running = input.history.filter((r) => r.doneAt === null);
  const quarantined = new Set(input.history.filter((r) => r.action === "quarantine").map((r) => r.host));
  const lastDone = new Map<string, RepairRecord>();
  for (const r of input.history) {
    if (r.doneAt === null) continue;
    const prev = lastDone.get(r.host);
    if (!prev || (prev.doneAt ?? 0) < r.doneAt) lastDone.set(r.host, r);
  }
  // A terminated host's record lingers until its TTL: no decision for it (nothing is left to repair).
  const gone = new Set(input.history.filter((r) => r.terminated).map((r) => r.host));
  const busyAz = new Map<string, string>();
  for (const r of running) {
    const az = input.nodes.find((n) => n.nodeId === r.nodeId)?.az;
    if (az && !busyAz.has(az)) busyAz.set(az, r.nodeId);
  }
  let inRepair = running.length;
  const limit = Math.max(1, Math.floor(s.maxShare * input.nodes.length));
  const healthy = new Map([...input.capacity].map(([az, c]) => [az, c.healthy]));
  const spare = new Map([...input.capacity].map(([az, c]) => [az, c.spare]));
  const decisions: RepairDecision[] = [];
  const byAge = (a: { n: RepairNode }, b: { n: RepairNode }): number => (a.n.since ?? now) - (b.n.since ?? now) || a.n.nodeId.localeCompare(b.n.nodeId);
  const diagnosed = input.nodes.filter((n) => n.alive && !gone.has(n.host)).map((n) => ({ n, d: diagnose(n) }));
  // A serving node whose only fault is a pending row remap waits for a low-load moment (predictive) when that is on.
  const warned = (x: { n: RepairNode; d: Diagnosis | null }): boolean => s.predictive && x.n.takesTraffic && (x.d === null || x.d.remapOnly === true);
  const broken = diagnosed
    .filter((x): x is { n: RepairNode; d: Diagnosis } => x.d !== null && !warned(x))
    .sort(byAge);
  const predictive = diagnosed
    .filter(warned)
    .map((x) => ({ n: x.n, p: predict(x.n, s) }))
    .filter((x): x is { n: RepairNode; p: NonNullable<ReturnType<typeof predict>> } => x.p !== null)
    .sort(byAge);
  for (const { n, d } of broken) {
    const base = { nodeId: n.nodeId, az: n.az, host: n.host, fault: d.fault };
    const run = running.find((r) => r.nodeId === n.nodeId || r.host === n.host);
    if (run) {
      decisions.push({ ...base, action: run.action, wanted: run.action, reason: `${run.action} under way since ${new Date(run.at).toISOString()}`, bound: "in-progress" });
      continue;
    }
    if (quarantined.has(n.host)) {
      decisions.push({ ...base, action: "quarantine", wanted: "quarantine", reason: `host ${n.host} is quarantined: ${d.why}` });
      continue;
    }
    const { action, why } = escalate(d, lastDone.get(n.host), s, now);
    const held = (bound: Bound, because: string): void => {
      decisions.push({ ...base, action: "held", wanted: action, reason: `${action} held: ${because} (${why})`, bound });
    };
    const loss = n.takesTraffic ? n.gpus : 0;
    const cap = input.capacity.get(n.az);
    const left = (healthy.get(n.az) ?? 0) - loss;
    if (busyAz.has(n.az)) held("az", `${busyAz.get(n.az)} is already in repair in ${n.az} (one node per AZ at a time)`);
    else if (inRepair >= limit) held("share", `${inRepair} nodes in repair, the most at once is ${limit} (${Math.round(s.maxShare * 100)} % of ${input.nodes.length})`);
    else if (loss > 0 && left < (cap?.floor ?? 0)) held("floor", `${n.az} would keep ${left} healthy GPUs, below its floor of ${cap?.floor ?? 0}`);
    else if ((action === "replace" || action === "quarantine") && (spare.get(n.az) ?? 0) < 1) held("replacement", `no replacement in sight in ${n.az} (no free reservation slot, standby node or fallback path)`);
    else {
      if (action === "replace" || action === "quarantine") spare.set(n.az, (spare.get(n.az) ?? 0) - 1);
      if (action === "quarantine") quarantined.add(n.host);
      healthy.set(n.az, left);
      busyAz.set(n.az, n.nodeId);
      inRepair += 1;
      decisions.push({ ...base, action, wanted: action, reason: why });
    }
  }
  // Predictive drains last: broken nodes get the capacity bounds first.
  const state = { busyAz, inRepair, limit, healthy };
  decisions.push(...predictiveDecisions({ candidates: predictive, nodes: input.nodes, history: input.history, running, quarantined, lastDone, capacity: input.capacity, s, now, state }));
  return { decisions, quarantined: [...quarantined].sort() };
}
