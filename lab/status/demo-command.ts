/**
 * `llm-ha demo`: `llm-ha status` on a live fleet in one command, for a first look. It starts
 * its own redis-server on a free loopback port and the demo fleet of lab/status/demo.ts (real
 * heartbeats, lease, controller and fencing gate; only the cloud call is a stand-in), prints
 * the `llm-ha status` line to paste in another terminal, then lets faults come and go on a
 * fixed cycle so that the status view, its events and the tier move. Ctrl-C (or SIGTERM)
 * stops the fleet and the redis-server: nothing is left running.
 */
import { parseArgs } from "node:util";
import { flagErrorMessage } from "../../contracts/did-you-mean";
import { createLogger } from "../../agent/src/util/log";
import { sleep } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../engines/redis-server";
import { startDemoFleet, type DemoFleet, type DemoMode } from "./demo";

export const DEMO_USAGE = `Usage: llm-ha demo [--cluster NAME] [--fault-every S]

Starts a redis-server of its own (a free port on 127.0.0.1) and a demo fleet on it: two
active AZs and a standby one scaled to zero, six nodes with real heartbeats, leader lease and
controller (only the cloud call is a stand-in). Prints the \`llm-ha status\` line to paste in
another terminal, then faults come and go (a GPU missing, a slow probe, an engine down, each
healed later) so that the view, the tier and the events move. Ctrl-C stops the fleet and the
redis-server; nothing is left running.

  --cluster NAME    key namespace of the demo (default demo)
  --fault-every S   seconds between two changes (default 15, 1-600)
  --help            this text

Exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 could not start (redis-server missing...), 2 bad flags.
`;

/** The faults that come and go, in turn: (node, mode, what the line says). */
export const DEMO_CYCLE: readonly (readonly [string, DemoMode, string])[] = [
  ["a3", "up", "a3 healed: its GPU is back"],
  ["b1", "slow", "b1 degraded: its probe is slow"],
  ["a2", "up", "a2 healed: its probe is fast again"],
  ["b2", "down", "b2 down: its inference engine stopped answering"],
  ["b1", "up", "b1 healed"],
  ["b2", "up", "b2 healed: its engine answers again"],
  ["a3", "gpu-missing", "a3 unhealthy: a GPU is missing"],
  ["a2", "slow", "a2 degraded: its probe is slow"],
];

export async function demoCommand(argv: string[]): Promise<number> {
  const options = { cluster: { type: "string" }, "fault-every": { type: "string" }, help: { type: "boolean", short: "h" } } as const;
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (e) {
    process.stderr.write(`llm-ha demo: ${flagErrorMessage(e, Object.keys(options))} (see llm-ha demo --help)\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(DEMO_USAGE);
    return 0;
  }
  const every = values["fault-every"] ?? "15";
  if (!/^\d+$/.test(every) || Number(every) < 1 || Number(every) > 600) {
    process.stderr.write(`llm-ha demo: --fault-every must be a whole number of seconds from 1 to 600, got ${JSON.stringify(every)}\n`);
    return 2;
  }
  const cluster = values.cluster ?? "demo";
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const say = (line: string): void => {
    process.stdout.write(`${new Date().toISOString().slice(11, 19)}  ${line}\n`);
  };
  let redis: RedisServerHandle | undefined;
  let fleet: DemoFleet | undefined;
  try {
    redis = await startRedisServer();
    say(`redis-server pid ${redis.pid} on ${redis.url}`);
    say("starting the demo fleet (a few seconds)...");
    fleet = await startDemoFleet({ redisUrl: redis.url, cluster, log: createLogger({ level: "silent" }), intervalMs: 500 });
    say(`fleet up: 6 nodes in us-east-1a and us-east-1b, standby us-east-1c; leader ${fleet.leader().id}`);
    process.stdout.write(`\nIn another terminal:\n\n  bin/llm-ha status --redis-url ${redis.url} --cluster ${cluster} --watch\n\nCtrl-C here stops the fleet and the redis-server.\n\n`);
    for (let i = 0; !stop.signal.aborted; i++) {
      await sleep(Number(every) * 1000, stop.signal).catch(() => undefined);
      if (stop.signal.aborted) break;
      const [node, mode, line] = DEMO_CYCLE[i % DEMO_CYCLE.length];
      fleet.set(node, mode);
      say(line);
    }
    return 0;
  } catch (e) {
    if (stop.signal.aborted) return 0;
    process.stderr.write(`llm-ha demo: ${(e as Error).message}\n`);
    return 1;
  } finally {
    process.stdout.write("stopping the fleet and the redis-server...\n");
    await fleet?.stop();
    await redis?.stop();
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    process.stdout.write("stopped: nothing of the demo is left running\n");
  }
}
