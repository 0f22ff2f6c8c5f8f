import type { Logger } from "../../util/log";
import type { RegistrySnapshot } from "../redis/registry";
import type { FleetMetrics } from "./metrics";
import { TIER_LEVELS, type Evaluation } from "./state";

/** What changed since the last published evaluation, logged once per change (AZ states, tier, suspects, standby, shift). */
export function logTransitions(log: Logger, prev: Evaluation | null, e: Evaluation, zonalShift: boolean): void {
  for (const a of e.azs) {
    const before = prev?.azs.find((x) => x.az === a.az)?.state;
    if (before !== a.state) log.warn({ az: a.az, from: before ?? null, to: a.state, healthy: a.healthyCapacity, total: a.totalCapacity }, "AZ state");
  }
  if (prev?.tier.level !== e.tier.level) {
    const worse = TIER_LEVELS.indexOf(e.tier.level) > TIER_LEVELS.indexOf(prev?.tier.level ?? "L0");
    log[worse ? "warn" : "info"]({ from: prev?.tier.level ?? null, to: e.tier.level, reason: e.tier.reason }, "tier");
  }
  if ((prev?.suspect.join(",") ?? "") !== e.suspect.join(",")) {
    log.warn({ suspect: e.suspect, counts: e.suspectCounts }, "blast-radius cap: suspect checks changed");
  }
  if (prev?.standby.wake !== e.standby.wake && e.standby.az) {
    log.warn({ az: e.standby.az, wake: e.standby.wake, reason: e.standby.reason }, "standby desired state");
  }
  if ((prev?.shift.az ?? null) !== e.shift.az && zonalShift) {
    log.warn({ az: e.shift.az, from: prev?.shift.az ?? null, reason: e.shift.reason }, "zonal shift desired state");
  }
}

/** Node records that cannot be an agent's (forged or corrupted) were left out: counted every period, logged when the set changes. */
export class SkippedRecords {
  private last = "";

  report(snap: RegistrySnapshot, metrics: FleetMetrics | undefined, log: Logger): void {
    const skipped = snap.skipped ?? [];
    const forged = skipped.filter((s) => s.what === "forged").length;
    if (forged) metrics?.distrusted.inc({ what: "forged" }, forged);
    if (skipped.length - forged) metrics?.distrusted.inc({ what: "node" }, skipped.length - forged);
    const key = skipped.map((s) => `${s.nodeId}:${s.reason}`).join(",");
    if (key === this.last) return;
    this.last = key;
    if (skipped.length) log.warn({ skipped: skipped.slice(0, 20), count: skipped.length }, forged ? "node records in Redis for nodes the inventory does not list, or for another AZ than the inventory's, were left out of the AZ states: a node credential is being used against other nodes" : "node records in Redis that no agent could have written were left out of the AZ states");
  }
}
