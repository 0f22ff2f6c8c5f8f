import type { Logger } from "../../util/log";
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
