/**
 * The fleet layer's Prometheus series, on the registry the agent owns. Every series with a
 * known label set starts at zero, so a dashboard sees "0" rather than "no data".
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ModelSameness } from "../../node/evaluator/model-sameness";
import type { LostReason } from "../redis/lease";
import { AZ_STATES, TIER_LEVELS, type AzState, type TierLevel } from "./state";
import { REPAIR_ACTIONS } from "../repair/ladder";

const LOST_REASONS: readonly LostReason[] = ["self-fence", "not-ours", "fenced-out", "released"];

export class FleetMetrics {
  readonly redisConnected: Gauge;
  readonly redisErrors: Counter;
  readonly heartbeats: Counter<"result">;
  readonly leader: Gauge;
  readonly fencingToken: Gauge;
  readonly leaseAcquisitions: Counter;
  readonly leaseLosses: Counter<"reason">;
  readonly staleWritesRejected: Counter;
  /** Values read from Redis that were not sane (`what`: `fence` healed, `node` record skipped). */
  readonly distrusted: Counter<"what">;
  /** Enrolments the leader judged (node identities): `ok` or `refused` (a token that failed). */
  readonly enrolments: Counter<"result">;
  readonly azState: Gauge<"az" | "state">;
  readonly azHealthy: Gauge<"az">;
  readonly azTotal: Gauge<"az">;
  readonly tierLevel: Gauge;
  readonly blastSuspect: Gauge<"check">;
  readonly blastSuspectChecks: Gauge;
  readonly standbyWake: Gauge;
  readonly standbyHealthy: Gauge;
  readonly zonalShift: Gauge<"az">;
  readonly controllerTick: Histogram;
  readonly modelOutlierNodes: Gauge;
  readonly modelOutlierAz: Gauge<"az">;
  readonly modelMajority: Gauge<"model">;
  /** The repair ladder (advise mode): nodes advised each action now, and nodes held by a bound. */
  readonly repairAdvised: Gauge<"action">;
  readonly repairPredictiveHeld: Gauge;
  readonly repairHeld: Gauge;
  private readonly modelAzsShown = new Set<string>();
  private majorityShown: string | null = null;
  private readonly knownAzs = new Set<string>();
  private readonly suspectShown = new Set<string>();

  constructor(registry: Registry, ownAz?: string) {
    const registers = [registry];
    this.redisConnected = new Gauge({ name: "llmha_redis_connected", help: "1 while the last registry heartbeat reached Redis", registers });
    this.redisErrors = new Counter({ name: "llmha_redis_errors_total", help: "Registry heartbeats that failed", registers });
    this.heartbeats = new Counter({ name: "llmha_registry_heartbeats_total", help: "Registry heartbeats by result", labelNames: ["result"], registers });
    this.leader = new Gauge({ name: "llmha_leader", help: "1 while this agent holds the leader lease", registers });
    this.fencingToken = new Gauge({ name: "llmha_fencing_token", help: "Fencing token of the current term (0 when not leader)", registers });
    this.leaseAcquisitions = new Counter({ name: "llmha_lease_acquisitions_total", help: "Leader lease acquisitions by this agent", registers });
    this.leaseLosses = new Counter({ name: "llmha_lease_losses_total", help: "Leader terms ended, by reason", labelNames: ["reason"], registers });
    this.staleWritesRejected = new Counter({
      name: "llmha_stale_writes_rejected_total",
      help: "Leader writes Redis refused because a newer fencing token exists",
      registers,
    });
    this.distrusted = new Counter({
      name: "llmha_redis_distrusted_total",
      help: "Values read from Redis that were not sane (forged or corrupted): fence tokens left out and healed (what=fence), node records skipped (what=node), records or member entries for nodes the inventory does not list or claiming another AZ than its (what=forged)",
      labelNames: ["what"],
      registers,
    });
    for (const what of ["fence", "node", "forged"]) this.distrusted.inc({ what }, 0);
    this.enrolments = new Counter({ name: "llmha_enrolments_total", help: "Node enrolments the leader judged: ok (capability handed out) or refused (token, node claim or inventory check failed; logged with the reason, never the token)", labelNames: ["result"], registers });
    for (const result of ["ok", "refused"]) this.enrolments.inc({ result }, 0);
    this.azState = new Gauge({ name: "llmha_az_state", help: "1 for the AZ's current state (leader view)", labelNames: ["az", "state"], registers });
    this.azHealthy = new Gauge({ name: "llmha_az_healthy_capacity", help: "Healthy GPUs in the AZ (leader view)", labelNames: ["az"], registers });
    this.azTotal = new Gauge({ name: "llmha_az_total_capacity", help: "GPUs the AZ should have (leader view)", labelNames: ["az"], registers });
    this.tierLevel = new Gauge({ name: "llmha_tier_level", help: "Failure tier 0–4 (L0–L4) published by the leader", registers });
    this.blastSuspect = new Gauge({
      name: "llmha_blast_radius_suspect",
      help: "1 while a soft check is suspect: more than half the nodes fail it at once (alert)",
      labelNames: ["check"],
      registers,
    });
    this.blastSuspectChecks = new Gauge({ name: "llmha_blast_radius_suspect_checks", help: "How many soft checks are suspect", registers });
    this.standbyWake = new Gauge({ name: "llmha_standby_wake", help: "1 while the leader wants the standby AZ awake", registers });
    this.standbyHealthy = new Gauge({
      name: "llmha_standby_healthy_capacity",
      help: "Healthy GPUs in the standby AZ (leader view; 0 while it is scaled to zero)",
      registers,
    });
    this.zonalShift = new Gauge({ name: "llmha_zonal_shift_active", help: "1 while the leader holds a zonal shift away from the AZ", labelNames: ["az"], registers });
    this.controllerTick = new Histogram({
      name: "llmha_controller_aggregation_seconds",
      help: "Time to read the registry and evaluate AZ states",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.modelOutlierNodes = new Gauge({
      name: "llmha_model_outlier_nodes",
      help: "Serving nodes whose model (id, revision, dtype or context) differs from the fleet's majority (leader view)",
      registers,
    });
    this.modelOutlierAz = new Gauge({
      name: "llmha_model_outlier_az",
      help: "1 while no serving node of the AZ serves the fleet's majority model (leader view)",
      labelNames: ["az"],
      registers,
    });
    this.modelMajority = new Gauge({
      name: "llmha_model_majority_info",
      help: "1 for the model most serving nodes serve (id@revision dtype ctx; leader view)",
      labelNames: ["model"],
      registers,
    });
    this.repairAdvised = new Gauge({ name: "llmha_repair_advised", help: "GPU nodes the repair ladder advises this action for now (leader view; advise mode: nothing is done)", labelNames: ["action"], registers });
    for (const action of REPAIR_ACTIONS) this.repairAdvised.set({ action }, 0);
    this.repairHeld = new Gauge({ name: "llmha_repair_held", help: "Broken GPU nodes whose repair a bound holds (one per AZ, fleet share, AZ floor, no replacement in sight; leader view)", registers });
    this.repairPredictiveHeld = new Gauge({ name: "llmha_repair_predictive_held", help: "Serving GPU nodes whose predictive drain waits (the 24 h budget, a low-load moment, a capacity bound): information, the node serves on (leader view; not in llmha_repair_held)", registers });
    for (const g of [this.repairHeld, this.repairPredictiveHeld, this.redisConnected, this.leader, this.fencingToken, this.tierLevel, this.blastSuspectChecks, this.standbyWake, this.standbyHealthy, this.modelOutlierNodes]) g.set(0);
    for (const c of [this.redisErrors, this.leaseAcquisitions, this.staleWritesRejected]) c.inc(0);
    for (const r of ["ok", "error"]) this.heartbeats.inc({ result: r }, 0);
    for (const r of LOST_REASONS) this.leaseLosses.inc({ reason: r }, 0);
    if (ownAz) this.ensureAz(ownAz);
  }

  ensureAz(az: string): void {
    if (this.knownAzs.has(az)) return;
    this.knownAzs.add(az);
    for (const st of AZ_STATES) this.azState.set({ az, state: st }, 0);
    this.azHealthy.set({ az }, 0);
    this.azTotal.set({ az }, 0);
    this.zonalShift.set({ az }, 0);
    // The model comparison may have spoken for this AZ already (it runs before the AZ series are set).
    if (!this.modelAzsShown.has(az)) this.modelOutlierAz.set({ az }, 0);
  }

  setAz(az: string, state: AzState, healthy: number, total: number): void {
    this.ensureAz(az);
    for (const st of AZ_STATES) this.azState.set({ az, state: st }, st === state ? 1 : 0);
    this.azHealthy.set({ az }, healthy);
    this.azTotal.set({ az }, total);
  }

  setTier(level: TierLevel): void {
    this.tierLevel.set(TIER_LEVELS.indexOf(level));
  }

  setSuspect(codes: readonly string[]): void {
    const now = new Set(codes);
    for (const c of now) this.suspectShown.add(c);
    for (const c of this.suspectShown) this.blastSuspect.set({ check: c }, now.has(c) ? 1 : 0);
    this.blastSuspectChecks.set(now.size);
  }

  /** Same model everywhere: outlier nodes, outlier AZs among `azs`, the majority as an info series. */
  setModels(same: ModelSameness, azs: readonly string[]): void {
    this.modelOutlierNodes.set(same.outliers.length);
    const odd = new Set(same.outlierAzs);
    for (const az of [...azs, ...same.outlierAzs]) this.modelAzsShown.add(az);
    for (const az of this.modelAzsShown) this.modelOutlierAz.set({ az }, odd.has(az) ? 1 : 0);
    if (same.majority !== this.majorityShown) {
      // One series at a time: the old majority's goes away rather than staying at 1.
      this.modelMajority.reset();
      if (same.majority !== null) this.modelMajority.set({ model: same.majority }, 1);
      this.majorityShown = same.majority;
    }
  }

  /** The repair plan's counts: advised per action, held, held predictive drains (`held:predictive`, apart: the node serves on). */
  setRepair(actions: readonly string[]): void {
    for (const action of REPAIR_ACTIONS) this.repairAdvised.set({ action }, actions.filter((a) => a === action).length);
    this.repairHeld.set(actions.filter((a) => a === "held").length);
    this.repairPredictiveHeld.set(actions.filter((a) => a === "held:predictive").length);
  }
}
