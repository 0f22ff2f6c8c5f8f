/**
 * `llm-ha drill --chaos`: a seeded campaign of overlapping random faults from the
 * drill's catalogue (`schedule.ts`, `faults.ts`) on the drill's fleet with its steady traffic
 * throughout, the invariants (`invariants.ts`) checked at every observer sample, then the
 * fleet's return to L0 and the absence of anything left running. A broken invariant prints the
 * seed, the invariant and the timeline around it; the run then exits 1.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { sleep } from "../../../agent/src/util/net";
import { pidAlive } from "../../cli-process";
import { healthy, mark, standbyAtZero, steady, until } from "../scenarios/runner";
import { DRILL_TIMING } from "../settings";
import type { Sample } from "../timeline";
import { createWorld, noLinksWhy } from "../world";
import { QueueProbe, type QueueWrite } from "../scenarios/queue-probe";
import { fire, type BusyNodes } from "./faults";
import { excerpt, INVARIANT, InvariantChecker, type FaultWindow, type Violation } from "./invariants";
import { AZ_RECOVERY_MS, CHAOS_CATALOGUE, formatSchedule, makeSchedule, type ChaosEvent, type ChaosFleet } from "./schedule";

export interface ChaosArgs {
  /** Absent: drawn from the clock and printed (pass it back with --seed to replay). */
  seed?: number;
  minutes: number;
  concurrency: number;
  allAzs: boolean;
}

export const CHAOS_USAGE = `  --chaos                 a seeded chaos campaign instead of the fault matrix: overlapping random
                          faults from the whole catalogue, steady traffic, invariants checked at
                          every sample (docs/drill.md, "The chaos campaign")
  --seed N                the campaign's seed (default: drawn and printed); the same seed with the
                          same --minutes, --nodes and chaos flags replays the same schedule
  --minutes M             the campaign's length in minutes (default 5; faults all healed by then)
  --chaos-concurrency K   faults active at once, at most (default 2)
  --chaos-all-azs         let concurrent faults touch every active AZ at once (default: never)
  --json, --out, --nodes and --no-netns as above; exit 1 on a violation
`;

/** The chaos flags as given (`--chaos` sets `on`); `chaosArgs` fills in the defaults. */
export interface ChaosFlags {
  on?: boolean;
  seed?: number;
  minutes?: number;
  concurrency?: number;
  allAzs?: boolean;
}

/** Reads one chaos flag into `c`; false when `flag` is none (its value is read with `value`). */
export function parseChaosFlag(c: ChaosFlags, flag: string, value: () => string, bad: (message: string) => Error): boolean {
  const int = (lo: number, hi: number): number => {
    const n = Number(value());
    if (!Number.isInteger(n) || n < lo || n > hi) throw bad(`${flag} must be an integer from ${lo} to ${hi}`);
    return n;
  };
  switch (flag) {
    case "--chaos":
      c.on = true;
      return true;
    case "--seed":
      c.seed = int(0, 2 ** 32 - 1);
      return true;
    case "--minutes": {
      const m = Number(value());
      if (!Number.isFinite(m) || m <= 0 || m > 24 * 60) throw bad("--minutes must be a number above 0, at most 1440");
      c.minutes = m;
      return true;
    }
    case "--chaos-concurrency":
      c.concurrency = int(1, 8);
      return true;
    case "--chaos-all-azs":
      c.allAzs = true;
      return true;
    default:
      return false;
  }
}

export function chaosArgs(c: ChaosFlags): ChaosArgs {
  return { ...(c.seed !== undefined ? { seed: c.seed } : {}), minutes: c.minutes ?? 5, concurrency: c.concurrency ?? 2, allAzs: c.allAzs ?? false };
}

/** After the last heal: tier L0, every node healthy at full weight, every active AZ in DNS, the standby at zero, within this. */
export const SETTLE_MS = 45_000 + DRILL_TIMING.standbyHoldMs;
/** A fault's AZ counts as touched this long after its heal ended. */
export const TOUCH_GRACE_MS = 20_000;
/** The timeline printed around a violation. */
const BEFORE_MS = 4000;
const AFTER_MS = 3000;

export interface ChaosReport {
  command: string;
  seed: number;
  minutesPlanned: number;
  /** From the first fault's slot to the end of the settle check. */
  minutesRun: number;
  nodes: number;
  concurrency: number;
  allAzs: boolean;
  /** Link faults in the catalogue (true) or why not. */
  linkFaults: boolean | string;
  /** The fleet the schedule was drawn for (with the seed and flags above: the same schedule again). */
  fleet: ChaosFleet;
  schedule: ChaosEvent[];
  fired: FaultWindow[];
  skipped: { n: number; kind: string; why: string }[];
  errors: string[];
  violations: Violation[];
  settleMs: number | null;
  /** SDK-class failures judged and excused; samples where published hashes went back to older tokens (the endpoint's server lost writes). */
  answered: { judged: number; excusedCut: number; excusedNoServer: number; rollbacks: number };
  /** The L4 queue written every 100 ms through the campaign (the fallback's own producer); null when it could not start. */
  queue: { writes: number; failed: number; redirected: number; maxMs: number } | null;
  traffic: { sent: Record<string, number>; failed: Record<string, number> };
  pass: boolean;
  outDir: string;
}

/** Why a fault due now would break the schedule's bounds given the faults as they run (null: it fits). */
export function lateConflict(ev: ChaosEvent, windows: readonly FaultWindow[], t: number, o: Pick<ChaosArgs, "concurrency" | "allAzs">, azs: readonly string[], planned: (n: number) => readonly string[]): string | null {
  const holding = windows.filter((w) => w.healedAt === null);
  if (holding.length >= o.concurrency) return `${holding.length} faults still held or healing (${holding.map((w) => `#${w.n}`).join(", ")}): over the concurrency`;
  if (o.allAzs || ev.azs.length === 0) return null;
  // By the schedule's AZs, as the schedule was drawn (a leader fault's node takes no capacity: it touches none here).
  const recent = windows.filter((w) => planned(w.n).length && (w.healedAt === null || t < w.healedAt + AZ_RECOVERY_MS));
  const touched = new Set([...recent.flatMap((w) => planned(w.n)), ...ev.azs]);
  return azs.every((az) => touched.has(az)) ? `with ${recent.map((w) => `#${w.n}`).join(", ")} still held or recovering it would touch every AZ at once` : null;
}

/** Unacknowledged queue writes as violations: one per run of failures no more than a second apart. */
export function queueViolations(failures: readonly QueueWrite[]): Violation[] {
  const out: Violation[] = [];
  let run: QueueWrite[] = [];
  const close = (): void => {
    if (run.length) out.push({ invariant: INVARIANT.queued, t: run[0].t, detail: `${run.length} L4 queue write${run.length === 1 ? "" : "s"} not acknowledged from ${(run[0].t / 1000).toFixed(2)}s to ${(run[run.length - 1].t / 1000).toFixed(2)}s` });
    run = [];
  };
  for (const w of [...failures].sort((a, b) => a.t - b.t)) {
    if (run.length && w.t - run[run.length - 1].t > 1000) close();
    run.push(w);
  }
  close();
  return out;
}

type Io = { out: (s: string) => void; err: (s: string) => void };

/** Runs one campaign; resolves the exit code (1 on a violation or a fault that could not be injected or healed, 2 without a fleet layer). */
export async function runChaos(args: { nodes: number; out?: string; json?: string; noNetns?: boolean; chaos: ChaosArgs }, io: Io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }): Promise<number> {
  const t0 = Date.now();
  const now = (): number => Date.now() - t0;
  const progress = (line: string): void => io.err(`[chaos ${(now() / 1000).toFixed(1).padStart(7)}s] ${line}\n`);
  const seed = args.chaos.seed ?? (t0 ^ (process.pid << 8)) >>> 0;
  const why = noLinksWhy(args.noNetns);
  if (why !== null) progress(`link faults left out of the catalogue (${CHAOS_CATALOGUE.filter((f) => f.needsNetns).map((f) => f.kind).join(", ")}): ${why}`);
  const outDir = resolve(args.out ?? mkdtempSync(join(tmpdir(), "llmha-chaos-")));
  mkdirSync(outDir, { recursive: true });
  const world = createWorld({ nodes: args.nodes, outDir, now, progress, netns: why === null, redisPaths: why === null });
  const { tl } = world;
  const violations: Violation[] = [];
  const errors: string[] = [];
  const skipped: ChaosReport["skipped"] = [];
  const windows: FaultWindow[] = [];
  let schedule: ChaosEvent[];
  let fleet: ChaosFleet;
  let settleMs: number | null = null;
  let c0 = 0;
  let checker: InvariantChecker;
  let queue: QueueProbe | null = null;
  let queueFigures: ChaosReport["queue"] = null;
  const proxies: string[] = [];
  const printed = new Set<Violation>();
  const report = (v: Violation): void => {
    if (printed.has(v)) return;
    printed.add(v);
    v.excerpt ??= v.invariant === INVARIANT.nothingLeft ? "" : excerpt(tl, v.t, { beforeMs: BEFORE_MS, afterMs: AFTER_MS, proxies });
    io.out(`\nVIOLATION seed ${seed}: ${v.invariant} at ${(v.t / 1000).toFixed(2)}s: ${v.detail}\n${v.excerpt ? `  timeline ${BEFORE_MS / 1000} s before to ${AFTER_MS / 1000} s after:\n${v.excerpt}\n` : ""}`);
  };
  try {
    const ctx = await world.start();
    const { stack } = ctx;
    if (!ctx.fleetWired) {
      io.err("llm-ha drill --chaos: no leader in Redis: the campaign needs the fleet layer running in the agents\n");
      return 2;
    }
    const active = stack.azs.filter((a) => !a.standby);
    proxies.push(...stack.azs.map((a) => a.proxy));
    // The L4 queue as the L1 pods hold it, written throughout: the broker faults' invariant.
    queue = await QueueProbe.start({ cluster: stack.cluster, placement: stack.placement, now }).catch((err: Error) => {
      errors.push(`L4 queue not started (kafka-broker-loss cannot fire): ${err.message}`);
      progress(`L4 queue not started: ${err.message}`);
      return null;
    });
    fleet = { azs: active.map((a) => a.name), nodes: stack.nodes.filter((n) => !stack.azOf(n).standby).map((n) => ({ id: n.id, az: n.az })) };
    schedule = makeSchedule(fleet, { seed, minutes: args.chaos.minutes, concurrency: args.chaos.concurrency, allAzs: args.chaos.allAzs, links: why === null });
    io.out(
      `chaos campaign: seed ${seed}, ${args.chaos.minutes} min, --nodes ${args.nodes}, at most ${args.chaos.concurrency} faults at once, ` +
        `${args.chaos.allAzs ? "every AZ at once allowed" : "never every AZ at once"}${why === null ? "" : ", no link faults"}; ${schedule.length} faults (time from the campaign's start, fault, target, hold):\n${formatSchedule(schedule)}\n`,
    );
    if (!(await steady(ctx, 30_000))) progress("fleet not steady before the first fault (campaign starts all the same)");
    c0 = now();
    const ck = new InvariantChecker({
      azs: active.map((a) => ({ name: a.name, address: a.address, proxy: a.proxy })),
      proxies,
      graceMs: TOUCH_GRACE_MS,
      judgeAfterMs: 2000,
      from: c0,
      deaths: () => {
        const offset = Date.now() - now();
        return stack.deaths().map((d) => ({ ...d, t: d.at - offset }));
      },
    });
    checker = ck;
    let checking = true;
    const checkLoop = (async () => {
      let pidsAt = 0;
      while (checking) {
        await ctx.observer.tick();
        for (const v of ck.step(tl, windows, now())) violations.push(v);
        for (const v of violations) if (now() >= v.t + AFTER_MS) report(v);
        if (now() - pidsAt > 1000) {
          world.notePids();
          pidsAt = now();
        }
      }
    })();
    const busy: BusyNodes = new Set();
    const chain = new Map<string, Promise<void>>();
    const tasks = schedule.map((ev) => {
      const before = ev.holds.map((h) => chain.get(h));
      const task = (async () => {
        await sleep(Math.max(0, c0 + ev.at - now()));
        // A fault on a target a slower heal still holds waits for that heal.
        await Promise.all(before);
        const label = `#${ev.n} ${ev.kind} ${ev.target}`;
        // A heal slower than its hold stretches its fault past the schedule's slot: what the
        // schedule promised (its concurrency, never every AZ) is checked again against the faults as they run.
        const late = lateConflict(ev, windows, now(), args.chaos, fleet.azs, (n) => schedule[n - 1].azs);
        if (late) {
          skipped.push({ n: ev.n, kind: ev.kind, why: late });
          progress(`${label}: skipped (${late})`);
          return;
        }
        const injectAt = now();
        // In the windows before it acts (an effect seen while the inject still runs is excused by it); completed once it has.
        const w: FaultWindow = { n: ev.n, kind: ev.kind, target: ev.target, victims: [], azs: [...ev.azs], injectAt, healAt: null, healedAt: null };
        windows.push(w);
        let fired;
        try {
          fired = await fire(ctx, ev, busy, queue);
        } catch (err) {
          // Part of it may have acted: it keeps its window, ended now.
          w.healAt = w.healedAt = now();
          errors.push(`${label}: inject failed: ${(err as Error).message}`);
          progress(`${label}: inject failed: ${(err as Error).message}`);
          return;
        }
        if ("skipped" in fired) {
          windows.splice(windows.indexOf(w), 1);
          skipped.push({ n: ev.n, kind: ev.kind, why: fired.skipped });
          progress(`${label}: skipped (${fired.skipped})`);
          return;
        }
        w.victims = fired.victims;
        w.azs = fired.azs;
        tl.marks.push({ t: injectAt, kind: "inject", label: `${label} (${fired.victims.join(",")})` });
        progress(`${label}: injected on ${fired.victims.join(", ")} for ${(ev.durationMs / 1000).toFixed(1)}s`);
        await sleep(Math.max(0, injectAt + ev.durationMs - now()));
        w.healAt = mark(ctx, "heal", `heal #${ev.n} ${ev.kind}`);
        try {
          await fired.heal();
        } catch (err) {
          errors.push(`#${ev.n} ${ev.kind}: heal failed: ${(err as Error).message}`);
          progress(`#${ev.n} ${ev.kind}: heal failed: ${(err as Error).message}`);
        }
        w.healedAt = now();
        world.notePids();
      })();
      const done = task.catch(() => undefined);
      for (const h of ev.holds) chain.set(h, done);
      return done;
    });
    await Promise.all(tasks);
    const lastHeal = now();
    progress(`last heal done; waiting up to ${SETTLE_MS / 1000} s for L0, every node healthy, every active AZ in DNS, the standby at zero`);
    const settled = (s: Sample): boolean =>
      ctx.observer.latestFleet()?.tier === "L0" &&
      stack.running().every((n) => healthy(ctx, s, n)) &&
      s.dns !== null &&
      active.every((a) => s.dns!.includes(a.address)) &&
      standbyAtZero(ctx);
    if (await until(ctx, SETTLE_MS, settled)) settleMs = now() - lastHeal;
    else {
      const s = ctx.observer.latest();
      const sick = s ? stack.running().filter((n) => !healthy(ctx, s, n)).map((n) => `${n.id} ${s.nodes[n.id]?.status ?? "?"}`) : [];
      violations.push({ invariant: INVARIANT.settled, t: now(), detail: `not within ${SETTLE_MS / 1000} s of the last heal: tier ${ctx.observer.latestFleet()?.tier ?? "?"}; not healthy: ${sick.join(", ") || "none"}; DNS ${s?.dns?.join(",") ?? "?"}` });
    }
    // Failures still in flight at the end are judged too.
    await sleep(2500);
    checking = false;
    await checkLoop;
    if (ctx.cuts && ctx.cuts.cuts().length) violations.push({ invariant: INVARIANT.nothingLeft, t: now(), detail: `iptables rules left: ${ctx.cuts.cuts().map((l) => `${l.from}>${l.to}`).join(", ")}` });
    await world.stopTraffic();
    for (const v of ck.step(tl, windows, Infinity)) violations.push(v);
    if (queue) {
      await queue.stop();
      violations.push(...queueViolations(queue.failures().filter((w) => w.t >= c0)));
      const f = queue.figures(c0, Infinity);
      queueFigures = { writes: f.writes, failed: f.failed, redirected: f.redirected, maxMs: f.maxMs };
    }
  } finally {
    progress("stopping everything");
    await queue?.stop();
    await world.close();
  }
  const left = [...world.pids].filter(pidAlive);
  if (left.length) violations.push({ invariant: INVARIANT.nothingLeft, t: now(), detail: `${left.length} of the ${world.pids.size} processes the drill started still run: ${left.join(", ")}` });
  for (const v of violations) report(v);
  writeFileSync(join(outDir, "timeline.json"), JSON.stringify(tl));
  const failed: Record<string, number> = {};
  for (const f of tl.failures) failed[f.client] = (failed[f.client] ?? 0) + 1;
  const minutesRun = c0 ? (now() - c0) / 60_000 : 0;
  const out: ChaosReport = {
    command: `llm-ha drill ${process.argv.slice(3).join(" ")}`.trim(),
    seed,
    minutesPlanned: args.chaos.minutes,
    minutesRun,
    nodes: args.nodes,
    concurrency: args.chaos.concurrency,
    allAzs: args.chaos.allAzs,
    linkFaults: why ?? true,
    fleet,
    schedule,
    fired: windows,
    skipped,
    errors,
    violations,
    settleMs,
    answered: checker.counts,
    queue: queueFigures,
    traffic: { sent: tl.sent, failed },
    pass: violations.length === 0 && errors.length === 0,
    outDir,
  };
  if (args.json) writeFileSync(args.json, JSON.stringify(out, null, 2) + "\n");
  const byInvariant = Object.values(INVARIANT).map((name) => `${name}: ${violations.filter((v) => v.invariant === name).length}`);
  io.out(
    `\nchaos seed ${seed}: ${minutesRun.toFixed(2)} minutes run, ${windows.length} faults fired (${skipped.length} skipped, ${errors.length} errors), ${violations.length} violation${violations.length === 1 ? "" : "s"}\n` +
      `  ${byInvariant.join("; ")}\n` +
      `  settled ${settleMs === null ? "never" : `${(settleMs / 1000).toFixed(1)} s`} after the last heal (bound ${SETTLE_MS / 1000} s); SDK-class failures judged ${out.answered.judged} (excused: ${out.answered.excusedCut} cut with their server, ${out.answered.excusedNoServer} with no server anywhere); Redis rollbacks seen ${out.answered.rollbacks}\n` +
      `  requests: ${Object.entries(tl.sent).map(([c, n]) => `${c} ${failed[c] ?? 0} failed of ${n}`).join("; ")}\n` +
      `  L4 queue: ${queueFigures ? `${queueFigures.writes - queueFigures.failed} of ${queueFigures.writes} writes acknowledged, ${queueFigures.redirected} past a lost broker, slowest ${queueFigures.maxMs} ms` : "not written"}\n` +
      `${errors.map((e) => `  error: ${e}\n`).join("")}  replay: npm run drill -- --chaos --seed ${seed} --minutes ${args.chaos.minutes} --nodes ${args.nodes} --chaos-concurrency ${args.chaos.concurrency}${args.chaos.allAzs ? " --chaos-all-azs" : ""}\n` +
      `  timeline: ${join(outDir, "timeline.json")}${args.json ? `; json: ${args.json}` : ""}\n`,
  );
  return out.pass ? 0 : 1;
}
