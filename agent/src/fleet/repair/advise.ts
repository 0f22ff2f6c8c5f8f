/**
 * The repair ladder in `advise` and `act` mode, on the leader: each period while it holds the lease it
 * reads what the ladder needs beyond the snapshot (each live node's `gpuFault` facts), decides
 * (`ladder.ts`, pure) and publishes the plan to `repair:plan` — every write fenced. A node
 * whose decision changed gets its own write first, which appends a `repair.advised` event
 * (the fenced write compares the field's previous value, so an unchanged decision writes
 * none); then the whole plan replaces the hash. In `advise` mode nothing else happens. In `act`
 * mode (a `RepairRunner`, act.ts) the plan is then carried out. The
 * ladder's history comes from `repair:history` and `repair:active` (written in `act` mode).
 *
 * Predictive drains (predictive.ts) need the warning facts of nodes that carry no code: those
 * change over minutes and hours, so every live node's `gpuFault` is read once per
 * `warningScanMs` (default 60 s: one HGET per node a minute, pipelined), not every period, and a
 * node's warnings are not a soft code (a soft code would take part in the blast-radius cap and
 * the weight). Only for the AZs with a warned node is each serving node's `loadScore` read every
 * period (the low-load moment is now, not a minute ago).
 */
import type { Redis } from "ioredis";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { RegistrySnapshot } from "../redis/registry";
import { readRecordField } from "../redis/bound-records";
import { parseGpuFault, type GpuFault } from "../../node/sources/gpu-fault";
import type { Logger } from "../../util/log";
import type { AzView } from "../controller/state";
import type { InventoryTracker } from "../inventory/tracker";
import { repairLadder, type AzRepairCapacity, type RepairDecision, type RepairRecord, type RepairSettings } from "./ladder";
import { encodePlanEntry, PLAN_META, planEntries, type PlanEntry } from "./plan";
import { historyRecords, parseHistory } from "./history";
import { activeRecords, parseActive, type ActiveRepair, type RepairRunner } from "./act";

export interface RepairAdvisorOptions {
  redis: Redis;
  keys: RedisKeys;
  writer: FencedWriter;
  log: Logger;
  /** Replacements in sight per AZ (`LLMHA_REPAIR_SPARE`); an AZ not named has none. */
  spare?: ReadonlyMap<string, number>;
  /** An AZ's floor: this share of its total GPUs stays healthy (the controller's `degradedBelow`: repair never makes an AZ DEGRADED). */
  floorShare: number;
  settings?: Partial<RepairSettings>;
  /** Called with every published plan's actions (metrics); a held predictive drain is given as `held:predictive` (information, not a held repair). */
  onPlan?: (actions: readonly string[]) => void;
  /** How often every live node's warning facts are read. Default 60 s. */
  warningScanMs?: number;
  /** `act` mode: carries out the plan. Absent: `advise` (nothing is done). */
  runner?: RepairRunner;
}

/** What one period hands the advisor: the snapshot it evaluated, the AZs it published, where records are, hosts. */
export interface RepairRound {
  snap: RegistrySnapshot;
  azs: readonly AzView[];
  now: number;
  /** The leader's inventory, when it has one: where each node's record is (node identities) and its host (cloud instance id). */
  inventory?: Pick<InventoryTracker, "recordKey" | "current"> | null;
}

export class RepairAdvisor {
  private readonly o: RepairAdvisorOptions;
  private readonly log: Logger;
  /** The ladder's last history: repairs acted on (`repair:history`) and those under way (`repair:active`). */
  history: readonly RepairRecord[] = [];

  constructor(o: RepairAdvisorOptions) {
    this.o = o;
    this.log = o.log.child({ component: "repair" });
  }

  private lastError = "";
  /** Warning facts of every live node, from the last scan (`warningScanMs`). */
  private warned = new Map<string, GpuFault>();
  private scannedAt = -Infinity;

  /**
   * One period: decide and publish. Resolves `accepted: false` when a write was fenced out. Advice
   * never stops the leader's period: a failure here (Redis, a record it cannot read) is logged
   * once per distinct message and the period goes on; the plan is tried again next period.
   */
  async round(r: RepairRound): Promise<{ accepted: boolean }> {
    try {
      const w = await this.publish(r);
      this.lastError = "";
      return w;
    } catch (err) {
      const msg = (err as Error).message;
      if (msg !== this.lastError) this.log.warn({ err: msg }, "repair plan not published this period");
      this.lastError = msg;
      return { accepted: true };
    }
  }

  private async publish(r: RepairRound): Promise<{ accepted: boolean }> {
    const { redis, keys, writer } = this.o;
    const inv = r.inventory ?? null;
    const recordKey = (id: string): string | null => (inv ? inv.recordKey(id) : keys.node(id));
    const hosts = new Map((inv?.current ?? []).filter((n) => n.instanceId).map((n) => [n.nodeId, n.instanceId!]));
    // Facts are read only for nodes with a reason the ladder may act on (a hard code, a pending row remap): one HGET each, not one per node.
    const alive = r.snap.nodes.filter((n) => n.alive && (n.hard.length > 0 || n.soft.some((c) => c.startsWith("GPU_"))));
    const [facts, prevHash, histHash, activeHash] = await Promise.all([
      readRecordField(redis, alive.map((n) => recordKey(n.nodeId)), "gpuFault"), redis.hgetall(keys.repairPlan), redis.hgetall(keys.repairHistory), redis.hgetall(keys.repairActive),
    ]);
    const history = parseHistory(histHash);
    const active = parseActive(activeHash);
    this.history = [...historyRecords(history), ...activeRecords(active)];
    const fault = new Map(alive.map((n, i) => [n.nodeId, parseGpuFault(facts[i])]));
    const load = await this.warnings(r, recordKey, fault);
    const prev = planEntries(prevHash);
    const capacity = new Map<string, AzRepairCapacity>(
      r.azs.map((a) => [a.az, { healthy: a.healthyCapacity, floor: Math.ceil(this.o.floorShare * a.totalCapacity), spare: this.o.spare?.get(a.az) ?? 0 }]),
    );
    const plan = repairLadder({
      nodes: r.snap.nodes.map((n) => ({
        nodeId: n.nodeId, az: n.az, host: hosts.get(n.nodeId) ?? n.nodeId, alive: n.alive, takesTraffic: n.takesTraffic,
        gpus: n.gpus, hard: n.hard, soft: n.soft, fault: fault.get(n.nodeId) ?? this.warned.get(n.nodeId) ?? null, since: prev.get(n.nodeId)?.since,
        ...(load.has(n.nodeId) ? { load: load.get(n.nodeId) } : {}),
      })),
      history: this.history,
      capacity,
      settings: this.o.settings,
      now: r.now,
    });
    plan.decisions = withFailed(plan.decisions, active);
    const mode = this.o.runner ? "act" : "advise";
    const next = new Map(plan.decisions.map((d) => [d.nodeId, entryOf(d, prev.get(d.nodeId), r.now)]));
    const changed: [string, PlanEntry][] = [...next].filter(([id, e]) => prevHash[id] !== encodePlanEntry(e));
    for (const [id, p] of prev) {
      if (!next.has(id)) changed.push([id, { action: "none", wanted: null, reason: "no repair needed: healthy again, or gone", since: r.now, host: p.host, az: p.az, fault: p.fault }]);
    }
    const results = await Promise.all(changed.map(([id, e]) => writer.hset(keys.repairPlan, { [id]: encodePlanEntry(e) }, { changeField: id, eventType: "repair.advised" })));
    if (results.some((x) => !x.accepted)) return { accepted: false };
    const fields: Record<string, string | number> = { [PLAN_META.updatedAt]: r.now, [PLAN_META.mode]: mode, [PLAN_META.quarantined]: plan.quarantined.join(",") };
    for (const [id, e] of next) fields[id] = encodePlanEntry(e);
    const w = await writer.hset(keys.repairPlan, fields, { mode: "replace" });
    if (!w.accepted) return w;
    for (const [id, e] of changed) {
      this.log[e.action === "held" ? "warn" : "info"]({ nodeId: id, az: e.az, host: e.host, action: e.action, wanted: e.wanted, reason: e.reason }, mode === "act" ? "repair plan (act mode: it is carried out)" : "repair advised (advise mode: nothing is done)");
    }
    this.o.onPlan?.(plan.decisions.map((d) => (isPredictiveHold(d) ? "held:predictive" : d.action)));
    if (this.o.runner) return this.o.runner.round({ decisions: plan.decisions, snap: r.snap, now: r.now, active, history, instances: hosts });
    return w;
  }

  /**
   * Every `warningScanMs`, the warning facts of each live serving node (kept between scans); each
   * period, the `loadScore` of the serving nodes in AZs where a serving node has warnings or a
   * pending remap (the ladder's low-load moment). Returns node id → load.
   */
  private async warnings(r: RepairRound, recordKey: (id: string) => string | null, fresh: ReadonlyMap<string, GpuFault | null>): Promise<Map<string, number>> {
    if (this.o.settings?.predictive === false) return new Map();
    const serving = r.snap.nodes.filter((n) => n.alive && n.takesTraffic);
    if (r.now - this.scannedAt >= (this.o.warningScanMs ?? 60_000)) {
      const facts = await readRecordField(this.o.redis, serving.map((n) => recordKey(n.nodeId)), "gpuFault");
      this.warned = new Map();
      serving.forEach((n, i) => {
        const f = parseGpuFault(facts[i]);
        if (f && (f.warn || f.remap === "pending")) this.warned.set(n.nodeId, f);
      });
      this.scannedAt = r.now;
    }
    const hasWarning = (id: string): boolean => this.warned.has(id) || Boolean(fresh.get(id)?.warn) || fresh.get(id)?.remap === "pending";
    const warnedAz = new Set(serving.filter((n) => hasWarning(n.nodeId)).map((n) => n.az));
    const inAz = serving.filter((n) => warnedAz.has(n.az));
    if (!inAz.length) return new Map();
    const scores = await readRecordField(this.o.redis, inAz.map((n) => recordKey(n.nodeId)), "loadScore");
    const out = new Map<string, number>();
    inAz.forEach((n, i) => {
      const v = scores[i] === null ? NaN : Number(scores[i]);
      if (Number.isFinite(v) && v >= 0) out.set(n.nodeId, v);
    });
    return out;
  }
}

/** A held predictive drain: the node serves on, so it is information, not a held repair (`LlmHaRepairHeld` leaves it out). */
export function isPredictiveHold(d: Pick<RepairDecision, "action" | "wanted" | "bound">): boolean {
  return d.action === "held" && d.wanted === "drain" && d.bound !== "failed";
}

/** The published entry: `since` kept while the decision (action, and what it waits for) stays. */
function entryOf(d: RepairDecision, prev: PlanEntry | undefined, now: number): PlanEntry {
  const same = prev && prev.action === d.action && prev.wanted === d.wanted;
  return { action: d.action, wanted: d.wanted, reason: d.reason, since: same ? prev.since : now, host: d.host, az: d.az, fault: d.fault, ...(d.bound ? { bound: d.bound } : {}) };
}

/** A repair that failed in `act` mode keeps its node cordoned: shown `held` (bound `failed`) whatever the ladder says now, so the held alert fires. */
function withFailed(decisions: RepairDecision[], active: ReadonlyMap<string, ActiveRepair>): RepairDecision[] {
  const failed = [...active].filter(([, a]) => a.step === "failed");
  if (!failed.length) return decisions;
  const ids = new Set(failed.map(([id]) => id));
  return [
    ...decisions.filter((d) => !ids.has(d.nodeId)),
    ...failed.map(([nodeId, a]): RepairDecision => ({
      nodeId, az: a.az, host: a.host, action: "held", wanted: a.action, fault: a.fault as RepairDecision["fault"], bound: "failed",
      reason: `${a.action} failed at ${a.failedStep ?? "?"}: ${a.detail}; the node stays cordoned (repair it by hand, uncordon it, then remove its field from repair:active)`,
    })),
  ];
}
