/**
 * The rollout on the leader, each period (called from the controller's tick, like the repair
 * round): read the request (`rollout:request`, and the optional extra source the Pulumi program
 * feeds), the `rollout` hash and the live nodes' records; step the state (`stepRollout`, pure);
 * carry out its switches through the fenced rollout actuator (a stale token is refused before
 * the implementation); write the hash (fenced; a `rollout` event on each phase or step change);
 * log one line per transition; set the metrics.
 *
 * A new leader reads the hash and goes on (a switch asked twice is `already`). Each request is
 * acted on once: the hash remembers the last one acted on from each source (`acted`,
 * `actedExtra`). A start with no rollout actuator is refused, with the reason in `refused`.
 */
import type { Redis } from "ioredis";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { RegistrySnapshot } from "../redis/registry";
import type { AzView } from "../controller/state";
import type { Logger } from "../../util/log";
import type { RolloutMetrics } from "./metrics";
import { isActive, stepRollout, unask } from "./plan";
import { tierForbidsStart } from "./view";
import { majorityRevision, parseRequest, parseState, readCanary, readNodes, requestKey, type RecordKeys } from "./read";
import { TERMINAL_PHASES, type GateName, type RolloutActuator, type RolloutRequest, type RolloutSettings, type RolloutState } from "./types";
import type { RolloutObservation } from "./view";

export interface RolloutRunnerOptions {
  redis: Redis;
  keys: RedisKeys;
  writer: FencedWriter;
  log: Logger;
  /** The rollout actuator behind its fencing gate; null: none configured (a start is refused). */
  actuator: RolloutActuator | null;
  /** The token of the term this process leads now, null when it does not. */
  token: () => number | null;
  settings: RolloutSettings;
  /** An AZ's floor share (the controller's `degradedBelow`). */
  floorShare: number;
  standbyAz: string | null;
  /** Canaries are learned on this leader (else the canary gate passes and says so). */
  canary: boolean;
  /** Perf samples older than this are ignored. */
  perfMaxAgeMs: number;
  /** A second request source (the Pulumi program's ConfigMap), read each period; acted on once per request as well. */
  extraRequest?: () => Promise<RolloutRequest | null>;
  metrics?: RolloutMetrics;
  /** The gates checked (tests take one out); default all. */
  gates?: readonly GateName[];
}

export interface RolloutRound {
  snap: RegistrySnapshot;
  azs: readonly AzView[];
  /** The tier the leader evaluated this period: no rollout starts at L2 or above. */
  tier?: { level: string; reason: string };
  now: number;
  inventory?: RecordKeys | null;
}

export class RolloutRunner {
  private readonly log: Logger;
  private lastError = "";
  private lastBad = "";
  /** The state this leader last wrote or read (status, tests). */
  last: RolloutState | null = null;

  constructor(private readonly o: RolloutRunnerOptions) {
    this.log = o.log.child({ component: "rollout" });
  }

  /** One period. `accepted: false` when a write was fenced out; other failures are logged once and tried again next period. */
  async round(r: RolloutRound): Promise<{ accepted: boolean }> {
    try {
      const w = await this.period(r);
      this.lastError = "";
      return w;
    } catch (err) {
      const msg = (err as Error).message;
      if (msg !== this.lastError) this.log.warn({ err: msg }, "rollout not stepped this period");
      this.lastError = msg;
      return { accepted: true };
    }
  }

  private async period(r: RolloutRound): Promise<{ accepted: boolean }> {
    const { redis, keys } = this.o;
    const [rawReq, extra, hash] = await Promise.all([
      redis.get(keys.rolloutRequest),
      this.o.extraRequest ? this.o.extraRequest().catch((err: Error) => (this.warnOnce(`extra rollout request unreadable: ${err.message}`), null)) : Promise.resolve(null),
      redis.hgetall(keys.rollout),
    ]);
    const prev = parseState(hash.state);
    const parsed = parseRequest(rawReq);
    if (parsed.bad) this.warnOnce(`rollout:request ignored: ${parsed.bad}`);
    const acted: Record<string, string> = {};
    let req: RolloutRequest | null = null;
    if (parsed.req && requestKey(parsed.req) !== hash.acted) {
      req = parsed.req;
      acted.acted = requestKey(req);
    } else if (extra && requestKey(extra) !== hash.actedExtra) {
      // The stack's change waits for a rollout under way (an operator's, or the stack's previous
      // one) instead of being refused once and then never acted on: it starts when that one ends.
      const busy = extra.op !== "start" ? null : prev && isActive(prev) && prev.id !== extra.id ? `rollout ${prev.id} is ${prev.phase}` : tierForbidsStart(r.tier);
      if (busy) this.warnOnce(`the stack's rollout ${extra.id} (to ${extra.to?.revision ?? "?"}) waits: ${busy}`);
      else {
        req = extra;
        acted.actedExtra = requestKey(extra);
      }
    }
    this.last = prev;
    if (!req && (!prev || !isActive(prev))) {
      this.o.metrics?.set(prev);
      return { accepted: true };
    }
    const { nodes, models } = await readNodes(redis, keys, r.snap, r.inventory ?? null);
    const currentRev = hash.current || majorityRevision(nodes);
    const obs: RolloutObservation = {
      nodes,
      azs: r.azs.map((a) => ({ az: a.az, state: a.state, healthyCapacity: a.healthyCapacity, totalCapacity: a.totalCapacity })),
      floorShare: this.o.floorShare,
      standbyAz: this.o.standbyAz,
      granularity: this.o.actuator?.granularity ?? null,
      canary: { off: true, modelKey: null, expectation: null, answered: [] },
      perfMaxAgeMs: this.o.perfMaxAgeMs,
      current: currentRev ? { revision: currentRev } : null,
      ...(r.tier ? { tier: r.tier } : {}),
    };
    // The canary evidence is for the rollout under way, or the one a start begins (read the next period).
    if (this.o.canary && prev && isActive(prev)) obs.canary = await readCanary(redis, keys, prev, nodes, models, r.inventory ?? null);
    const res = stepRollout(prev, obs, req, this.o.settings, r.now, { gates: this.o.gates });
    let state = res.state;
    if (res.notice) this.log.warn({ request: req, reason: res.notice }, "rollout request not acted on");
    const token = this.o.token();
    if (token === null) return { accepted: true };
    const hosts = new Map((r.inventory?.current ?? []).filter((n) => n.instanceId).map((n) => [n.nodeId, n.instanceId!]));
    for (const a of res.actions) {
      if (!state) break;
      if (!this.o.actuator && a.finish) continue;
      if (!this.o.actuator) {
        // A rollout started by a leader that had one: this one waits (nothing asked) and says why.
        this.warnOnce(`rollout ${state.id} waits: this leader has no rollout actuator (LLMHA_ACTUATOR) to switch ${a.nodes.join(",")}`);
        state = unask(state, a);
        continue;
      }
      const out = await this.o.actuator.switch({ rolloutId: state.id, az: a.az, nodes: a.nodes.map((nodeId) => ({ nodeId, host: hosts.get(nodeId) ?? nodeId })), to: a.to, token });
      if (out.outcome === "refused-stale") return { accepted: true };
      if (out.outcome === "failed" && a.finish) {
        this.log.warn({ rollout: state.id, az: a.az, detail: out.detail }, `rollout promoted, but ${a.az} as a whole still asks for the old revision: what starts there later (a standby woken, a replaced node) serves it and is refused as MODEL_MISMATCH; set its inference Deployment's image and revision annotation by hand`);
      } else if (out.outcome === "failed") {
        this.log.warn({ rollout: state.id, az: a.az, nodes: a.nodes, detail: out.detail }, "rollout switch failed: asked again next period");
        state = unask(state, a);
      }
    }
    return this.write(prev, state, hash, { ...acted, ...(res.notice ? { refused: `${r.now} ${res.notice}`.slice(0, 500) } : {}) }, r.now);
  }

  private async write(prev: RolloutState | null, state: RolloutState | null, hash: Record<string, string>, extra: Record<string, string>, now: number): Promise<{ accepted: boolean }> {
    const { writer, keys } = this.o;
    if (!state) {
      if (!Object.keys(extra).length) return { accepted: true };
      return writer.hset(keys.rollout, { ...extra, updatedAt: now });
    }
    const active = isActive(state);
    const current = state.phase === "promoted" ? state.to.revision : active || state.phase === "rolled-back" || state.phase === "aborted" ? state.from.revision : hash.current ?? "";
    const allow = active ? `${state.from.revision},${state.to.revision}` : current;
    const transition = `${state.id}:${state.phase}:${state.step}`;
    if (transition !== hash.transition) {
      const t = await writer.hset(keys.rollout, { transition, id: state.id, phase: state.phase, step: state.step, reason: state.reason.slice(0, 500), fromRevision: state.from.revision, toRevision: state.to.revision }, { changeField: "transition", eventType: "rollout" });
      if (!t.accepted) return t;
    }
    const w = await writer.hset(keys.rollout, { ...extra, state: JSON.stringify(state), id: state.id, phase: state.phase, step: state.step, current, allow, updatedAt: now });
    if (!w.accepted) return w;
    this.logTransition(prev, state);
    this.last = state;
    this.o.metrics?.set(state);
    return w;
  }

  private logTransition(prev: RolloutState | null, s: RolloutState): void {
    if (prev?.id === s.id && prev.phase === s.phase && prev.step === s.step) return;
    const failed = s.phase === "rolling-back" && prev?.id === s.id && prev.phase !== "rolling-back";
    if (failed && s.cause) this.o.metrics?.rollbacks.inc({ cause: s.cause });
    const level = s.phase === "rolling-back" || s.phase === "rolled-back" || s.phase === "aborted" ? "warn" : "info";
    this.log[level]({ rollout: s.id, from: s.from.revision, to: s.to.revision, phase: s.phase, was: prev?.id === s.id ? prev.phase : null, step: s.step, az: s.steps[s.step]?.az, reason: s.reason }, TERMINAL_PHASES.includes(s.phase) ? "rollout ended" : "rollout");
  }

  private warnOnce(msg: string): void {
    if (msg === this.lastBad) return;
    this.lastBad = msg;
    this.log.warn(msg);
  }
}
