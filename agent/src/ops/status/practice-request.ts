/**
 * `llm-ha practice`: asks the leader for a practice wake of the standby now (issue 15), as an
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
import { safeUrl } from "../../util/log";

export const PRACTICE_USAGE = `Usage: llm-ha practice [fleet flags]

Asks the leader for a practice wake of the standby AZ now, instead of at the next scheduled
one (LLMHA_PRACTICE_WAKE). Reads the fleet first and says what will happen: the leader wakes
the standby on its next period, checks that a standby node serves within the budget, records
the outcome (\`llm-ha status\` shows it under "practice") and lets the standby sleep again.
Refuses what the leader would skip: the tier above L0 (an incident), the standby already awake,
a practice already running; and a cluster with no data or no standby AZ.

  --redis-url URL       redis:// or rediss:// (default $LLMHA_REDIS_URL; required)
  --cluster NAME        key namespace (default $LLMHA_CLUSTER or "default")
  --redis-ca-file PATH  CA bundle for rediss:// (default $LLMHA_REDIS_CA_FILE)
  --help                this text

Exit codes: 0 requested, 1 Redis unreachable, 2 bad flags, 3 no data for the cluster,
4 refused (it would be skipped: the reason is printed).
`;

/** Exit code of a request the leader would skip. */
export const PRACTICE_REFUSED = 4;

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
  const opened = openFleetRedis(argv, "llmha-practice", err, { name: "practice", usage: PRACTICE_USAGE });
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
    return 0;
  } catch (e) {
    err(`cannot read or write the request in Redis: ${(e as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}
