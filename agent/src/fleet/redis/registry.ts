/**
 * The node registry: every agent heartbeats its node hash and keeps its AZ's available set
 * exact, atomically (`heartbeat-7.lua`). When Redis is unreachable the agent keeps its last
 * report (its HTTP and agent-check reporters serve local state anyway), retries with capped
 * backoff, and re-registers the moment the connection is ready again.
 */
import { randomBytes } from "node:crypto";
import { NODE_STATUSES, takesTraffic, type Decision } from "../../types";
import type { Logger } from "../../util/log";
import { sleep } from "../../util/net";
import type { RedisClient } from "./client";
import type { RedisKeys } from "./keys";
import type { Enrolment } from "../identity/enrol";
import {
  heartbeatScript,
  removeScript,
  type HeartbeatArgs,
  type HeartbeatKeys,
  type HeartbeatResult,
} from "./scripts";

/** What an agent publishes every period. */
export interface NodeReport {
  nodeId: string;
  az: string;
  decision: Decision;
  /** Healthy GPUs on the node. */
  gpus: number;
  /** GPUs the node should have (`LLMHA_GPU_COUNT`). */
  gpusExpected: number;
  /** Model id the server says it serves, null when none (yet). */
  model: string | null;
  /**
   * What the server says about that model beyond the id (same model everywhere):
   * revision or weights hash, dtype, max context; null or absent when it does not tell.
   */
  modelRevision?: string | null;
  modelDtype?: string | null;
  maxContext?: number | null;
  /** GPU fault facts behind its hard reasons (`encodeGpuFault`), for the leader's repair ladder; "" or absent = none. */
  gpuFault?: string;
}

/** The model part of a report, from what the server says it serves (null: nothing yet). */
export function servedReport(
  m: { id: string; revision: string | null; dtype: string | null; maxContext: number | null } | null,
): Pick<NodeReport, "model" | "modelRevision" | "modelDtype" | "maxContext"> {
  return { model: m?.id ?? null, modelRevision: m?.revision ?? null, modelDtype: m?.dtype ?? null, maxContext: m?.maxContext ?? null };
}

export interface RegistrySettings {
  /** Heartbeat period. Default 1000 ms (`LLMHA_INTERVAL_MS`). */
  intervalMs: number;
  /** The node hash expires after this many missed periods. Default 3. */
  ttlPeriods: number;
  /** Longest wait between retries while Redis is unreachable. Default 5000 ms. */
  maxBackoffMs: number;
  /** Approximate cap of the events stream. Default 10000. */
  eventsMaxLen: number;
}

export const DEFAULT_REGISTRY_SETTINGS: Readonly<RegistrySettings> = Object.freeze({
  intervalMs: 1000,
  ttlPeriods: 3,
  maxBackoffMs: 5000,
  eventsMaxLen: 10_000,
});

export class RegistryReportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RegistryReportError";
  }
}

/** Keys and arguments of one heartbeat (shared with the bench's simulated fleet). */
export function heartbeatArgs(keys: RedisKeys, r: NodeReport, ttlMs: number, eventsMaxLen: number, instance = ""): { k: HeartbeatKeys; a: HeartbeatArgs } {
  const d = r.decision;
  return {
    k: {
      node: keys.node(r.nodeId),
      available: keys.azAvailable(r.az),
      events: keys.events,
      nodes: keys.nodes,
      members: keys.members,
      azs: keys.azs,
      dead: keys.dead,
      suspect: keys.suspect,
    },
    a: {
      nodeId: r.nodeId,
      az: r.az,
      status: d.status,
      phase: d.phase,
      weight: d.weight,
      loadScore: Number.isFinite(d.loadScore) ? d.loadScore : 0,
      gpus: r.gpus,
      gpusExpected: r.gpusExpected,
      model: r.model ?? "",
      updatedAt: d.checkedAt,
      ttlMs,
      takesTraffic: takesTraffic(d),
      // Soft codes acted on, pending (not yet `fall` times) and suppressed (suspect): the
      // blast-radius cap counts them all, so a suspect check stays suspect while suppressed.
      soft: [...new Set([...d.reasons.filter((x) => !x.hard), ...d.pending, ...d.suppressed].map((x) => x.code))].join(","),
      hard: d.reasons.filter((x) => x.hard).map((x) => x.code).join(","),
      eventsMaxLen,
      prefix: keys.prefix,
      instance,
      modelRevision: r.modelRevision ?? "",
      modelDtype: r.modelDtype ?? "",
      maxContext: typeof r.maxContext === "number" && Number.isFinite(r.maxContext) ? r.maxContext : "",
      gpuFault: r.gpuFault ?? "",
    },
  };
}

export interface NodeRegistryOptions {
  client: RedisClient;
  keys: RedisKeys;
  settings?: Partial<RegistrySettings>;
  log: Logger;
  /** Called after every heartbeat attempt (metrics). */
  onHeartbeat?: (ok: boolean) => void;
  /** This agent process's id in the node hash (one live agent per node id). Default: random. */
  instance?: string;
  /**
   * Node identity (`LLMHA_IDENTITY_TOKEN_FILE`): the agent enrols and heartbeats only under its
   * own record key (`node:<id>:<capability>`); until enrolled it does not heartbeat.
   */
  identity?: Enrolment;
}

/** Another live agent holds this node id. */
export interface NodeIdConflict {
  /** Its instance id. */
  heldBy: string;
  /** How long ago it last heartbeat (ms, Redis clock), null when unknown. */
  lastHeartbeatAgoMs: number | null;
}

export class NodeRegistry {
  readonly settings: Readonly<RegistrySettings>;
  private readonly client: RedisClient;
  private readonly keys: RedisKeys;
  private readonly log: Logger;
  private readonly onHeartbeat: (ok: boolean) => void;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private getReport: (() => NodeReport) | null = null;
  private failures = 0;
  private errorCount = 0;
  private last: NodeReport | null = null;
  private lastOkAt: number | null = null;
  private resumedOkAt: number | null = null;
  private suspect: readonly string[] = [];
  private everRegistered = false;
  private inFlight = false;
  private current: Promise<void> | null = null;
  /** Set while another live agent holds this node id (the heartbeat was refused). */
  private conflict: string | null = null;
  readonly instance: string;
  private readonly identity: Enrolment | null;
  private beats = 0;
  private readonly onReady = (): void => {
    // Redis is back: re-register now instead of waiting out the backoff.
    if (this.failures > 0 && !this.closed && this.getReport) this.arm(0);
  };

  constructor(opts: NodeRegistryOptions) {
    this.settings = Object.freeze({ ...DEFAULT_REGISTRY_SETTINGS, ...opts.settings });
    this.client = opts.client;
    this.keys = opts.keys;
    this.log = opts.log.child({ component: "registry" });
    this.onHeartbeat = opts.onHeartbeat ?? (() => undefined);
    this.instance = opts.instance ?? randomBytes(8).toString("hex");
    this.identity = opts.identity ?? null;
  }

  /**
   * With a node identity: the record key this agent writes under (null until enrolled); without
   * one: undefined (its answers and record go under the plain node id).
   */
  get ownRecordKey(): string | null | undefined {
    return this.identity ? this.identity.recordKey : undefined;
  }

  /** The instance that holds this node id in Redis instead of this agent, while one does. */
  get heldBy(): string | null {
    return this.conflict;
  }

  /**
   * Before start: does another live agent hold `nodeId`? A hash left by a dead instance
   * (crash, SIGKILL) expires within one TTL, so it is watched that long: if its heartbeat
   * time moves, the holder is alive. Resolves null when the id is free (or Redis does not
   * answer: the heartbeat's own check still refuses to overwrite a live holder).
   */
  async nodeIdConflict(nodeId: string, opts: { readyTimeoutMs?: number } = {}): Promise<NodeIdConflict | null> {
    if (!(await this.client.whenReady(opts.readyTimeoutMs ?? 2000))) return null;
    const key = this.keys.node(nodeId);
    const read = async (): Promise<{ instance: string | null; updatedAt: string | null }> => {
      const [instance, updatedAt] = await this.client.redis.hmget(key, "instance", "updatedAt");
      return { instance, updatedAt };
    };
    try {
      const first = await read();
      if (!first.instance || first.instance === this.instance) return null;
      const deadline = Date.now() + this.ttlMs + this.settings.intervalMs;
      while (Date.now() < deadline) {
        await sleep(Math.min(this.settings.intervalMs, 500));
        const now = await read();
        if (!now.instance || now.instance === this.instance) return null;
        if (now.updatedAt !== first.updatedAt || now.instance !== first.instance) {
          const [sec, usec] = await this.client.redis.time();
          const ago = now.updatedAt ? Number(sec) * 1000 + Math.floor(Number(usec) / 1000) - Number(now.updatedAt) : null;
          return { heldBy: now.instance, lastHeartbeatAgoMs: ago !== null && Number.isFinite(ago) ? Math.max(0, ago) : null };
        }
      }
      return null;
    } catch {
      return null;
    }
  }

  get ttlMs(): number {
    return this.settings.intervalMs * this.settings.ttlPeriods;
  }
  /** True when the last heartbeat reached Redis and the connection is up. */
  get connected(): boolean {
    return this.failures === 0 && this.lastOkAt !== null && this.client.connected;
  }
  /** Failed heartbeats since start. */
  get errors(): number {
    return this.errorCount;
  }
  /** The last report handed to the registry (kept while Redis is down). */
  get lastReport(): NodeReport | null {
    return this.last;
  }
  /** Epoch ms of the last heartbeat Redis accepted. */
  get lastHeartbeatAt(): number | null {
    return this.lastOkAt;
  }
  /** The last heartbeat failed: the leader's view of the fleet may lack this node now. */
  get failing(): boolean {
    return this.failures > 0;
  }
  /** Epoch ms (local clock) of the first heartbeat Redis accepted after some failed: this node back in the leader's view. */
  get resumedAt(): number | null {
    return this.resumedOkAt;
  }
  /** Soft check codes the leader marked suspect (blast-radius cap), as of the last heartbeat. */
  get suspectChecks(): readonly string[] {
    return this.suspect;
  }

  /** One heartbeat; throws when Redis does not answer. */
  async heartbeat(report: NodeReport): Promise<HeartbeatResult> {
    if (!NODE_STATUSES.includes(report.decision.status)) {
      throw new RegistryReportError(`unknown status ${String(report.decision.status)}`);
    }
    this.last = report;
    const { k, a } = heartbeatArgs(this.keys, report, this.ttlMs, this.settings.eventsMaxLen, this.instance);
    if (this.identity) {
      // Every 10th beat: is the capability still the leader's? (It lost them, or a re-enrolment replaced it.)
      if (this.identity.recordKey && this.beats++ % 10 === 9) await this.identity.stillValid();
      const own = this.identity.recordKey ?? (await this.identity.enrol(Math.max(2000, 3 * this.settings.intervalMs)));
      if (!own) throw new RegistryReportError("not enrolled yet: no answer from the leader to this node's enrolment");
      k.node = own;
    }
    const r = await heartbeatScript(this.client.redis, k, a);
    if (r.heldBy !== null) {
      if (this.conflict !== r.heldBy) {
        this.log.error(
          { nodeId: report.nodeId, heldBy: r.heldBy, instance: this.instance },
          `node id ${report.nodeId} is held by another live agent (instance ${r.heldBy}); not registering until it stops or its heartbeat expires — give each agent its own LLMHA_NODE_ID`,
        );
      }
      this.conflict = r.heldBy;
      return r;
    }
    if (this.conflict !== null) this.log.info({ nodeId: report.nodeId, instance: this.instance }, "node id free again; registering");
    this.conflict = null;
    this.suspect = r.suspect;
    this.lastOkAt = Date.now();
    return r;
  }

  /** Heartbeats every period from `getReport()` until `stop()`; the first one once connected (or after 2 s). */
  start(getReport: () => NodeReport): void {
    if (this.getReport || this.closed) return;
    this.getReport = getReport;
    this.client.redis.on("ready", this.onReady);
    void this.client.whenReady(2000).then(() => this.arm(0));
  }

  private arm(ms: number): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.current = this.beat();
    }, ms);
  }

  private async beat(): Promise<void> {
    if (this.closed || !this.getReport || this.inFlight) return;
    this.inFlight = true;
    let report: NodeReport;
    try {
      report = this.getReport();
    } catch (err) {
      this.log.error({ err: (err as Error).message }, "getReport failed; heartbeating the last report");
      report = this.last as NodeReport;
    }
    try {
      if (!report) throw new RegistryReportError("no report yet");
      const r = await this.heartbeat(report);
      if (r.heldBy !== null) {
        // Not an error of Redis: retry every period until the holder stops or expires.
        this.failures = 0;
        this.inFlight = false;
        this.arm(this.settings.intervalMs);
        return;
      }
      if (this.failures > 0 && this.everRegistered) this.resumedOkAt = Date.now();
      if (this.failures > 0 || !this.everRegistered) {
        this.log.info({ nodeId: report.nodeId, az: report.az, afterFailures: this.failures }, this.everRegistered ? "re-registered" : "registered");
      }
      if (r.changed) this.log.info({ status: report.decision.status }, "status published");
      this.everRegistered = true;
      this.failures = 0;
      this.onHeartbeat(true);
      this.inFlight = false;
      this.arm(this.settings.intervalMs);
    } catch (err) {
      this.errorCount += 1;
      this.failures += 1;
      this.onHeartbeat(false);
      if (this.failures === 1) this.log.warn({ err: (err as Error).message }, "registry heartbeat failed; serving local state, retrying");
      const backoff = Math.min(this.settings.maxBackoffMs, this.settings.intervalMs * 2 ** (this.failures - 1));
      this.inFlight = false;
      this.arm(backoff);
    }
  }

  /** Stops heartbeating (does not remove the node: see `remove`). */
  stopLoop(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.client.redis.off("ready", this.onReady);
  }

  /** Graceful shutdown: the node leaves every set at once — unless another live agent holds its id (then nothing is touched). */
  async remove(): Promise<boolean> {
    this.stopLoop();
    await this.current; // a heartbeat landing after the removal would register the node again
    const id = this.last?.nodeId;
    if (!id) return false;
    const k = this.keys;
    const r = await removeScript(
      this.client.redis,
      { node: this.identity?.recordKey ?? k.node(id), events: k.events, nodes: k.nodes, members: k.members, dead: k.dead },
      id,
      k.prefix,
      this.settings.eventsMaxLen,
      this.instance,
    );
    if (r === "held") this.log.warn({ nodeId: id, instance: this.instance }, `node ${id} left in Redis: another live agent holds its id`);
    return r === "removed";
  }
}

// The read side (the controller, `llm-ha status`) lives in snapshot.ts.
export { readSnapshot, type NodeView, type RegistrySnapshot, type SkippedRecord } from "./snapshot";
