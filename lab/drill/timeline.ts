/**
 * What the observer saw, sample by sample, and the pure questions the scenarios ask of it
 * ("when did this server leave L1 after t?"). No I/O here: the tests build timelines by hand.
 */

import { measured, quantile } from "../../agent/src/util/stats";

/** One node as its agent answered `/readyz` (`ERR` when the agent did not answer). */
export interface NodeSample {
  status: string;
  weight: number;
}

/** One server row of one HAProxy proxy. */
export interface L1Sample {
  status: string;
  weight: number;
  /** Requests sent to it so far. */
  total: number;
}

export interface Sample {
  /** ms since the drill started. */
  t: number;
  nodes: Record<string, NodeSample>;
  /** Key `<proxy>/<server>`; a proxy whose HAProxy is dead has no rows. */
  l1: Record<string, L1Sample>;
  /** A records of the service name, sorted; null when the query failed. */
  dns: string[] | null;
}

/** The fleet's view in Redis, read less often. */
export interface FleetSample {
  t: number;
  /** AZ → published state (`OK`, `DEGRADED`, `DOWN`); absent when none is published. */
  azState: Record<string, string>;
  /** Tier level (`L0`…`L4`) or null. */
  tier: string | null;
  /** Holder id of the leader lease, null when free; undefined when Redis did not answer. */
  leader?: string | null;
  /** Fencing token in the lease value. */
  leaderToken?: number | null;
  /** Fencing tokens on the leader's published hashes (AZ states, tier), key → token. */
  tokens: Record<string, number>;
  /** Standby AZ wanted awake. */
  standbyWake: boolean;
  /** Suspect soft-check codes (blast-radius cap). */
  suspect: string;
  /** `run_id` of the Redis server that answered the read (the endpoint's primary then); absent when unknown. */
  server?: string;
}

/** A client request that failed, with when and why. */
export interface FailedRequest {
  /** When the request started. */
  t: number;
  /** When it failed (absent: at its start, as a refused connection does). */
  end?: number;
  client: string;
  why: string;
  /** A cut stream's server (`address:port`, from the fake's header) and the address the client sent it to. */
  place?: { server: string | null; via: string | null };
}

/** A stream the continuation relay carried on (its SSE comment seen by the client), and whether its text is an undisturbed run's. */
export interface ContinuedStream {
  t: number;
  end: number;
  client: string;
  /** What the relay did (`continue after 12 tokens`). */
  how: string;
  /** The text received equals the undisturbed greedy answer; null when the request was not greedy. */
  exact: boolean | null;
}

export interface Timeline {
  samples: Sample[];
  fleet: FleetSample[];
  failures: FailedRequest[];
  continued: ContinuedStream[];
  /** Requests sent per client. */
  sent: Record<string, number>;
  marks: { t: number; label: string; kind: "inject" | "heal" }[];
  /**
   * The standby AZ proxy's address. DNS serves it, by weight, only while the leader has it awake
   * (asleep, its /az/health fails): its entries and exits follow the leader's wake and release,
   * which scenarios judge on their own, so `dnsChanges` leaves it out.
   */
  standbyAddress?: string;
}

export function emptyTimeline(): Timeline {
  return { samples: [], fleet: [], failures: [], continued: [], sent: {}, marks: [] };
}

/** A server out of rotation: DOWN, DRAIN, MAINT, or weight 0. */
export function l1Removed(s: L1Sample | undefined): boolean {
  if (!s) return false;
  return /^(DOWN|DRAIN|MAINT|NOLB)/.test(s.status) || s.weight === 0;
}

/**
 * One node's row as an AZ proxy sends to it, from its row in the backend straight to the servers
 * and, with the continuation relay, its row in the backend through the relay (`_relayed`,
 * completions): requests summed; out of rotation when either backend has it out (the two check
 * the same server, and the one carrying the traffic takes it out first), at the lower weight.
 */
export function mergeRows(a: L1Sample, b: L1Sample): L1Sample {
  const out = l1Removed(a) ? a : b;
  return { status: out.status, weight: Math.min(a.weight, b.weight), total: a.total + b.total };
}

/** The key a stats row is sampled under: a relayed backend's rows fold into its straight backend's (`<proxy>_servers/<node>`). */
export function sampleKey(proxy: string, server: string): string {
  return `${proxy.replace(/_relayed$/, "_servers")}/${server}`;
}

/** A server that HAProxy considers failing or whose weight dropped (a DEGRADED node). */
export function l1Reduced(s: L1Sample | undefined, full = 100): boolean {
  return l1Removed(s) || (s !== undefined && s.weight < full);
}

export function l1Full(s: L1Sample | undefined, full = 100): boolean {
  return s !== undefined && s.status === "UP" && s.weight >= full;
}

/** First sample at or after `from` (and before `until`) where `pred` holds; its time minus `from`. */
export function firstAfter<T extends { t: number }>(list: readonly T[], from: number, pred: (s: T) => boolean, until = Infinity): number | null {
  for (const s of list) {
    if (s.t < from || s.t > until) continue;
    if (pred(s)) return s.t - from;
  }
  return null;
}

/** Whether `pred` holds at some sample in [from, until]. */
export function anyBetween<T extends { t: number }>(list: readonly T[], from: number, until: number, pred: (s: T) => boolean): boolean {
  return firstAfter(list, from, pred, until) !== null;
}

/** Failed requests of `client` in flight at some time in [from, until]: started by `until`, failed from `from` on (a stream started before a fault and cut by it counts). */
export function failuresBetween(tl: Timeline, client: string, from: number, until: number): number {
  return tl.failures.filter((f) => f.client === client && f.t <= until && (f.end ?? f.t) >= from).length;
}

/** The start of every failure reason of a stream cut after its response began (`stream cut`, `stream cut (ECONNRESET)`). */
export const STREAM_CUT = "stream cut";

/** Whether a failure reason is a started stream that was cut: no client may replay it. */
export function isStreamCut(why: string): boolean {
  return why.startsWith(STREAM_CUT);
}

/**
 * Servers (`proxy/server` keys among `keys`) that left rotation in [from, until] although
 * they were in rotation at `from`: a failover nobody asked for when the server is healthy.
 */
export function removedBetween(tl: Timeline, keys: readonly string[], from: number, until: number): string[] {
  const out: string[] = [];
  for (const k of keys) {
    if (anyBetween(tl.samples, from, until, (s) => l1Removed(s.l1[k]))) out.push(k);
  }
  return out;
}

/** Times the DNS answer changed in [from, until] (a failed query is no change; the standby AZ's comings and goings are not counted). */
export function dnsChanges(tl: Timeline, from: number, until: number): number {
  let last: string | null = null;
  let n = 0;
  for (const s of tl.samples) {
    if (s.t > until || s.dns === null) continue;
    const v = s.dns.filter((a) => a !== tl.standbyAddress).join(",");
    if (s.t >= from && last !== null && v !== last) n++;
    last = v;
  }
  return n;
}

/** p50 and max of the measured values (nulls left out); null when none was measured. */
export function p50max(values: readonly (number | null)[]): { p50: number; max: number; n: number } | null {
  const v = measured(values);
  const p50 = quantile(v, 0.5);
  return p50 === null ? null : { p50, max: v[v.length - 1], n: v.length };
}
