/**
 * `llm-ha practice`: asks the leader for a practice wake of the standby now (issue 15), as an
 * SRE would after changing a launch template or a reservation, instead of waiting for the
 * schedule. It writes one key (`practice:request`, epoch ms); the leader acts on it on its
 * next period as on a schedule firing — skipped above L0 or when the standby is awake — and
 * records the outcome where `llm-ha status` shows the last practice. Same flags as `status`.
 */
import { CONNECT_TIMEOUT_MS, explainContact, firstContact, openFleetRedis } from "./command";
import { safeUrl } from "../util/log";

export async function practiceCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => {
    process.stderr.write(`llm-ha practice: ${line}\n`);
  };
  const opened = openFleetRedis(argv, "llmha-practice", err);
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  try {
    const contact = await firstContact(client, CONNECT_TIMEOUT_MS);
    if (contact !== null) {
      err(`cannot reach Redis at ${safeUrl(args.redisUrl)}: ${await explainContact(args.redisUrl, contact)}`);
      return 1;
    }
    const [sec, micro] = await client.redis.time();
    const at = Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
    await client.redis.set(keys.practiceRequest, String(at), "PX", 86_400_000);
    const leader = await client.redis.get(keys.leader);
    const standby = await client.redis.hget(keys.standbyWake, "az");
    process.stdout.write(
      `practice wake requested at ${new Date(at).toISOString()} for cluster ${keys.cluster}` +
        (standby ? ` (standby ${standby})` : "") +
        `\n${leader ? `the leader (${leader.replace(/:\d+$/, "")}) starts it on its next period` : "no leader holds the lease now: the next leader starts it"}` +
        ` unless the tier is above L0 or the standby is awake; \`llm-ha status\` shows the outcome under "practice"\n`,
    );
    return 0;
  } catch (e) {
    err(`cannot write the request to Redis: ${(e as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}
