/**
 * The fleet layer in one object for the agent's `main`: the registry heartbeat (every node),
 * the leader lease and the controller (whichever node leads), and `/az/health`.
 *
 *   const fleet = new Fleet({ redisUrl, cluster, nodeId, az, intervalMs, log, metrics });
 *   fleet.attachActuator(await createActuator(cfg, fleet.actuatorDeps()));   // optional
 *   fleet.start(() => report);     // after the first decision
 *   ...GET /az/health → await fleet.azHealth(); GET /status → fleet.status()
 *   await fleet.stop();            // SIGTERM: releases the lease, removes the node
 */
import type { Inventory } from "../inventory/inventory";
import type { JWTVerifyGetKey } from "jose";
import { Enrolment } from "../identity/enrol";
import { EnrolmentDesk } from "../identity/desk";
import type { Registry } from "prom-client";
import type { ConnectionOptions } from "node:tls";
import type { FencedActuator } from "../actuators/gate";
import type { ActuatorDeps } from "../actuators/index";
import { Reconciler, type ReconcilerSettings } from "../actuators/reconciler";
import { ForeignWatch } from "../actuators/foreign";
import { ReservedSizer } from "../actuators/reserved-sizer";
import { createRedisClient, type RedisClient } from "../redis/client";
import { FencedWriter } from "../redis/fenced";
import { RedisKeys } from "../redis/keys";
import { LeaderLease, type LeaseSettings } from "../redis/lease";
import { NodeRegistry, type NodeReport } from "../redis/registry";
import type { Logger } from "../../util/log";
import { within } from "../../util/net";
import { readAzHealth, type AzHealthResponse } from "./az-health";
import { Controller } from "./controller";
import { PracticeSchedule, type PracticeSettings } from "../actuators/practice";
import { StandbyParkSchedule } from "../actuators/karpenter/schedule";
import type { StandbyScheduleSpec } from "../actuators/karpenter/settings";
import { FleetMetrics } from "./metrics";
import { DEFAULT_CONTROLLER_SETTINGS, type ControllerSettings, type Evaluation, type TierLevel } from "./state";
import type { CanaryLearning } from "./controller";
import type { RepairActSettings } from "../repair/act";
import { RepairAdvisor } from "../repair/advise";
import type { RepairSettings } from "../repair/ladder";
import { repairRunner } from "../repair/wire";
import type { RepairActuator } from "../actuators/repair-types";
import { rolloutRunner, type FleetRolloutOptions } from "../rollout/wire";

export interface FleetOptions {
  /** `redis://` or `rediss://` (`LLMHA_REDIS_URL`); may carry the password. */
  redisUrl: string;
  /** `LLMHA_CLUSTER`: the key namespace. */
  cluster: string;
  nodeId: string;
  az: string;
  /** Heartbeat period (`LLMHA_INTERVAL_MS`); the node hash expires after 3 of them. */
  intervalMs: number;
  lease?: Partial<LeaseSettings>;
  /** Controller settings; `intervalMs` defaults to the heartbeat period. */
  controller?: Partial<ControllerSettings>;
  /** Practice wakes of the standby (`LLMHA_PRACTICE_WAKE`); none when absent. */
  practice?: PracticeSettings;
  /** The standby's park/wake crons the leader runs (`LLMHA_STANDBY_SCHEDULE` with the Karpenter engine); none when absent. */
  standbySchedule?: { spec: StandbyScheduleSpec; timeZone: string };
  /** Which GPU nodes exist and where (`LLMHA_INVENTORY`), for the leader; none: trust agents' indexes. */
  inventory?: Inventory;
  /** The node's projected token (`LLMHA_IDENTITY_TOKEN_FILE`): the agent enrols and heartbeats under its own record key. */
  identityTokenFile?: string;
  /** The leader verifies enrolments against these issuer keys (`LLMHA_IDENTITY_JWKS`); needs `inventory`. */
  identities?: { jwks: () => Promise<JWTVerifyGetKey>; issuer: string | null };
  log: Logger;
  /** The agent's Prometheus registry; the `llmha_…` fleet series are added to it. */
  metrics: Registry;
  /** TLS options for `rediss://` (CA, servername). */
  tls?: ConnectionOptions;
  /** Auth token given apart from the URL. */
  password?: string;
  /** ACL user given apart from the URL (`LLMHA_REDIS_USER`). */
  username?: string;
  /** Lease holder id. Default `<nodeId>/<pid>`. */
  holderId?: string;
  /** Take part in the leader election. Default true; false for node agents (`LLMHA_ROLE=node`). */
  contend?: boolean;
  /** Heartbeat a node record. Default true; false for the controller (`LLMHA_ROLE=controller`), which checks no node. */
  register?: boolean;
  /** Correctness canaries: the leader learns and publishes the expected answers; none when off. */
  canary?: CanaryLearning;
  /** The repair ladder (`LLMHA_REPAIR_MODE`, `LLMHA_REPAIR_SPARE`): with `advise` the leader publishes its plan each period. Default off. */
  repair?: { mode: "off" | "advise" | "act"; spare?: ReadonlyMap<string, number>; actuator?: RepairActuator | null; act?: Partial<RepairActSettings>; settings?: Partial<RepairSettings>; warningScanMs?: number };
  /** Model and engine rollouts, AZ by AZ (`llm-ha rollout`): the leader steps the one requested. None: requests are not read. */
  rollout?: FleetRolloutOptions;
}

export interface FleetStatus {
  /** `instance`: this agent's id in its node hash; `nodeIdHeldBy`: another live agent's, while it holds this node id (this one is then not registered). */
  redis: { url: string; connected: boolean; errors: number; lastHeartbeatAt: number | null; instance: string; nodeIdHeldBy: string | null };
  lease: { holderId: string; isLeader: boolean; leader: string | null; token: number | null; highestToken: number; acquisitions: number };
  /** `silenceExplained`: why missing heartbeats are not acted on now (Redis trouble), null when they are. */
  controller: { tier: TierLevel | null; suspect: string[]; azs: Evaluation["azs"]; lastAggregationMs: number | null; silenceExplained: string | null } | null;
  /** Kind of the attached actuator, null when the leader acts on nothing. */
  actuator: string | null;
}

export class Fleet {
  /** Epoch ms of the last Redis trouble this agent saw (a failed heartbeat, an error, a reconnect); the controller's silence grace. */
  private redisTroubleAt: number | null = null;
  readonly keys: RedisKeys;
  readonly client: RedisClient;
  readonly registry: NodeRegistry;
  readonly lease: LeaderLease;
  readonly controller: Controller;
  readonly metrics: FleetMetrics;
  private readonly o: FleetOptions;
  private readonly log: Logger;
  private started = false;
  private stopped = false;
  private connTimer: NodeJS.Timeout | null = null;
  private readonly writer: FencedWriter;
  private actuator: FencedActuator | null = null;
  private reconciler: Reconciler | null = null;
  private foreign: ForeignWatch | null = null;
  private reserved: ReservedSizer | null = null;

  constructor(o: FleetOptions) {
    this.o = o;
    this.log = o.log.child({ component: "fleet" });
    this.keys = new RedisKeys(o.cluster);
    this.metrics = new FleetMetrics(o.metrics, o.az);
    const holderId = o.holderId ?? `${o.nodeId}/${process.pid}`;
    this.client = createRedisClient(o.redisUrl, {
      name: `llmha-${holderId}`,
      log: o.log,
      tls: o.tls,
      password: o.password,
      username: o.username,
      // Another server behind the endpoint (a promoted replica that may have missed the last
      // heartbeats): node hashes expired there are Redis's doing, not the nodes'. Held like any
      // Redis trouble (`silenceGraceMs`).
      onServerChange: () => (this.redisTroubleAt = Date.now()),
      // A process that contends for the lease is the controller (its user may load the
      // functions library); a node agent (`LLMHA_ROLE=node`) waits for it to.
      loadFunctions: o.contend !== false,
      // Back within one heartbeat of the endpoint reaching a server again (client.ts).
      maxBackoffMs: Math.min(2000, o.intervalMs),
    });
    this.registry = new NodeRegistry({
      client: this.client,
      keys: this.keys,
      settings: { intervalMs: o.intervalMs },
      log: o.log,
      identity: o.identityTokenFile ? new Enrolment({ redis: this.client.redis, keys: this.keys, nodeId: o.nodeId, tokenFile: o.identityTokenFile, log: o.log }) : undefined,
      onHeartbeat: (ok) => {
        if (!ok) this.redisTroubleAt = Date.now();
        this.metrics.heartbeats.inc({ result: ok ? "ok" : "error" });
        if (!ok) this.metrics.redisErrors.inc();
        this.metrics.redisConnected.set(ok ? 1 : 0);
      },
    });
    this.lease = new LeaderLease({ redis: this.client.redis, keys: this.keys, holderId, settings: o.lease, log: o.log });
    const writer = new FencedWriter(this.client.redis, this.keys, this.lease);
    this.writer = writer;
    writer.onRejected = () => this.metrics.staleWritesRejected.inc();
    this.controller = new Controller({
      redis: this.client.redis,
      keys: this.keys,
      lease: this.lease,
      writer,
      settings: { intervalMs: o.intervalMs, ...o.controller },
      log: o.log,
      metrics: this.metrics,
      heartbeatTtlMs: this.registry.ttlMs,
      redisTroubleAt: () => this.redisTroubleAt,
      onPublished: (e, token) => {
        this.reconciler?.onEvaluation(e, token);
        this.foreign?.onPeriod(token);
        this.reserved?.onPeriod(token);
      },
      standbyUnavailable: () => this.reconciler?.standbyUnavailable() ?? null,
      standbyBackoff: () => this.reconciler?.standbyBackoff() ?? null,
      practice: o.practice ? new PracticeSchedule(o.practice, o.metrics) : undefined,
      standbySchedule: o.standbySchedule ? new StandbyParkSchedule(o.standbySchedule.spec, o.standbySchedule.timeZone) : undefined,
      canary: o.canary,
      inventory: o.inventory,
      repair: o.repair && o.repair.mode !== "off"
        ? new RepairAdvisor({
          redis: this.client.redis, keys: this.keys, writer, log: o.log, spare: o.repair.spare, settings: o.repair.settings, warningScanMs: o.repair.warningScanMs,
          // An AZ's floor: repair never takes it below the share that keeps it out of DEGRADED.
          floorShare: o.controller?.degradedBelow ?? DEFAULT_CONTROLLER_SETTINGS.degradedBelow,
          onPlan: (actions) => this.metrics.setRepair(actions),
          runner: o.repair.mode === "act" ? repairRunner({ redis: this.client.redis, keys: this.keys, writer, lease: this.lease, log: o.log, metrics: o.metrics, actuator: o.repair.actuator, settings: o.repair.act }) : undefined,
        })
        : undefined,
      rollout: o.rollout
        ? rolloutRunner({
          redis: this.client.redis, keys: this.keys, writer, lease: this.lease, log: o.log, metrics: o.metrics, intervalMs: o.intervalMs, canary: o.canary !== undefined,
          floorShare: o.controller?.degradedBelow ?? DEFAULT_CONTROLLER_SETTINGS.degradedBelow, standbyAz: o.controller?.standbyAz ?? null,
        }, o.rollout)
        : undefined,
      identities: o.identities && o.inventory
        ? new EnrolmentDesk({ redis: this.client.redis, keys: this.keys, jwks: o.identities.jwks, issuer: o.identities.issuer, log: o.log, onJudged: (result) => this.metrics.enrolments.inc({ result }) })
        : undefined,
    });
    // A lost connection (a failover moving the endpoint, a restart) is Redis trouble too.
    for (const ev of ["error", "reconnecting"] as const) this.client.redis.on(ev, () => (this.redisTroubleAt = Date.now()));
    this.lease.on("acquired", (token) => {
      this.metrics.leader.set(1);
      this.metrics.fencingToken.set(token);
      this.metrics.leaseAcquisitions.inc();
    });
    this.lease.on("poisoned", (detail) => {
      this.metrics.distrusted.inc({ what: "fence" });
      // On the record where `llm-ha status` shows events: someone or something wrote a fence value no leader issued.
      this.client.redis
        .xadd(this.keys.events, "MAXLEN", "~", "10000", "*", "type", "fence-poisoned", "detail", detail.slice(0, 200), "leader", holderId)
        .catch(() => undefined);
    });
    this.lease.on("lost", (reason) => {
      this.metrics.leader.set(0);
      this.metrics.fencingToken.set(0);
      this.metrics.leaseLosses.inc({ reason });
      this.reconciler?.endTerm();
      this.foreign?.endTerm();
      this.reserved?.endTerm();
    });
  }

  /** What `createActuator` needs from the fleet: its Redis, keys, and the lease as the token check. */
  actuatorDeps(): ActuatorDeps {
    return { redis: this.client.redis, keys: this.keys, lease: { currentToken: () => this.lease.current?.token ?? null }, log: this.o.log, metrics: this.o.metrics, holder: this.lease.holderId };
  }

  /** Lets the leader act beyond Redis (before `start`): the reconciler follows each published period. */
  attachActuator(actuator: FencedActuator | null, settings: Partial<ReconcilerSettings> = {}): void {
    if (!actuator || this.started) return;
    this.actuator = actuator;
    this.reconciler = new Reconciler({
      actuator,
      redis: this.client.redis,
      keys: this.keys,
      writer: this.writer,
      currentToken: () => this.lease.current?.token ?? null,
      log: this.o.log,
      metrics: this.metrics,
      registry: this.o.metrics,
      settings: { retryBaseMs: this.controller.settings.intervalMs, ...settings },
    });
    // What the controller did not make is reported, audited as often as its own actions are re-asserted.
    this.foreign = new ForeignWatch({
      audit: () => actuator.audit(),
      redis: this.client.redis,
      keys: this.keys,
      currentToken: () => this.lease.current?.token ?? null,
      log: this.o.log,
      registry: this.o.metrics,
      holder: this.lease.holderId,
      everyMs: this.reconciler.settings.reassertMs,
    });
    // GPU groups created at zero on a reservation: sized once it is active (a round a minute while leading).
    this.reserved = new ReservedSizer({ sizeReserved: (ctx) => actuator.sizeReserved(ctx), currentToken: () => this.lease.current?.token ?? null, log: this.o.log });
    this.log.info({ actuator: actuator.kind, standbyAz: this.controller.settings.standbyAz, zonalShift: this.controller.settings.zonalShift }, "leader actuator attached");
  }

  get isLeader(): boolean {
    return this.lease.isLeader;
  }

  /** Soft checks the leader marked suspect: the evaluator should not take nodes out for them. */
  get suspectChecks(): readonly string[] {
    return this.registry.suspectChecks;
  }

  start(getReport: () => NodeReport): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (this.o.register !== false) this.registry.start(getReport);
    this.controller.start();
    // Contend once connected: a first attempt that fails would wait a whole contend period.
    void this.client.whenReady(2000).then(() => {
      if (!this.stopped && this.o.contend !== false) this.lease.start();
    });
    // the connected gauge also follows the socket between heartbeats
    const watch = (): void => {
      if (this.stopped) return;
      if (!this.client.connected) this.metrics.redisConnected.set(0);
      this.connTimer = setTimeout(watch, 1000);
    };
    watch();
    this.log.info({ redis: this.client.safeUrl, cluster: this.o.cluster, az: this.o.az, holderId: this.lease.holderId }, "fleet started");
  }

  /** Ordered shutdown: stop leading (release), leave the registry, close the connection. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.connTimer) clearTimeout(this.connTimer);
    this.controller.stop();
    this.reconciler?.endTerm();
    this.foreign?.endTerm();
    this.reserved?.endTerm();
    // A call in flight finishes (or not) on its own; shutdown waits for it a little only.
    if (this.reconciler) await within(Promise.all([this.reconciler.idle(), this.reserved?.idle()]), 3000);
    await this.actuator?.close();
    await this.lease.release();
    try {
      if (this.o.register !== false) await this.registry.remove();
    } catch (err) {
      this.registry.stopLoop();
      this.log.warn({ err: (err as Error).message }, "could not remove the node from the registry; it expires by TTL");
    }
    await this.client.close();
    this.metrics.leader.set(0);
    this.metrics.redisConnected.set(0);
  }

  /**
   * `GET /az/health` for this node's AZ; fails open (200, stale) without Redis, and on a DOWN
   * while this node is rejoining: while its heartbeats fail (Redis may answer this read before
   * the next heartbeat lands), and after they reach Redis again for one heartbeat period plus
   * the leader's `recoverPeriods` evaluations and one more: the time the leader needs to see
   * the AZ back and publish it better (a state recovers only after that many evaluations).
   */
  async azHealth(): Promise<AzHealthResponse> {
    const resumed = this.registry.resumedAt;
    const c = this.controller.settings;
    const graceMs = (c.recoverPeriods + 1) * c.intervalMs + this.registry.settings.intervalMs;
    return readAzHealth(this.client.redis, this.keys, this.o.az, {
      connected: this.client.connected,
      staleAfterMs: c.staleAfterMs,
      rejoining: this.registry.failing || (resumed !== null && Date.now() - resumed < graceMs),
    });
  }

  /** The fleet part of `GET /status`. */
  status(): FleetStatus {
    const e = this.controller.lastEvaluation;
    return {
      redis: {
        url: this.client.safeUrl,
        connected: this.registry.connected,
        errors: this.registry.errors,
        lastHeartbeatAt: this.registry.lastHeartbeatAt,
        instance: this.registry.instance,
        nodeIdHeldBy: this.registry.heldBy,
      },
      lease: {
        holderId: this.lease.holderId,
        isLeader: this.lease.isLeader,
        leader: this.lease.leaderId,
        token: this.lease.token,
        highestToken: this.lease.highestToken,
        acquisitions: this.lease.acquisitionCount,
      },
      controller: this.lease.isLeader && e
        ? { tier: e.tier.level, suspect: e.suspect, azs: e.azs, lastAggregationMs: this.controller.lastAggregationTimeMs, silenceExplained: e.silenceExplained }
        : null,
      actuator: this.actuator?.kind ?? null,
    };
  }
}
