/**
 * What one standby wake leaves for the next (pure, beside the reconciler that keeps it):
 *
 * - the groups judged failed in this incident (wake-follow.ts: `unhealthy` — in service, no
 *   healthy standby node within the bound), passed back with every wake call so a failed step
 *   is never woken or counted serving again until the release;
 * - whether the wake reached a healthy standby node;
 * - the back-off: a wake released with no healthy standby node ever seen after a step of it
 *   failed (its nodes booted onto bad GPUs: `unhealthy`; or every step failed) makes the next
 *   wake wait, 5 min after the first such
 *   release, doubling up to 1 h; a wake that reached HEALTHY resets it. Without it a trigger
 *   that comes and goes (an active AZ flapping between DOWN and OK past the hold) woke the
 *   same bad group again and again: wake, unhealthy nodes, release, wake. A wake released
 *   before any step was judged (a blip shorter than the bounds) proves nothing and sets none.
 *
 * Kept in the `actuation` hash (`standby.*` fields below) so a new leader goes on with it.
 */
import type { WakeFailure } from "./types";

export interface WakeBackoffSettings {
  /** First back-off after a wake that ended with no healthy standby node. Default 300000 ms. */
  backoffBaseMs: number;
  /** Longest back-off. Default 3600000 ms. */
  backoffMaxMs: number;
}

export interface WakeIncident {
  /** Group → its failure, for the groups judged `unhealthy` in this incident. */
  failed: Record<string, WakeFailure>;
  /** A healthy standby node was seen since the wake. */
  healthy: boolean;
  /** Epoch ms before which no new wake is asked (0: none). */
  backoffUntil: number;
  /** The back-off last applied (ms, 0: none): the next one doubles it. */
  backoffMs: number;
  /** Why the back-off holds. */
  backoffReason: string;
}

export function emptyWakeIncident(): WakeIncident {
  return { failed: {}, healthy: false, backoffUntil: 0, backoffMs: 0, backoffReason: "" };
}

/** The incident with the groups a wake call judged `unhealthy` added (each group of a failed step). */
export function withUnhealthy(w: WakeIncident, failures: readonly WakeFailure[]): WakeIncident {
  if (failures.length === 0) return w;
  const failed = { ...w.failed };
  for (const f of failures) for (const g of f.group.split(",")) failed[g] ??= f;
  return { ...w, failed };
}

/**
 * After a release: the wake's groups are forgotten; the back-off is reset when the wake reached
 * a healthy node, kept as it was when no step was judged failed (`unavailable`: the failure
 * that made every step fail), else set (doubled from the last, within the bounds) from the
 * release on.
 */
export function afterRelease(w: WakeIncident, s: WakeBackoffSettings, now: number, unavailable?: WakeFailure): WakeIncident {
  if (w.healthy) return emptyWakeIncident();
  const bad = Object.values(w.failed)[0] ?? unavailable;
  if (!bad) return { ...w, failed: {} };
  const backoffMs = w.backoffMs > 0 ? Math.min(s.backoffMaxMs, w.backoffMs * 2) : s.backoffBaseMs;
  const because = `the last wake ended with no healthy standby node (${bad.class} on ${bad.group}: ${bad.message.slice(0, 120)})`;
  return { failed: {}, healthy: false, backoffUntil: now + backoffMs, backoffMs, backoffReason: because };
}

/** A healthy standby node seen: the back-off is reset (the wake works). */
export function withHealthy(w: WakeIncident): WakeIncident {
  return w.healthy && w.backoffMs === 0 && w.backoffUntil === 0 ? w : { ...w, healthy: true, backoffUntil: 0, backoffMs: 0, backoffReason: "" };
}

/** `backoff until <ISO>, because …` while a new wake must wait, else null. */
export function backoffLine(w: WakeIncident, now: number): string | null {
  if (w.backoffUntil <= now) return null;
  return `backoff until ${new Date(w.backoffUntil).toISOString()}, because ${w.backoffReason || "the last wake ended with no healthy standby node"}`;
}

/** The `actuation` hash fields that keep it. */
export function incidentFields(w: WakeIncident): Record<string, string | number> {
  return {
    "standby.unhealthy": Object.keys(w.failed).length ? JSON.stringify(w.failed).slice(0, 4000) : "",
    "standby.healthy": w.healthy ? 1 : 0,
    "standby.backoffUntil": w.backoffUntil || "",
    "standby.backoffMs": w.backoffMs || "",
    "standby.backoffReason": w.backoffReason.slice(0, 300),
  };
}

/** Read back from the `actuation` hash (a field unreadable is taken as absent). */
export function incidentFrom(h: Record<string, string>): WakeIncident {
  let failed: Record<string, WakeFailure> = {};
  try {
    const v = JSON.parse(h["standby.unhealthy"] || "{}") as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) failed = v as Record<string, WakeFailure>;
  } catch {
    failed = {};
  }
  const num = (k: string): number => {
    const n = Number(h[k] ?? "");
    return Number.isFinite(n) && n > 0 ? n : 0;
  };
  return { failed, healthy: h["standby.healthy"] === "1", backoffUntil: num("standby.backoffUntil"), backoffMs: num("standby.backoffMs"), backoffReason: h["standby.backoffReason"] ?? "" };
}
