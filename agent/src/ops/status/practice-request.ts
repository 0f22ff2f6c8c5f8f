/**
 * `llm-ha practice`: asks the leader for a practice wake of the standby now, as an
 * SRE would after changing a launch template or a reservation, instead of waiting for the
 * schedule. It reads the fleet first — tier, standby, leader, a practice already running — and
 * refuses what the leader would skip (the tier above L0, the standby awake) or could not do (no
 * data for the cluster, no standby AZ), so the answer is known now rather than in `status`
 * later. Otherwise it writes one key (`practice:request`, epoch ms) that the leader acts on in
 * its next period as on a schedule firing, and says who will do what. Same flags as `status`.
 */
import { CONNECT_TIMEOUT_MS, explainContact, firstContact, openFleetRedis } from "./command";
import { readFleetView } from "./view";
import type { FleetView } from "./types";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../fleet/redis/keys";
import { safeUrl } from "../../util/log";

export const PRACTICE_USAGE = `Usage: llm-ha practice [fleet flags] [--wait [--wait-timeout S]]

Asks the leader for a practice wake of the standby AZ now, instead of at the next scheduled
one (LLMHA_PRACTICE_WAKE). Reads the fleet first and says what will happen: the leader wakes
the standby on its next period, checks that a standby node serves within the budget, records
the outcome (\`llm-ha status\` shows it under "practice", and the request while it is pending)
and lets the standby sleep again. Refuses what the leader would skip: the tier above L0 (an
incident), the standby already awake, a practice already running; and a cluster with no data
or no standby AZ.

  --redis-url URL       redis:// or rediss:// (default $LLMHA_REDIS_URL; required)
  --cluster NAME        key namespace (default $LLMHA_CLUSTER or "default")
  --redis-ca-file PATH  CA bundle for rediss:// (default $LLMHA_REDIS_CA_FILE)
  --wait                follow the request until the leader records its outcome
  --wait-timeout S      give up waiting after S seconds (default 1800: the practice budget,
                        LLMHA_PRACTICE_WAKE_BUDGET_MS, is 1200 s by default)
  --help                this text

Exit codes: 0 requested (with --wait: served, a standby node served within the budget),
1 Redis unreachable, 2 bad flags, 3 no data for the cluster, 4 refused (it would be
skipped: the reason is printed; with --wait also skipped by the leader), 5 failed (with
--wait: no standby node served within the budget, or capacity unavailable), 6 interrupted
(with --wait: an incident took the standby over), 7 no outcome within --wait-timeout.
`;

/** Exit code of a request the leader would skip (refused now, or skipped by the leader under `--wait`). */
export const PRACTICE_REFUSED = 4;
/** Exit codes under `--wait`, by the outcome the leader recorded; 7 when none came in time. */
export const PRACTICE_EXIT: Readonly<Record<string, number>> = { served: 0, skipped: PRACTICE_REFUSED, failed: 5, interrupted: 6 };
export const PRACTICE_WAIT_TIMED_OUT = 7;
const DEFAULT_WAIT_TIMEOUT_S = 1800;
/** How often `--wait` reads the \`practice\` hash. */
const WAIT_POLL_MS = 500;
/** practice's own flags, beside the fleet flags. */
const OWN_FLAGS = ["wait", "wait-timeout"];

/** `--wait` and `--wait-timeout` taken out of `argv` (the rest are fleet flags); a string is a usage error. */
export function takeWaitFlags(argv: readonly string[]): { wait: boolean; timeoutMs: number; rest: string[] } | string {
  let wait = false;
  let timeout: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--wait") wait = true;
    else if (a === "--wait-timeout") {
      if (i + 1 >= argv.length) return "--wait-timeout needs a number of seconds";
      timeout = argv[++i];
    } else if (a.startsWith("--wait-timeout=")) timeout = a.slice("--wait-timeout=".length);
    else rest.push(a);
  }
  if (timeout !== undefined && !wait) return "--wait-timeout only applies with --wait";
  if (timeout !== undefined && !/^\d+$/.test(timeout)) return `--wait-timeout must be a whole number of seconds, got ${JSON.stringify(timeout)}`;
  const seconds = timeout === undefined ? DEFAULT_WAIT_TIMEOUT_S : Number(timeout);
  if (seconds < 1 || seconds > 86_400) return `--wait-timeout must be from 1 to 86400 seconds, got ${seconds}`;
  return { wait, timeoutMs: seconds * 1000, rest };
}

/** Why the leader would not run a practice now, or null when it would (the rules of actuators/practice.ts). */
export function practiceRefusal(view: FleetView): string | null {
  if (!view.standby) return "no standby AZ is published for this cluster: practice wakes need LLMHA_STANDBY_AZ on the agents and a leader";
  if (view.practice?.runningSince != null) return `a practice wake is already running (since ${new Date(view.practice.runningSince).toISOString()}); follow it with llm-ha status`;
  if (view.tier && view.tier.level !== "L0") return `the tier is ${view.tier.level} (${view.tier.reason || "no reason given"}): the leader skips a practice above L0, as the fleet is in an incident; ask again at L0`;
  if (view.standby.wake) return `the standby ${view.standby.az} is already awake (${view.standby.reason || "no reason given"}): nothing to practise`;
  return null;
}

export async function practiceCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => {
    process.stderr.write(`llm-ha practice: ${line}\n`);
  };
  const own = takeWaitFlags(argv);
  if (typeof own === "string") {
    err(`${own} (see llm-ha practice --help)`);
    return 2;
  }
  const opened = openFleetRedis(own.rest, "llmha-practice", err, { name: "practice", usage: PRACTICE_USAGE, flags: OWN_FLAGS });
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  try {
    const contact = await firstContact(client, CONNECT_TIMEOUT_MS);
    if (contact !== null) {
      err(`cannot reach Redis at ${safeUrl(args.redisUrl)}: ${await explainContact(args.redisUrl, contact)}`);
      return 1;
    }
    const view = await readFleetView(client.redis, keys, { events: 1, url: safeUrl(args.redisUrl) });
    if (view.empty) {
      err(`no llm-ha data for cluster ${keys.cluster} in Redis: no agent or leader writes there, so no one would act on a request (check --cluster)`);
      return 3;
    }
    const refusal = practiceRefusal(view);
    if (refusal) {
      err(`not requested: ${refusal}`);
      return PRACTICE_REFUSED;
    }
    const at = view.now;
    await client.redis.set(keys.practiceRequest, String(at), "PX", 86_400_000);
    const leader = view.leader.holder?.replace(/\/\d+$/, "") ?? null;
    const tier = view.tier ? `tier ${view.tier.level}${view.tier.stale ? ", stale: no leader refreshed it lately" : ""}` : "no tier published yet";
    process.stdout.write(
      `practice wake requested at ${new Date(at).toISOString()} for cluster ${keys.cluster} (${tier}; standby ${view.standby!.az} asleep)\n` +
        `${leader ? `the leader (${leader}) wakes the standby ${view.standby!.az} on its next period` : "no leader holds the lease now: the next leader wakes the standby when it takes over"}` +
        `, checks that a standby node serves, records the outcome and lets it sleep again; \`llm-ha status\` shows it under "practice"\n`,
    );
    return own.wait ? await followPractice(client.redis, keys, at, own.timeoutMs) : 0;
  } catch (e) {
    err(`cannot read or write the request in Redis: ${(e as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}

/**
 * `--wait`: reads the \`practice\` hash until the leader has acted on the request made at `at`
 * (its \`firedAt\` reaches it) and no practice runs any more; then the recorded outcome is this
 * request's. Says when the practice starts; a Redis hiccup meanwhile is waited out.
 */
async function followPractice(redis: Redis, keys: RedisKeys, at: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let started = false;
  let unreachable = false;
  process.stdout.write(`waiting for the outcome (up to ${Math.round(timeoutMs / 1000)} s)...\n`);
  while (Date.now() < deadline) {
    let h: (string | null)[] | null = null;
    try {
      h = await redis.hmget(keys.practice, "firedAt", "startedAt", "lastOutcome", "lastWakeMs", "lastReason");
      unreachable = false;
    } catch (e) {
      if (!unreachable) process.stderr.write(`llm-ha practice: cannot read the outcome (${(e as Error).message}); still waiting\n`);
      unreachable = true;
    }
    if (h && Number(h[0]) >= at) {
      const runningSince = Number(h[1]) || null;
      if (runningSince !== null && !started) {
        started = true;
        process.stdout.write(`practice wake started at ${new Date(runningSince).toISOString()}: the standby is waking\n`);
      } else if (runningSince === null && h[2]) {
        const outcome = h[2];
        const wake = outcome === "served" && h[3] ? ` in ${(Number(h[3]) / 1000).toFixed(1)} s` : "";
        const line = `practice wake ${outcome}${wake}: ${h[4] ?? ""}\n`;
        (outcome === "served" ? process.stdout : process.stderr).write(outcome === "served" ? line : `llm-ha practice: ${line}`);
        return PRACTICE_EXIT[outcome] ?? 1;
      }
    }
    await new Promise((r) => setTimeout(r, Math.min(WAIT_POLL_MS, Math.max(1, deadline - Date.now()))));
  }
  process.stderr.write(`llm-ha practice: no outcome within ${Math.round(timeoutMs / 1000)} s (${started ? "the practice is still running" : "no leader acted on the request: is one running with LLMHA_STANDBY_AZ?"}); follow it with llm-ha status\n`);
  return PRACTICE_WAIT_TIMED_OUT;
}
