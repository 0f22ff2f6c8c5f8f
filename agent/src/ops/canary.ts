/**
 * `llm-ha canary show` / `llm-ha canary record`, an operator's commands next to
 * `llm-ha practice`: show the expected canary answers per model key (learned from the fleet or
 * recorded, capped or not, who disagrees), and record one — the answers one node gave lately
 * (`--node`), or the fleet's current majority — as the expectation of a model (`--model`; it may
 * be left out when the fleet serves one model). A recorded expectation takes precedence over the
 * fleet's; recording the new answers after a deliberate change (engine, dtype) lifts the cap.
 * Same Redis flags as `status`.
 */
import { CONNECT_TIMEOUT_MS, explainContact, firstContact, openFleetRedis } from "./status/command";
import { safeUrl } from "../util/log";
import { didYouMean } from "../../../contracts/did-you-mean";
import type { CanaryTolerance } from "../node/canary/answers";
import { fleetMajority } from "../node/canary/learn";
import { readExpectations, readNodeAnswers, recordExpectation } from "../node/canary/store";

/** The agent's defaults (`LLMHA_CANARY_PREFIX_TOKENS`, `LLMHA_CANARY_LOGPROB_TOLERANCE`) for grouping the fleet's answers. */
const TOLERANCE: CanaryTolerance = { prefixTokens: 8, logprobDelta: 0.1 };
/** Answers older than this are not recorded (a node gone, a model changed). */
const RECENT_MS = 600_000;

export const CANARY_USAGE = `Usage:
  llm-ha canary show [fleet flags]
  llm-ha canary record [--model KEY] [--node ID] [fleet flags]

  show     the expected canary answers per model key (id@revision …), learned or recorded
  record   record the fleet's current majority answers (or one node's, --node) as the expectation of --model

Fleet flags: --redis-url URL (default $LLMHA_REDIS_URL), --cluster NAME, --redis-ca-file PATH
`;

/** Takes `--name value` out of argv; returns the value (undefined when absent). */
function take(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  argv.splice(i, 2);
  return v;
}

export async function canaryCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => {
    process.stderr.write(`llm-ha canary: ${line}\n`);
  };
  const [sub, ...rest] = argv;
  if (sub === "--help" || sub === "-h" || sub === "help") {
    process.stdout.write(CANARY_USAGE);
    return 0;
  }
  if (sub !== "show" && sub !== "record") {
    err(sub === undefined ? "which one: show or record? (see llm-ha canary --help)" : `unknown subcommand ${JSON.stringify(sub)}${didYouMean(sub, ["show", "record"])} (see llm-ha canary --help)`);
    return 2;
  }
  const model = take(rest, "--model");
  const node = take(rest, "--node");
  if (sub === "show" && (model !== undefined || node !== undefined)) {
    err("--model and --node are for record");
    return 2;
  }
  const opened = openFleetRedis(rest, "llmha-canary", err, { name: "canary", usage: CANARY_USAGE });
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  try {
    const contact = await firstContact(client, CONNECT_TIMEOUT_MS);
    if (contact !== null) {
      err(`cannot reach Redis at ${safeUrl(args.redisUrl)}: ${await explainContact(args.redisUrl, contact)}`);
      return 1;
    }
    if (sub === "show") {
      const all = await readExpectations(client.redis, keys);
      if (Object.keys(all).length === 0) process.stdout.write(`no canary expectation in cluster ${keys.cluster} yet\n`);
      for (const [m, e] of Object.entries(all)) {
        process.stdout.write(
          `${m}: ${e.source} since ${new Date(e.at).toISOString()}, ${Object.keys(e.answers).length} answers; ${e.agreeing}/${e.nodes} nodes agree` +
            `${e.disagreeing.length ? ` (differ: ${e.disagreeing.join(",")})` : ""}${e.capped ? "; CAPPED: most of the fleet disagrees, no drain" : ""}\n`,
        );
      }
      return 0;
    }
    const now = Date.now();
    const nodes = await readNodeAnswers(client.redis, keys, now, RECENT_MS);
    const models = [...new Set(nodes.map((n) => n.model))];
    const key = model ?? (models.length === 1 ? models[0] : undefined);
    if (key === undefined) {
      err(models.length ? `the fleet serves ${models.join(", ")}: pass --model KEY` : "no node has answered canaries in the last 10 minutes");
      return 2;
    }
    const serving = nodes.filter((n) => n.model === key);
    const from = node === undefined ? null : serving.find((n) => n.nodeId === node);
    if (node !== undefined && !from) {
      err(`node ${node} has no recent canary answers for ${key}`);
      return 2;
    }
    const answers = from ? from.answers : fleetMajority(serving, TOLERANCE);
    const e = await recordExpectation(client.redis, keys, key, answers, now);
    process.stdout.write(`recorded ${Object.keys(e.answers).length} canary answers for ${key} from ${from ? `node ${from.nodeId}` : `the majority of ${serving.length} nodes`}; the leader publishes it on its next period\n`);
    return 0;
  } catch (e) {
    err((e as Error).message);
    return 1;
  } finally {
    await client.close();
  }
}
