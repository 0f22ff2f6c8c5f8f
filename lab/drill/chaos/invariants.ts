/**
 * The chaos campaign's invariants, checked at every observer sample over what the drill already
 * keeps (its timeline: agent and proxy samples, the fleet's keys in Redis, failed requests, the
 * stack's deaths) and the faults as they fired. Pure: no I/O here, so tests feed it timelines
 * built by hand. The two end-of-run invariants (settled, nothing left running) are judged by the
 * runner with the names below.
 */
import { cutHadToBe, type Death } from "../cuts";
import { StaleWriteWatch } from "../scenarios/fleet";
import { SDK_CLIENT } from "../sdk-traffic";
import { isStreamCut, l1Removed, type FailedRequest, type Sample, type Timeline } from "../timeline";

/** Names of the invariants, as printed and in the JSON. */
export const INVARIANT = {
  stale: "0 stale writes",
  term: "one leader per fencing term",
  healthyAz: "no healthy AZ published DOWN",
  answered: "every accepted request answered",
  queued: "every L4 queue write acknowledged",
  settled: "back to L0, every node healthy, after the last heal",
  nothingLeft: "nothing left running",
} as const;

/** A fault as it ran (drill clock, ms). */
export interface FaultWindow {
  n: number;
  kind: string;
  target: string;
  victims: string[];
  /** AZs it touched (a leader fault: its node's AZ). */
  azs: string[];
  injectAt: number;
  /** When its heal began / ended; null while it holds. */
  healAt: number | null;
  healedAt: number | null;
}

export interface Violation {
  invariant: string;
  /** Drill clock, ms. */
  t: number;
  detail: string;
  /** The timeline around `t` (filled in by the runner once the "after" part exists). */
  excerpt?: string;
}

export interface CheckerOptions {
  /** Active AZs: name, DNS address, the backend name of its proxy's server rows. */
  azs: readonly { name: string; address: string; proxy: string }[];
  /** Every AZ proxy's backend (active and standby): a request has a server while one row is in rotation. */
  proxies: readonly string[];
  /** An AZ a fault touched counts as touched this long after its heal ended (states, DNS and rotation catch up). */
  graceMs: number;
  /** A failed request is judged once this long has passed since it ended (a death is recorded when its process is reaped). */
  judgeAfterMs: number;
  /** Deaths so far on the drill clock (servers, AZ proxies). */
  deaths(): Death[];
  /** Campaign start: nothing before it is judged. */
  from: number;
}

/** Whether a fault touched `az` at `t` (from its injection to `graceMs` after its heal ended). */
export function touched(windows: readonly FaultWindow[], az: string, t: number, graceMs: number): boolean {
  return windows.some((w) => w.azs.includes(az) && t >= w.injectAt && (w.healedAt === null || t <= w.healedAt + graceMs));
}

/** The last sample at or before `t` (binary search: samples are in time order). */
export function sampleAt(samples: readonly Sample[], t: number): Sample | null {
  let lo = 0;
  let hi = samples.length - 1;
  let best: Sample | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (samples[mid].t <= t) {
      best = samples[mid];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return best;
}

/** No AZ proxy had a server row in rotation in this sample: L4's case (the drill's AZ proxies carry no fallback backend). */
function noServer(s: Sample, proxies: readonly string[]): boolean {
  return !Object.entries(s.l1).some(([k, v]) => proxies.some((p) => k.startsWith(`${p}/`)) && !l1Removed(v));
}

/** Whether, at some sample from the one in force at `from` to `until`, no AZ proxy had a server in rotation. */
export function noServerBetween(samples: readonly Sample[], from: number, until: number, proxies: readonly string[]): boolean {
  const first = sampleAt(samples, from);
  if (first && noServer(first, proxies)) return true;
  return samples.some((s) => s.t > from && s.t <= until && noServer(s, proxies));
}

/**
 * Incremental: each `step` reads only the samples, fleet samples and failures added since the
 * last one, so a campaign of an hour costs the same per sample as one of a minute.
 */
export class InvariantChecker {
  private fleetAt = 0;
  private samplesAt = 0;
  private failuresAt = 0;
  private readonly stale = new StaleWriteWatch("same-read");
  private lastTokens: Record<string, number> = {};
  private readonly termHolder = new Map<number, string>();
  private highestTerm = 0;
  private pending: FailedRequest[] = [];
  /** One violation per (invariant, subject) while it lasts: a DOWN held for 5 s is one finding, not 100. */
  private readonly open = new Set<string>();
  /** Counted figures for the summary. */
  readonly counts = { judged: 0, excusedCut: 0, excusedNoServer: 0, rollbacks: 0 };

  constructor(private readonly o: CheckerOptions) {}

  step(tl: Timeline, windows: readonly FaultWindow[], now: number): Violation[] {
    const out: Violation[] = [];
    const once = (key: string, v: Violation | null): void => {
      if (v === null) {
        this.open.delete(key);
        return;
      }
      if (this.open.has(key)) return;
      this.open.add(key);
      out.push(v);
    };
    for (; this.fleetAt < tl.fleet.length; this.fleetAt++) {
      const f = tl.fleet[this.fleetAt];
      for (const k of this.stale.see(f, this.o.from)) out.push({ invariant: INVARIANT.stale, t: f.t, detail: `${k}: a write with a lower fencing token than the lease in the same read` });
      // Published hashes back at older tokens: the endpoint's server lost writes (reported, not a violation).
      if (f.t >= this.o.from && Object.entries(f.tokens).some(([k, tok]) => this.lastTokens[k] !== undefined && tok < this.lastTokens[k])) this.counts.rollbacks++;
      this.lastTokens = { ...this.lastTokens, ...f.tokens };
      if (f.t < this.o.from) continue;
      if (typeof f.leader === "string" && typeof f.leaderToken === "number") {
        const tok = f.leaderToken;
        const had = this.termHolder.get(tok);
        if (had !== undefined && had !== f.leader) out.push({ invariant: INVARIANT.term, t: f.t, detail: `term ${tok} held by ${had}, then by ${f.leader}` });
        // An older term back in the lease (a promoted replica that missed the later one): its holder and the later term's may both act.
        once("term-back", tok < this.highestTerm ? { invariant: INVARIANT.term, t: f.t, detail: `the lease is back at term ${tok} (${f.leader}) after term ${this.highestTerm} was seen: a fencing token went back` } : null);
        if (had === undefined) this.termHolder.set(tok, f.leader);
        this.highestTerm = Math.max(this.highestTerm, tok);
      }
      for (const az of this.o.azs) {
        const down = f.azState[az.name] === "DOWN" && !touched(windows, az.name, f.t, this.o.graceMs);
        once(`state:${az.name}`, down ? { invariant: INVARIANT.healthyAz, t: f.t, detail: `${az.name} published DOWN in Redis with no fault touching it` } : null);
      }
    }
    for (; this.samplesAt < tl.samples.length; this.samplesAt++) {
      const s = tl.samples[this.samplesAt];
      if (s.t < this.o.from || s.dns === null || s.dns.length === 0) continue;
      for (const az of this.o.azs) {
        const dropped = !s.dns.includes(az.address) && !touched(windows, az.name, s.t, this.o.graceMs);
        once(`dns:${az.name}`, dropped ? { invariant: INVARIANT.healthyAz, t: s.t, detail: `${az.name} (${az.address}) dropped from the DNS answer with no fault touching it` } : null);
      }
    }
    for (; this.failuresAt < tl.failures.length; this.failuresAt++) {
      const f = tl.failures[this.failuresAt];
      if (f.client === SDK_CLIENT && f.t >= this.o.from) this.pending.push(f);
    }
    const ready = this.pending.filter((f) => (f.end ?? f.t) + this.o.judgeAfterMs <= now);
    this.pending = this.pending.filter((f) => !ready.includes(f));
    for (const f of ready) {
      this.counts.judged++;
      if (isStreamCut(f.why) && cutHadToBe(f, this.o.deaths())) this.counts.excusedCut++;
      else if (noServerBetween(tl.samples, f.t, f.end ?? f.t, this.o.proxies)) this.counts.excusedNoServer++;
      else
        out.push({
          invariant: INVARIANT.answered,
          t: f.t,
          detail: `${f.client} request sent at ${(f.t / 1000).toFixed(2)}s failed after the SDK's retries at ${((f.end ?? f.t) / 1000).toFixed(2)}s: ${f.why}${f.place ? ` (server ${f.place.server ?? "?"} via ${f.place.via ?? "?"})` : ""}`,
        });
    }
    return out;
  }
}

const sec = (ms: number): string => `${(ms / 1000).toFixed(2)}s`;

/**
 * The timeline from `t - beforeMs` to `t + afterMs`, one line per change: fault marks, the
 * fleet's tier / lease / AZ states, the DNS answer, each agent's status, each AZ proxy's
 * servers in rotation, and failed requests (the first 12).
 */
export function excerpt(tl: Timeline, t: number, o: { beforeMs: number; afterMs: number; proxies: readonly string[] }): string {
  const from = t - o.beforeMs;
  const to = t + o.afterMs;
  const lines: { t: number; s: string }[] = [];
  for (const m of tl.marks) if (m.t >= from && m.t <= to) lines.push({ t: m.t, s: `${m.kind.padEnd(6)} ${m.label}` });
  let last = "";
  for (const f of tl.fleet) {
    if (f.t > to) break;
    const v = `tier ${f.tier ?? "?"}; lease ${f.leader === undefined ? "(redis unanswered)" : `${f.leader ?? "free"}@${f.leaderToken ?? "?"}`}; AZs ${Object.entries(f.azState).map(([a, st]) => `${a}=${st}`).join(" ") || "none"}`;
    if (f.t >= from && v !== last) lines.push({ t: f.t, s: `fleet  ${v}` });
    last = v;
  }
  let dns = "";
  const status: Record<string, string> = {};
  const rotation: Record<string, string> = {};
  for (const s of tl.samples) {
    if (s.t > to) break;
    const d = s.dns === null ? dns : s.dns.join(",");
    if (s.t >= from && d !== dns) lines.push({ t: s.t, s: `dns    ${d || "(empty)"}` });
    dns = d;
    for (const [id, n] of Object.entries(s.nodes)) {
      const v = `${n.status}/${n.weight}`;
      if (s.t >= from && status[id] !== undefined && status[id] !== v) lines.push({ t: s.t, s: `agent  ${id} ${status[id]} → ${v}` });
      status[id] = v;
    }
    for (const p of o.proxies) {
      const rows = Object.entries(s.l1).filter(([k]) => k.startsWith(`${p}/`));
      const v = rows.length ? `${rows.filter(([, r]) => !l1Removed(r)).map(([k]) => k.slice(p.length + 1)).join(",") || "none"} in rotation` : "no answer";
      if (s.t >= from && rotation[p] !== undefined && rotation[p] !== v) lines.push({ t: s.t, s: `proxy  ${p}: ${v}` });
      rotation[p] = v;
    }
  }
  const failed = tl.failures.filter((f) => f.t >= from && f.t <= to).sort((a, b) => a.t - b.t);
  for (const f of failed.slice(0, 12)) lines.push({ t: f.t, s: `failed ${f.client} ${f.why}${f.end !== undefined ? ` (ended ${sec(f.end)})` : ""}` });
  if (failed.length > 12) lines.push({ t: failed[12].t, s: `failed … ${failed.length - 12} more` });
  lines.sort((a, b) => a.t - b.t);
  return lines.map((l) => `    ${sec(l.t).padStart(9)} ${l.t === t ? ">" : " "} ${l.s}`).join("\n");
}
