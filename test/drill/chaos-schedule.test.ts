/**
 * The chaos campaign's pure parts: the seeded schedule (same seed, same schedule; its bounds)
 * and the invariant checker on timelines built by hand.
 */
import { describe, expect, it } from "vitest";
import { InvariantChecker, INVARIANT, noServerBetween, type FaultWindow, type Violation } from "../../lab/drill/chaos/invariants";
import { CHAOS_CATALOGUE, makeSchedule, mulberry32, type ChaosEvent } from "../../lab/drill/chaos/schedule";
import { lateConflict, queueViolations } from "../../lab/drill/chaos/run";
import { parseDrillArgs } from "../../lab/drill/command";
import { SDK_CLIENT } from "../../lab/drill/sdk-traffic";
import { emptyTimeline, type FleetSample, type Sample } from "../../lab/drill/timeline";

const FLEET = {
  azs: ["az-a", "az-b"],
  nodes: [
    { id: "gpu-a1", az: "az-a" },
    { id: "gpu-b1", az: "az-b" },
    { id: "gpu-a2", az: "az-a" },
    { id: "gpu-b2", az: "az-b" },
  ],
};
const OPTS = { minutes: 10, concurrency: 2, allAzs: false, links: true };

const activeAt = (s: readonly ChaosEvent[], t: number): ChaosEvent[] => s.filter((e) => e.at <= t && e.at + e.durationMs > t);

describe("chaos schedule", () => {
  it("is the same for the same seed and differs for another", () => {
    const a = makeSchedule(FLEET, { seed: 42, ...OPTS });
    expect(makeSchedule(FLEET, { seed: 42, ...OPTS })).toEqual(a);
    expect(makeSchedule(FLEET, { seed: 43, ...OPTS })).not.toEqual(a);
    expect(a.length).toBeGreaterThan(50);
    expect(mulberry32(1)()).toBe(mulberry32(1)());
  });

  it("keeps to its concurrency, never overlaps two faults on one target, never touches every AZ at once, and heals by the end", () => {
    for (const seed of [1, 2, 3, 99, 2024]) {
      const s = makeSchedule(FLEET, { seed, ...OPTS, concurrency: 3 });
      for (const e of s) {
        const now = activeAt(s, e.at);
        expect(now.length, `seed ${seed} #${e.n}`).toBeLessThanOrEqual(3);
        const holds = now.flatMap((x) => x.holds);
        expect(new Set(holds).size, `seed ${seed} #${e.n}: ${holds.join(" ")}`).toBe(holds.length);
        const azs = new Set(now.flatMap((x) => x.azs));
        expect(FLEET.azs.every((az) => azs.has(az)), `seed ${seed} #${e.n}`).toBe(false);
        expect(e.at + e.durationMs).toBeLessThanOrEqual(OPTS.minutes * 60_000);
      }
      // Every kind of the catalogue is drawn over ten minutes.
      expect(new Set(s.map((e) => e.kind)).size, `seed ${seed}`).toBe(CHAOS_CATALOGUE.length);
    }
  });

  it("fails one Kafka broker at a time, and a broker fault touches no AZ's capacity", () => {
    for (const seed of [1, 2, 3]) {
      const s = makeSchedule(FLEET, { seed, ...OPTS });
      const kafka = s.filter((e) => e.kind === "kafka-broker-loss");
      expect(kafka.length, `seed ${seed}`).toBeGreaterThan(0);
      for (const e of kafka) {
        expect(e.target).toMatch(/^kafka:az-[ab]$/);
        expect(e.azs).toEqual([]);
        expect(kafka.filter((o) => o !== e && o.at < e.at + e.durationMs && e.at < o.at + o.durationMs)).toEqual([]);
      }
    }
  });

  it("touches every AZ at once only when asked, and leaves link faults out without a namespace", () => {
    const every = (allAzs: boolean): boolean =>
      [5, 6, 7, 8].some((seed) => {
        const s = makeSchedule(FLEET, { seed, ...OPTS, allAzs, concurrency: 4 });
        return s.some((e) => FLEET.azs.every((az) => activeAt(s, e.at).some((x) => x.azs.includes(az))));
      });
    expect(every(false)).toBe(false);
    expect(every(true)).toBe(true);
    const noLinks = makeSchedule(FLEET, { seed: 5, ...OPTS, links: false });
    const linkKinds = CHAOS_CATALOGUE.filter((f) => f.needsNetns).map((f) => f.kind);
    expect(noLinks.filter((e) => linkKinds.includes(e.kind))).toEqual([]);
  });

  it("skips a fault that a slower heal pushed into another's window when it breaks the bounds", () => {
    const ev = (n: number, azs: string[]): ChaosEvent => ({ n, at: 0, kind: "crash", target: "x", durationMs: 1000, azs, holds: [] });
    const w = (n: number, azs: string[], healedAt: number | null): FaultWindow => ({ n, kind: "crash", target: "x", victims: [], azs, injectAt: 0, healAt: healedAt, healedAt });
    const o = { concurrency: 2, allAzs: false };
    const planned = (n: number): string[] => (n === 1 ? ["az-a"] : []);
    // az-a's fault healed 2 s ago is still recovering: az-b's would touch every AZ.
    expect(lateConflict(ev(3, ["az-b"]), [w(1, ["az-a"], 8000)], 10_000, o, FLEET.azs, planned)).toMatch(/#1 still held or recovering it would touch every AZ/);
    expect(lateConflict(ev(3, ["az-b"]), [w(1, ["az-a"], 8000)], 20_000, o, FLEET.azs, planned)).toBeNull();
    expect(lateConflict(ev(3, ["az-b"]), [w(1, ["az-a"], 8000)], 10_000, { ...o, allAzs: true }, FLEET.azs, planned)).toBeNull();
    expect(lateConflict(ev(3, []), [w(1, ["az-a"], null), w(2, [], null)], 10_000, o, FLEET.azs, planned)).toMatch(/over the concurrency/);
  });

  it("takes its flags only with --chaos", () => {
    expect(parseDrillArgs(["--chaos", "--seed", "7", "--minutes", "1.5", "--chaos-concurrency=3", "--chaos-all-azs"]).chaos).toEqual({ on: true, seed: 7, minutes: 1.5, concurrency: 3, allAzs: true });
    expect(() => parseDrillArgs(["--seed", "7"])).toThrow(/go with --chaos/);
    expect(() => parseDrillArgs(["--chaos", "--quick"])).toThrow(/not the fault matrix/);
    expect(() => parseDrillArgs(["--chaos", "--seed", "x"])).toThrow(/--seed must be an integer/);
  });
});

const fleetSample = (t: number, o: Partial<FleetSample>): FleetSample => ({ t, azState: { "az-a": "OK", "az-b": "OK" }, tier: "L0", tokens: {}, standbyWake: false, suspect: "", ...o });
const sample = (t: number, inRotation: boolean): Sample => ({ t, nodes: {}, l1: { "az-a_servers/gpu-a1": { status: inRotation ? "UP" : "DOWN", weight: 100, total: 0 } }, dns: ["127.0.0.11", "127.0.0.12"] });

describe("chaos invariants", () => {
  const checker = (): InvariantChecker =>
    new InvariantChecker({
      azs: [
        { name: "az-a", address: "127.0.0.11", proxy: "az-a_servers" },
        { name: "az-b", address: "127.0.0.12", proxy: "az-b_servers" },
      ],
      proxies: ["az-a_servers", "az-b_servers"],
      graceMs: 1000,
      judgeAfterMs: 100,
      deaths: () => [],
      from: 0,
    });

  it("finds a stale write, a term held by two leaders, and a token that went back", () => {
    const tl = emptyTimeline();
    tl.fleet.push(fleetSample(100, { leader: "gpu-a1/1", leaderToken: 5, tokens: { tier: 5 } }));
    tl.fleet.push(fleetSample(300, { leader: "gpu-b1/2", leaderToken: 6, tokens: { tier: 6 } }));
    tl.fleet.push(fleetSample(500, { leader: "gpu-b1/2", leaderToken: 6, tokens: { tier: 5 } }));
    tl.fleet.push(fleetSample(700, { leader: "gpu-a2/3", leaderToken: 6, tokens: { tier: 5 } }));
    tl.fleet.push(fleetSample(900, { leader: "gpu-a1/1", leaderToken: 5, tokens: { tier: 5 } }));
    // A rollback (a promoted server that missed writes): older hashes, no lease — no writer, so no stale write.
    tl.fleet.push(fleetSample(950, { leader: null, leaderToken: null, tokens: { tier: 4 } }));
    const c = checker();
    const v = c.step(tl, [], 1000);
    expect(v.map((x) => x.invariant)).toEqual([INVARIANT.stale, INVARIANT.term, INVARIANT.term]);
    expect(c.counts.rollbacks).toBe(2);
    expect(v[1].detail).toMatch(/term 6 held by gpu-b1\/2, then by gpu-a2\/3/);
  });

  it("does not take a failover's older hashes beside the new term's lease for a stale write (chaos seed 4)", () => {
    // Seed 4 at 143 s: the replica promoted without the last term's writes; the next leader took
    // the lease on it before rewriting the hashes, so one read had a new lease and older hashes.
    const rolledBack = (server: string): Violation[] => {
      const tl = emptyTimeline();
      tl.fleet.push(fleetSample(100, { leader: "gpu-a1/1", leaderToken: 5, tokens: { tier: 5 }, server: "A" }));
      tl.fleet.push(fleetSample(300, { leader: "gpu-b1/2", leaderToken: 6, tokens: { tier: 6 }, server: "A" }));
      tl.fleet.push(fleetSample(500, { leader: "gpu-b2/3", leaderToken: 7, tokens: { tier: 5 }, server }));
      tl.fleet.push(fleetSample(700, { leader: "gpu-b2/3", leaderToken: 7, tokens: { tier: 7 }, server }));
      return checker().step(tl, [], 1000);
    };
    expect(rolledBack("B")).toEqual([]);
    // The same read from the server that had the newer hash: a write, and stale.
    expect(rolledBack("A").map((x) => x.invariant)).toEqual([INVARIANT.stale]);
  });

  it("makes unacknowledged L4 queue writes one violation per run of them", () => {
    const w = (t: number) => ({ t, ms: 5000, ok: false });
    const v = queueViolations([w(5000), w(1000), w(1100), w(1900)]);
    expect(v.map((x) => `${x.invariant} ${x.t} ${x.detail}`)).toEqual([
      `${INVARIANT.queued} 1000 3 L4 queue writes not acknowledged from 1.00s to 1.90s`,
      `${INVARIANT.queued} 5000 1 L4 queue write not acknowledged from 5.00s to 5.00s`,
    ]);
    expect(queueViolations([])).toEqual([]);
  });

  it("excuses a DOWN only while a fault touches the AZ (and its grace), once per stretch", () => {
    const tl = emptyTimeline();
    const w: FaultWindow[] = [{ n: 1, kind: "az-loss", target: "az-a", victims: ["az-a"], azs: ["az-a"], injectAt: 0, healAt: 1000, healedAt: 2000 }];
    for (const t of [500, 2500, 3500, 3700]) tl.fleet.push(fleetSample(t, { azState: { "az-a": "DOWN", "az-b": "OK" } }));
    tl.fleet.push(fleetSample(3900, { azState: { "az-a": "DOWN", "az-b": "DOWN" } }));
    const v = checker().step(tl, w, 4000);
    expect(v.map((x) => `${x.t} ${x.detail}`)).toEqual(["3500 az-a published DOWN in Redis with no fault touching it", "3900 az-b published DOWN in Redis with no fault touching it"]);
  });

  it("counts an SDK-class failure unless no server was in rotation anywhere while it was in flight", () => {
    const tl = emptyTimeline();
    tl.samples.push(sample(0, true), sample(1000, false), sample(2000, true));
    tl.failures.push({ t: 1200, end: 1300, client: SDK_CLIENT, why: "ECONNREFUSED" });
    tl.failures.push({ t: 2200, end: 2300, client: SDK_CLIENT, why: "HTTP 502" });
    tl.failures.push({ t: 2200, end: 2300, client: "llm-ha", why: "HTTP 502" });
    expect(noServerBetween(tl.samples, 1200, 1300, ["az-a_servers"])).toBe(true);
    expect(noServerBetween(tl.samples, 500, 900, ["az-a_servers"])).toBe(false);
    expect(noServerBetween(tl.samples, 500, 1100, ["az-a_servers"])).toBe(true);
    const c = checker();
    expect(c.step(tl, [], 2350)).toEqual([]); // not judged before judgeAfterMs
    const v = c.step(tl, [], 5000);
    expect(v.map((x) => x.invariant)).toEqual([INVARIANT.answered]);
    expect(v[0].detail).toMatch(/HTTP 502/);
    expect(c.counts).toEqual({ judged: 2, excusedCut: 0, excusedNoServer: 1, rollbacks: 0 });
  });
});
