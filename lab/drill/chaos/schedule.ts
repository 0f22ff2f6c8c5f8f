/**
 * The chaos campaign's schedule: from a seed and the fleet's shape, a list of
 * overlapping faults drawn from the drill's catalogue — when each starts, on what, for how long.
 * Pure and deterministic: the same seed and shape give the same schedule (mulberry32, no
 * `Math.random`), so a seed that broke an invariant replays the same faults.
 */

/** mulberry32: a 32-bit state, good enough to draw a schedule; the same seed gives the same numbers. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * What a fault acts on: one node, one AZ (its proxy and/or its nodes), the leader (whichever
 * node holds the lease when it fires), Redis (the primary, the sentinels, the endpoint), links
 * between drill members, or the Kafka broker placed in an AZ (one at a time: the L4 queue's
 * topic has replication factor 3 and `min.insync.replicas` 2, so it promises one broker's loss).
 */
export type FaultScope = "node" | "az" | "leader" | "redis" | "links" | "kafka";

export interface FaultSpec {
  kind: string;
  scope: FaultScope;
  /** What it does (the schedule's and the docs' words). */
  what: string;
  /** Its hold is drawn uniformly in [min, max] ms. */
  durationMs: readonly [number, number];
  /** Relative chance of being drawn. */
  weight: number;
  /** Cuts links with iptables: only in the drill's own network namespace. */
  needsNetns?: boolean;
}

/** A broker fault's target: this prefix and the AZ the broker is placed in. */
export const KAFKA_TARGET = "kafka:";

/** The campaign's catalogue: the drill's scenario primitives, each with an inject and a heal (`faults.ts`). */
export const CHAOS_CATALOGUE: readonly FaultSpec[] = [
  { kind: "crash", scope: "node", what: "inference server killed (SIGKILL); heal: started again", durationMs: [2000, 12_000], weight: 3 },
  { kind: "gpu-lost", scope: "node", what: "GPU fallen off the bus (nvidia-smi); heal: GPU back", durationMs: [3000, 15_000], weight: 3 },
  { kind: "wedged", scope: "node", what: "engine wedged (completions hang, /health 200); heal: ready", durationMs: [3000, 12_000], weight: 2 },
  { kind: "slow", scope: "node", what: "engine slow (900 ms a completion); heal: ready", durationMs: [3000, 15_000], weight: 2 },
  { kind: "agent-kill", scope: "node", what: "health agent killed (SIGKILL); heal: started again", durationMs: [2000, 10_000], weight: 2 },
  { kind: "az-proxy-kill", scope: "az", what: "the AZ's HAProxy killed (SIGKILL); heal: started again", durationMs: [3000, 12_000], weight: 2 },
  { kind: "az-loss", scope: "az", what: "the AZ's proxy, servers and agents killed together; heal: all started again", durationMs: [4000, 15_000], weight: 2 },
  { kind: "leader-kill", scope: "leader", what: "the leader's agent killed (SIGKILL); heal: started again", durationMs: [2000, 10_000], weight: 2 },
  { kind: "redis-failover", scope: "redis", what: "Sentinel failover to the replica (caught up); heal: sentinels settled", durationMs: [3000, 10_000], weight: 1 },
  { kind: "redis-primary-kill", scope: "redis", what: "Redis primary killed (SIGKILL), the sentinels promote the replica; heal: it comes back as a replica", durationMs: [3000, 10_000], weight: 1 },
  { kind: "redis-write-pause", scope: "redis", what: "Redis holds every write (CLIENT PAUSE … WRITE) for the hold; heal: the pause ends", durationMs: [500, 2500], weight: 1 },
  { kind: "redis-latency", scope: "links", what: "Redis 300 ms away from every node (their Redis paths); heal: no delay", durationMs: [5000, 20_000], weight: 1, needsNetns: true },
  { kind: "node-redis-cut", scope: "node", what: "one node cut from Redis (iptables); heal: rule removed", durationMs: [3000, 12_000], weight: 1, needsNetns: true },
  { kind: "leader-isolated", scope: "leader", what: "the leader's node cut from Redis (iptables); heal: rule removed", durationMs: [4000, 10_000], weight: 1, needsNetns: true },
  { kind: "az-partition", scope: "az", what: "the AZ cut from Redis and from the other AZs, its proxy serving its own nodes; heal: rules removed", durationMs: [4000, 12_000], weight: 2, needsNetns: true },
  { kind: "cross-az-loss", scope: "links", what: "20 % of new connections between AZs refused; heal: rules removed", durationMs: [5000, 15_000], weight: 1, needsNetns: true },
  { kind: "kafka-broker-loss", scope: "kafka", what: "the Kafka broker placed in the AZ down, its partitions left on it (as MSK's controller until the broker's session times out); heal: broker up", durationMs: [5000, 20_000], weight: 1 },
];

/** The fleet the schedule is drawn for: the active (non-standby) AZs and their nodes. */
export interface ChaosFleet {
  azs: readonly string[];
  nodes: readonly { id: string; az: string }[];
}

export interface ChaosOptions {
  seed: number;
  /** Every fault starts and is healed within this many minutes. */
  minutes: number;
  /** Faults active at once, at most. */
  concurrency: number;
  /** Allow concurrent faults to touch every active AZ at once (default: never). */
  allAzs: boolean;
  /** Link faults (iptables, Redis paths) are in the catalogue: the drill has its own network namespace. */
  links: boolean;
}

/** One scheduled fault; times in ms from the campaign's start. */
export interface ChaosEvent {
  /** 1-based, in start order. */
  n: number;
  at: number;
  kind: string;
  /** A node id, an AZ name, `leader`, `redis`, `links` or `kafka:<AZ>`. */
  target: string;
  durationMs: number;
  /** AZs it touches by its target (a leader fault's AZ is known only when it fires). */
  azs: string[];
  /** What it holds while active: no other fault on one of these may overlap it. */
  holds: string[];
}

/** The catalogue the campaign draws from (link faults only where links can be cut). */
export function catalogue(links: boolean): FaultSpec[] {
  return CHAOS_CATALOGUE.filter((f) => links || !f.needsNetns);
}

/**
 * For the every-AZ rule a fault's AZ counts as touched this long after its hold: a healed node
 * is back in rotation only after its agent's rise and its proxy's check (seconds on 2 loaded cores).
 */
export const AZ_RECOVERY_MS = 8000;
/** Gap between one start and the next draw: 1–6 s. */
const GAP_MS: readonly [number, number] = [1000, 6000];
/** Room left between the last heal and the end of the campaign's minutes. */
const TAIL_MS = 2000;

function targetsOf(spec: FaultSpec, fleet: ChaosFleet): { target: string; azs: string[]; holds: string[] }[] {
  switch (spec.scope) {
    case "node":
      return fleet.nodes.map((n) => ({ target: n.id, azs: [n.az], holds: [`node:${n.id}`] }));
    case "az":
      return fleet.azs.map((az) => ({ target: az, azs: [az], holds: [`az:${az}`, ...fleet.nodes.filter((n) => n.az === az).map((n) => `node:${n.id}`)] }));
    case "leader":
      return [{ target: "leader", azs: [], holds: ["leader"] }];
    case "redis":
      return [{ target: "redis", azs: [], holds: ["redis"] }];
    case "links":
      return [{ target: "links", azs: [], holds: [`links:${spec.kind}`] }];
    case "kafka":
      // Serving does not depend on the queue: it touches no AZ's capacity.
      return fleet.azs.map((az) => ({ target: `${KAFKA_TARGET}${az}`, azs: [], holds: ["kafka"] }));
  }
}

/**
 * Draws the schedule: from t = 0, every 1–6 s a fault kind (weighted by the catalogue) and one
 * of its targets that holds nothing an active fault holds (none: no fault this time); no more than `concurrency` at once (when full, the
 * next draw waits for the earliest heal); unless `allAzs`, the AZs of the active faults (and of
 * those healed less than `AZ_RECOVERY_MS` ago) never cover every active AZ. Each hold is drawn in its kind's range and ends by `minutes` (less a tail).
 */
export function makeSchedule(fleet: ChaosFleet, o: ChaosOptions): ChaosEvent[] {
  if (!(o.minutes > 0)) throw new RangeError(`campaign minutes must be above 0, got ${o.minutes}`);
  if (!(Number.isInteger(o.concurrency) && o.concurrency >= 1)) throw new RangeError(`concurrency must be an integer of at least 1, got ${o.concurrency}`);
  const rnd = mulberry32(o.seed);
  const between = ([lo, hi]: readonly [number, number]): number => Math.round(lo + rnd() * (hi - lo));
  const specs = catalogue(o.links);
  const endMs = o.minutes * 60_000 - TAIL_MS;
  const out: ChaosEvent[] = [];
  let t = between(GAP_MS);
  while (t < endMs) {
    const active = out.filter((e) => e.at <= t && e.at + e.durationMs > t);
    if (active.length >= o.concurrency) {
      t = Math.min(...active.map((e) => e.at + e.durationMs));
      continue;
    }
    const held = new Set(active.flatMap((e) => e.holds));
    const touched = new Set(out.filter((e) => e.at <= t && e.at + e.durationMs + AZ_RECOVERY_MS > t).flatMap((e) => e.azs));
    // The kind is drawn from the whole catalogue, then one of its targets that fits now; a kind
    // with none that fits draws nothing this time, so faults that need a quiet AZ are not starved
    // by the node faults that always fit somewhere.
    let pick = rnd() * specs.reduce((a, k) => a + k.weight, 0);
    const spec = specs.find((k) => (pick -= k.weight) < 0) ?? specs[specs.length - 1];
    const fits = targetsOf(spec, fleet)
      .filter((c) => c.holds.every((h) => !held.has(h)))
      .filter((c) => o.allAzs || !fleet.azs.every((az) => touched.has(az) || c.azs.includes(az)));
    if (fits.length && endMs - t >= spec.durationMs[0]) {
      const c = fits[Math.floor(rnd() * fits.length)];
      const durationMs = Math.min(between(spec.durationMs), endMs - t);
      out.push({ n: out.length + 1, at: t, kind: spec.kind, target: c.target, durationMs, azs: c.azs, holds: c.holds });
    }
    t += between(GAP_MS);
  }
  return out;
}

const sec = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** The schedule as printed before the first fault: one line per fault. */
export function formatSchedule(events: readonly ChaosEvent[]): string {
  const rows = events.map((e) => `  #${String(e.n).padEnd(3)} at ${sec(e.at).padStart(7)}  ${e.kind.padEnd(19)} ${e.target.padEnd(8)} for ${sec(e.durationMs)}`);
  return rows.join("\n");
}
