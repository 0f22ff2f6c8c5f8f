/**
 * The drill's running world, shared by the fault matrix (`command.ts`) and the chaos campaign
 * (`chaos/run.ts`): the stack, the observer, the DNS-resolving client loop, the steady traffic,
 * the link cuts where the drill has a namespace of its own, every pid it saw, and one clean-up
 * (also on Ctrl-C / SIGTERM) that stops all of it in reverse order.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { inDrillNetns, LinkCuts, netnsSupport } from "../engines/netns";
import { drillAuth } from "./credentials";
import { startObserver, type Observer } from "./observer";
import { detectFleet, MAIN_CLIENT, type ScenarioContext } from "./run-scenario";
import { sdkClient } from "./sdk-traffic";
import { CLIENT_TIMEOUT_MS, DRILL_TIMING } from "./settings";
import { BASELINE_DEFAULT, BASELINE_TUNED, DRILL_MODEL, startStack, type DrillStack } from "./stack";
import { emptyTimeline, type Timeline } from "./timeline";
import { startTraffic, type Traffic } from "./traffic";

/** Why links cannot be cut here (null: the drill runs in its own network namespace, they can). */
export function noLinksWhy(noNetns?: boolean): string | null {
  if (inDrillNetns()) return null;
  if (noNetns) return "--no-netns";
  const s = netnsSupport();
  return s.ok ? "not in the drill's own network namespace" : s.why;
}

export interface WorldOptions {
  nodes: number;
  outDir: string;
  now(): number;
  progress(line: string): void;
  /** Each node's own Redis path (placement.ts): for faults that cut or slow it. */
  redisPaths: boolean;
  /** The drill runs in its own network namespace: links can be cut. */
  netns: boolean;
  /** Spare instance slots per active AZ, nodes added to the first AZ, agent settings from the start (stack.ts). */
  spares?: number;
  firstAzExtra?: number;
  agentEnv?: Readonly<Record<string, string>>;
}

export interface DrillWorld {
  tl: Timeline;
  /**
   * Starts the stack, waits for a leader, starts the DNS loop and the traffic; resolves what a
   * scenario runs on. What started before a failure is stopped by `close`.
   */
  start(): Promise<ScenarioContext>;
  /** Every pid seen so far (call `notePids` after anything that starts processes). */
  pids: Set<number>;
  notePids(): void;
  /** Registers one more stop (last registered, first stopped; one `group`'s neighbours together). */
  track(stop: () => Promise<void>, group?: string): void;
  /** Stops the traffic and the observer (the figures are final after this). */
  stopTraffic(): Promise<void>;
  /** Stops everything and writes `pids.json`; idempotent. */
  close(): Promise<void>;
}

/** Stops in order, as waves: neighbours of one group together, every other stop alone. */
export function stopWaves(stops: readonly { stop: () => Promise<void>; group?: string }[]): (() => Promise<void>)[][] {
  const waves: { group?: string; stops: (() => Promise<void>)[] }[] = [];
  for (const s of stops) {
    const last = waves[waves.length - 1];
    if (last && s.group !== undefined && last.group === s.group) last.stops.push(s.stop);
    else waves.push({ group: s.group, stops: [s.stop] });
  }
  return waves.map((w) => w.stops);
}

/** The world, not started yet; from now on a Ctrl-C or SIGTERM stops everything it started and exits 130. */
export function createWorld(o: WorldOptions): DrillWorld {
  const stops: { stop: () => Promise<void>; group?: string }[] = [];
  const track = (stop: () => Promise<void>, group?: string): void => void stops.push({ stop, group });
  const pids = new Set<number>();
  const tl = emptyTimeline();
  let traffic: Traffic | null = null;
  let observer: Observer | null = null;
  let stack: DrillStack | null = null;
  const cuts = o.netns ? new LinkCuts() : null;
  let cleaning: Promise<void> | null = null;
  const stopTraffic = async (): Promise<void> => {
    await traffic?.stop();
    traffic = null;
    await observer?.stop();
  };
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      await stopTraffic();
      // Every cut healed before anything stops (the namespace takes what is left with it anyway).
      try {
        cuts?.healAll();
      } catch {
        // the namespace goes with the drill
      }
      // Last started, first stopped; each stop is idempotent. Neighbours of one group (the nodes,
      // whose agents each drain for a second) stop together: one after another they took 5 s.
      for (const wave of stopWaves(stops.reverse())) await Promise.all(wave.map((s) => s().catch(() => undefined)));
      await stack?.stop().catch(() => undefined);
    })());
  const close = async (): Promise<void> => {
    await cleanup();
    writeFileSync(join(o.outDir, "pids.json"), JSON.stringify([...pids]));
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    o.progress(`${sig}: stopping every process the drill started`);
    void close().then(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const notePids = (): void => {
    for (const p of stack?.pids() ?? []) pids.add(p);
  };
  const start = async (): Promise<ScenarioContext> => {
    stack = await startStack({
      nodes: o.nodes, dir: o.outDir, progress: o.progress, now: o.now, track, redisPaths: o.redisPaths,
      spares: o.spares, firstAzExtra: o.firstAzExtra, agentEnv: o.agentEnv,
    });
    tl.standbyAddress = stack.azs.find((a) => a.standby)?.address;
    const st = stack;
    notePids();
    observer = startObserver(st, tl, o.now, DRILL_TIMING);
    o.progress(`waiting for a leader in Redis (fleet layer)`);
    const fleetWired = await detectFleet(st.redis.url, new RedisKeys(st.cluster).leader, 3 * DRILL_TIMING.leaseTtlMs);
    o.progress(fleetWired ? "fleet layer running: leader elected" : "no leader in Redis: fleet scenarios (L2 state, DNS by AZ state, leader, Redis, blast radius) will be reported as not measured");
    const dnsAnswer: { v: string[] } = { v: [] };
    let rr = 0;
    let dnsClosed = false;
    const dnsLoop = (async () => {
      // The client resolves the service name like a resolver honouring the 1 s TTL would, a little more often.
      while (!dnsClosed) {
        try {
          dnsAnswer.v = await st.dns.query();
        } catch {
          // keep the last answer, as a resolver would
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    track(async () => {
      dnsClosed = true;
      await dnsLoop;
    });
    traffic = startTraffic({
      timeline: tl,
      now: o.now,
      model: DRILL_MODEL,
      timeoutMs: CLIENT_TIMEOUT_MS,
      clients: [
        { name: MAIN_CLIENT, workers: 3, headers: drillAuth("app"), target: () => (dnsAnswer.v.length ? `http://${dnsAnswer.v[rr++ % dnsAnswer.v.length]}:${st.port}` : null) },
        { name: BASELINE_DEFAULT, workers: 1, target: () => `http://127.0.0.1:${st.baselinePorts.default}` },
        { name: BASELINE_TUNED, workers: 1, target: () => `http://127.0.0.1:${st.baselinePorts.tuned}` },
        // What an application sees: the official SDK with its default retries, resolving the name per attempt.
        sdkClient({ address: () => (dnsAnswer.v.length ? dnsAnswer.v[rr++ % dnsAnswer.v.length] : null), port: st.port, workers: 2, model: DRILL_MODEL, timeline: tl, now: o.now }),
      ],
    });
    return { stack: st, tl, observer, now: o.now, progress: o.progress, fleetWired, cuts };
  };
  return { tl, start, pids, notePids, track, stopTraffic, close };
}
