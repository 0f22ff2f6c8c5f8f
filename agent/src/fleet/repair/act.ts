/**
 * The repair ladder's `act` mode, on the leader. For a node whose plan is `restart`, `reset`,
 * `reboot` or `drain` (predictive: a serving node drained at a low-load moment, then rebooted) it runs
 *
 *   cordon → drain → the action → (history recorded) → wait for the node's record to be
 *   HEALTHY again → uncordon
 *
 * and for `replace` and `quarantine` (the host is not used again: it is terminated, and an EC2
 * instance id is never reused)
 *
 *   cordon → drain → surge (one more instance asked of its group) → wait for a replacement
 *   HEALTHY in its AZ → terminate (through the group) → (history recorded)
 *
 * so capacity comes back before the old host goes. A group at its max gets no surge: the old
 * host is terminated and the group launches its replacement (the ladder let it through only with
 * a replacement in sight, `LLMHA_REPAIR_SPARE`).
 *
 * one step at a time through the fenced repair actuator. The state machine lives in Redis
 * (`repair:active`, node id → JSON entry, fenced writes): a new leader continues a repair at
 * its step, it does not start it again. Each step written appends an event: `repair.started`
 * (a step begins; the entry names it), `repair.done` (the node is back and uncordoned),
 * `repair.failed` (a step failed: the node is left cordoned, the entry stays with
 * `step: "failed"` and the plan shows the node `held`, which the held-repair alert watches).
 * A step refused as stale (a newer leader exists) does nothing and ends the round.
 */
import type { Redis } from "ioredis";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { RegistrySnapshot } from "../redis/registry";
import type { Logger } from "../../util/log";
import type { RepairActuator, RepairStepResult } from "../actuators/repair-types";
import type { RepairDecision, RepairRecord } from "./ladder";
import { recordRepair, type HistoryEntry } from "./history";

/**
 * The rungs `act` mode carries out (every rung). A `reset` is carried out as a
 * reboot of the instance: the cloud has no GPU-reset call, and a reset from the node
 * (`nvidia-smi -r`) needs a privileged process the GPU-node agent is not. A reboot resets every
 * GPU and applies pending row remaps; the history keeps `reset`, so a fault back within the
 * window escalates as after a reboot. A predictive `drain` is carried out as a reboot too (it
 * applies pending row remaps and resets the GPUs); the history keeps `drain`, which the ladder
 * counts against its 24 h budget, and a hard fault within the window escalates as after a reboot.
 */
export const ACTED_RUNGS = ["restart", "reset", "reboot", "replace", "quarantine", "drain"] as const;
export type ActedRung = (typeof ACTED_RUNGS)[number];
/** Rungs that end with the host terminated (a replacement first where its group has room). */
const REPLACING: ReadonlySet<ActedRung> = new Set(["replace", "quarantine"]);
export const ACTIVE_STEPS = ["cordon", "drain", "action", "wait", "surge", "replacement", "terminate", "failed"] as const;
export type ActiveStep = (typeof ACTIVE_STEPS)[number];

export interface ActiveRepair {
  action: ActedRung;
  step: ActiveStep;
  /** Epoch ms the current step began. */
  since: number;
  startedAt: number;
  /** The token of the term that wrote the entry last. */
  token: number;
  /** Instance id (reboot target), or the node id without an inventory. */
  host: string;
  az: string;
  fault: string;
  /** What the last step did, or why it failed. */
  detail: string;
  /** With `step: "failed"`: the step that failed. */
  failedStep?: string;
  /** The action was a dry-run (nothing was done): the wait ends after `waitTimeoutMs` as done, not failed. */
  dryRun?: boolean;
  /** `replace`/`quarantine`: one more instance was asked of the group (the termination takes it back). */
  surged?: boolean;
  /** `replace`/`quarantine`: HEALTHY nodes in its AZ, itself left out, when the surge was asked. */
  healthyBefore?: number;
}

export interface RepairActSettings {
  /** Least time after the action before a HEALTHY record counts (the record must be the new engine's). Default 30 s. */
  settleMs: number;
  /** A drain a PodDisruptionBudget holds longer than this fails. Default 10 min. */
  drainTimeoutMs: number;
  /** A node not HEALTHY this long after its action fails. Default 30 min (a reboot of a GPU node is minutes). */
  waitTimeoutMs: number;
  /** No replacement HEALTHY this long after the surge fails the replace (the old host stays drained, not terminated). Default 60 min (a GPU instance launch, image and model load). */
  replacementTimeoutMs: number;
}

export const DEFAULT_ACT_SETTINGS: Readonly<RepairActSettings> = Object.freeze({ settleMs: 30_000, drainTimeoutMs: 600_000, waitTimeoutMs: 1_800_000, replacementTimeoutMs: 3_600_000 });

/** HEALTHY nodes alive in `az`, `except` left out. */
function healthyIn(snap: RegistrySnapshot, az: string, except: string): number {
  return snap.nodes.filter((n) => n.nodeId !== except && n.az === az && n.alive && n.status === "HEALTHY").length;
}

const FENCE_FIELDS = new Set(["token", "leader", "at"]);

export function parseActive(h: Record<string, string>): Map<string, ActiveRepair> {
  const out = new Map<string, ActiveRepair>();
  for (const [id, text] of Object.entries(h)) {
    if (FENCE_FIELDS.has(id)) continue;
    try {
      const v = JSON.parse(text) as Partial<ActiveRepair>;
      if (!(ACTED_RUNGS as readonly string[]).includes(v.action as string) || !(ACTIVE_STEPS as readonly string[]).includes(v.step as string)) continue;
      out.set(id, {
        action: v.action!, step: v.step!, since: Number(v.since) || 0, startedAt: Number(v.startedAt) || 0, token: Number(v.token) || 0,
        host: String(v.host ?? id), az: String(v.az ?? ""), fault: String(v.fault ?? ""), detail: String(v.detail ?? "").slice(0, 500),
        ...(v.failedStep ? { failedStep: String(v.failedStep) } : {}),
        ...(v.dryRun === true ? { dryRun: true } : {}),
        ...(typeof v.surged === "boolean" ? { surged: v.surged } : {}),
        ...(Number.isInteger(v.healthyBefore) ? { healthyBefore: v.healthyBefore } : {}),
      });
    } catch {
      // not an entry this code wrote: ignored
    }
  }
  return out;
}

/** Active repairs as the ladder's running records (bounds: one per AZ, the fleet share). */
export function activeRecords(active: ReadonlyMap<string, ActiveRepair>): RepairRecord[] {
  return [...active].map(([nodeId, a]) => ({ nodeId, host: a.host, action: a.action, fault: a.fault as RepairRecord["fault"], at: a.startedAt, doneAt: null }));
}

export interface RepairRunnerOptions {
  redis: Redis;
  keys: RedisKeys;
  writer: FencedWriter;
  actuator: RepairActuator;
  log: Logger;
  /** The token of the term this process holds now, null when it does not lead. */
  token: () => number | null;
  settings?: Partial<RepairActSettings>;
  /** The quarantine window: history is trimmed to it. */
  windowMs: number;
}

export interface ActRound {
  decisions: readonly RepairDecision[];
  snap: RegistrySnapshot;
  now: number;
  active: Map<string, ActiveRepair>;
  history: Map<string, HistoryEntry[]>;
  /** Node id → instance id, from the inventory. */
  instances: ReadonlyMap<string, string>;
}

const OK = new Set(["applied", "already", "dry-run"]);

export class RepairRunner {
  private readonly s: RepairActSettings;
  private readonly log: Logger;
  private readonly skipped = new Set<string>();

  constructor(private readonly o: RepairRunnerOptions) {
    this.s = { ...DEFAULT_ACT_SETTINGS, ...o.settings };
    this.log = o.log.child({ component: "repair-act" });
  }

  /** One period: advance every active repair by a step, then start the plan's new repairs. */
  async round(r: ActRound): Promise<{ accepted: boolean }> {
    const token = this.o.token();
    if (token === null) return { accepted: true };
    // The plan was made before these steps ran: a repair that ends in this round is not started again from it.
    const underWay = new Set(r.active.keys());
    for (const [id, a] of [...r.active]) {
      const go = await this.advance(id, a, r, token);
      if (!go) return { accepted: false };
    }
    for (const d of r.decisions) {
      if (underWay.has(d.nodeId) || r.active.has(d.nodeId) || !(ACTED_RUNGS as readonly string[]).includes(d.action)) continue;
      const action = d.action as ActedRung;
      if (action !== "restart" && !r.instances.has(d.nodeId)) {
        if (!this.skipped.has(d.nodeId)) this.log.warn({ nodeId: d.nodeId, action }, `${action} advised but not acted on: the inventory gives this node no cloud instance id to reboot`);
        this.skipped.add(d.nodeId);
        continue;
      }
      const a: ActiveRepair = { action, step: "cordon", since: r.now, startedAt: r.now, token, host: d.host, az: d.az, fault: d.fault, detail: d.reason.slice(0, 500) };
      if (!(await this.write(d.nodeId, a, "repair.started"))) return { accepted: false };
      r.active.set(d.nodeId, a);
      this.log.warn({ nodeId: d.nodeId, az: d.az, host: d.host, action, reason: d.reason }, "repair started");
      if (!(await this.advance(d.nodeId, a, r, token))) return { accepted: false };
    }
    return { accepted: true };
  }

  private async write(id: string, a: ActiveRepair, eventType: string): Promise<boolean> {
    return (await this.o.writer.hset(this.o.keys.repairActive, { [id]: JSON.stringify(a) }, { changeField: id, eventType })).accepted;
  }

  /** Runs the entry's steps until one waits (a wait, a pending drain) or fails. False: fenced out (a newer leader). */
  private async advance(id: string, a0: ActiveRepair, r: ActRound, token: number): Promise<boolean> {
    let a = a0;
    const ctx = { token, reason: `${a.action} (${a.fault}) of ${id}` };
    const next = async (step: ActiveStep, res: RepairStepResult): Promise<boolean> => {
      a = { ...a, step, since: r.now, token, detail: res.detail.slice(0, 500) };
      r.active.set(id, a);
      return this.write(id, a, "repair.started");
    };
    const failed = async (step: string, detail: string): Promise<boolean> => {
      a = { ...a, step: "failed", failedStep: step, since: r.now, token, detail: detail.slice(0, 500) };
      r.active.set(id, a);
      this.log.error({ nodeId: id, action: a.action, step, detail }, "repair failed: the node stays cordoned until an operator repairs it");
      return this.write(id, a, "repair.failed");
    };
    for (let guard = 0; guard < 5; guard++) {
      switch (a.step) {
        case "failed":
          return true;
        case "cordon": {
          const res = await this.o.actuator.cordon(id, ctx);
          if (res.outcome === "refused-stale") return false;
          if (!OK.has(res.outcome)) return failed("cordon", res.detail);
          if (!(await next("drain", res))) return false;
          break;
        }
        case "drain": {
          const res = await this.o.actuator.drain(id, ctx);
          if (res.outcome === "refused-stale") return false;
          if (res.outcome === "pending") {
            return r.now - a.since > this.s.drainTimeoutMs ? failed("drain", `not drained in ${Math.round(this.s.drainTimeoutMs / 1000)} s: ${res.detail}`) : true;
          }
          if (!OK.has(res.outcome)) return failed("drain", res.detail);
          if (!(await next(REPLACING.has(a.action) ? "surge" : "action", res))) return false;
          break;
        }
        case "surge": {
          const res = await this.o.actuator.surge(r.instances.get(id) ?? a.host, ctx);
          if (res.outcome === "refused-stale") return false;
          if (!OK.has(res.outcome)) return failed("surge", res.detail);
          // A dry-run asked nothing: no replacement comes; the rehearsal waits out the wait bound, as a restart's does, then ends.
          const dry = res.outcome === "dry-run";
          const surged = !dry && res.surged === true;
          a = { ...a, surged, healthyBefore: healthyIn(r.snap, a.az, id), ...(dry ? { dryRun: true } : {}) };
          if (!(await next(surged || dry ? "replacement" : "terminate", res))) return false;
          break;
        }
        case "replacement": {
          const now = healthyIn(r.snap, a.az, id);
          if (now >= (a.healthyBefore ?? 0) + 1 || (a.dryRun && r.now - a.since > this.s.waitTimeoutMs)) {
            if (!(await next("terminate", { step: "surge", target: id, outcome: "applied", calls: 0, detail: `a replacement is HEALTHY in ${a.az} (${now} nodes besides ${id})` }))) return false;
            break;
          }
          const waited = r.now - a.since;
          if (waited > this.s.replacementTimeoutMs) return failed("replacement", `no replacement HEALTHY in ${a.az} ${Math.round(waited / 1000)} s after the surge: ${id} stays drained, not terminated (check the group's scaling activities: capacity, quota)`);
          return true;
        }
        case "terminate": {
          const res = await this.o.actuator.terminate(r.instances.get(id) ?? a.host, a.surged === true, ctx);
          if (res.outcome === "refused-stale") return false;
          const ok = OK.has(res.outcome);
          const entry: HistoryEntry = { action: a.action, at: r.now, nodeId: id, outcome: res.outcome === "dry-run" ? "dry-run" : ok ? "applied" : "failed", fault: a.fault };
          if (!(await recordRepair(this.o.writer, this.o.keys.repairHistory, r.history, a.host, entry, this.o.windowMs)).accepted) return false;
          if (!ok) return failed("terminate", res.detail);
          return this.finish(id, a, r, token, res);
        }
        case "action": {
          const res = a.action === "restart" ? await this.o.actuator.restart(id, ctx) : await this.o.actuator.reboot(r.instances.get(id) ?? a.host, ctx);
          if (res.outcome === "refused-stale") return false;
          const ok = OK.has(res.outcome);
          const entry: HistoryEntry = { action: a.action, at: r.now, nodeId: id, outcome: res.outcome === "dry-run" ? "dry-run" : ok ? "applied" : "failed", fault: a.fault };
          if (!(await recordRepair(this.o.writer, this.o.keys.repairHistory, r.history, a.host, entry, this.o.windowMs)).accepted) return false;
          if (!ok) return failed(a.action, res.detail);
          if (res.outcome === "dry-run") a = { ...a, dryRun: true };
          if (!(await next("wait", res))) return false;
          return true; // the node needs time: its record is judged from the next period on
        }
        case "wait": {
          const n = r.snap.nodes.find((x) => x.nodeId === id);
          const waited = r.now - a.since;
          // A dry-run repaired nothing: the rehearsal ends after the wait bound, once per node, without a failure.
          if ((waited >= this.s.settleMs && n?.alive && n.status === "HEALTHY") || (a.dryRun && waited > this.s.waitTimeoutMs)) {
            const res = await this.o.actuator.uncordon(id, ctx);
            if (res.outcome === "refused-stale") return false;
            if (!OK.has(res.outcome)) return failed("uncordon", res.detail);
            return this.finish(id, a, r, token, res);
          }
          if (waited > this.s.waitTimeoutMs) return failed("wait", `not HEALTHY ${Math.round(waited / 1000)} s after its ${a.action}`);
          return true;
        }
      }
    }
    return true;
  }

  /** Done: a `repair.done` event, then the entry leaves `repair:active`. */
  private async finish(id: string, a: ActiveRepair, r: ActRound, token: number, res: RepairStepResult): Promise<boolean> {
    const done = { ...a, since: r.now, token, detail: REPLACING.has(a.action) ? `replaced; ${res.detail}` : `HEALTHY again; ${res.detail}` };
    const w = await this.o.writer.hset(this.o.keys.repairActive, { [id]: JSON.stringify({ ...done, step: "done" }) }, { changeField: id, eventType: "repair.done" });
    if (!w.accepted) return false;
    r.active.delete(id);
    const rest: Record<string, string> = {};
    for (const [k, v] of r.active) rest[k] = JSON.stringify(v);
    const w2 = await this.o.writer.hset(this.o.keys.repairActive, rest, { mode: "replace" });
    this.log.info({ nodeId: id, action: a.action, tookMs: r.now - a.startedAt }, REPLACING.has(a.action) ? "repair done: the host is terminated, its replacement serves" : "repair done: the node is HEALTHY and schedulable again");
    return w2.accepted;
  }
}
