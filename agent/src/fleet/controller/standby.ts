/**
 * The standby AZ's desired state (pure, part of the controller's evaluation in state.ts):
 * awake while an active AZ is degraded or down, held `standbyHoldMs` after recovery; what a
 * standby smaller than an active AZ leaves uncovered; and what the leader publishes of it
 * (the `standby` hash: `llm-ha status`, alerts).
 */
import type { AzState, ControllerSettings } from "../../../../contracts/controller";
import type { AzView, Evaluation } from "./state";

export interface StandbyMemory {
  wake: boolean;
  lastTriggerAt: number | null;
}

export interface StandbyDecision {
  az: string | null;
  wake: boolean;
  reason: string;
  /** Set while it is wanted awake and cannot be woken (every step of the fallback order failed): why. */
  unavailable?: string;
  /** Set while it is wanted awake and a new wake waits: `backoff until …, because …` (the last wake had no healthy node). */
  backoff?: string;
  /** Set while it is wanted awake and, sized below an active AZ (`standbyCapacityRatio`), cannot cover the lost GPUs. */
  shortfall?: { lost: number; covers: number };
}

/**
 * What a standby sized at `ratio` of an active AZ leaves uncovered: the GPUs the active AZs
 * lost (total − healthy of each AZ not OK) against the standby's size (`ratio` × the largest
 * active AZ's total). Null when it covers them.
 */
export function standbyShortfall(azs: readonly AzView[], standbyAz: string, ratio: number): { lost: number; covers: number } | null {
  const active = azs.filter((a) => a.az !== standbyAz);
  const lost = active.filter((a) => a.state !== "OK").reduce((n, a) => n + Math.max(0, a.totalCapacity - a.healthyCapacity), 0);
  const covers = Math.floor(ratio * Math.max(0, ...active.map((a) => a.totalCapacity)));
  return lost > covers ? { lost, covers } : null;
}

/**
 * Desired state of the standby AZ: awake when an active AZ is degraded or down (L2+), held
 * for `standbyHoldMs`. AZs in `starting` (never OK yet, within the cold-start grace) are not
 * a capacity loss.
 */
export function standbyDecision(
  prev: StandbyMemory,
  azs: ReadonlyMap<string, AzState>,
  s: Pick<ControllerSettings, "standbyAz" | "standbyHoldMs">,
  now: number,
  starting: ReadonlySet<string> = new Set(),
): { memory: StandbyMemory; decision: StandbyDecision } {
  if (!s.standbyAz) return { memory: prev, decision: { az: null, wake: false, reason: "no standby AZ" } };
  const hurt = [...azs.entries()].filter(([az, st]) => az !== s.standbyAz && st !== "OK" && !starting.has(az)).map(([az, st]) => `${az}=${st}`);
  if (hurt.length) {
    return { memory: { wake: true, lastTriggerAt: now }, decision: { az: s.standbyAz, wake: true, reason: `capacity lost: ${hurt.join(",")}` } };
  }
  if (prev.wake && prev.lastTriggerAt !== null && now - prev.lastTriggerAt < s.standbyHoldMs) {
    return { memory: prev, decision: { az: s.standbyAz, wake: true, reason: "holding after recovery" } };
  }
  const cold = [...starting].filter((az) => az !== s.standbyAz && azs.get(az) !== "OK").sort();
  const reason = cold.length ? `starting, not failing: ${cold.join(",")} never OK yet` : "active AZs OK";
  return { memory: { wake: false, lastTriggerAt: prev.lastTriggerAt }, decision: { az: s.standbyAz, wake: false, reason } };
}

/** The `standby` hash the leader publishes each period (fenced): the decision, why, and what holds it back. */
export function standbyFields(e: Evaluation, lastTriggerAt: number | null, now: number): Record<string, string | number> {
  const sb = e.standby;
  return {
    az: sb.az ?? "", wake: sb.wake ? 1 : 0, reason: sb.reason, lastTriggerAt: lastTriggerAt ?? 0,
    capacity: sb.unavailable ? "unavailable" : sb.backoff ? "backoff" : "ok",
    capacityReason: sb.unavailable ?? sb.backoff ?? "", updatedAt: now,
  };
}
